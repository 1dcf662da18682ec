#!/usr/bin/env bash
# The main job: install dependencies, build libsage2 and the tools (Release; the test suites and
# benchmark programs are scripts/test.sh's), install them under ./dist, then report what sage2
# sees here (sage2-info). On a machine with a supported GPU it also warms the kernel cache for the
# common specialisations (sage2-autotune). Ends with one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSAGE2_BUILD_TESTS=OFF -DSAGE2_BUILD_BENCH=OFF >/dev/null
cmake --build build -j"$(nproc)"
cmake --install build --prefix "$PWD/dist" >/dev/null
set +e
./dist/bin/sage2-info
status=$?
set -e
gpu="no usable GPU (sage2-info exit $status: the library works; attention calls need an NVIDIA GPU of sm_80 or newer)"
if [ $status -eq 0 ]; then
  gpu="a supported GPU"
  if [ -x ./dist/bin/sage2-autotune ]; then
    ./dist/bin/sage2-autotune --device 0 && gpu="$gpu, kernel cache warmed (sage2-autotune --device 0)" \
      || gpu="$gpu; sage2-autotune failed (exit $?)"
  fi
fi
echo "sage2: libsage2, headers, CMake package and tools ($(ls dist/bin | tr '\n' ' ' | sed 's/ $//')) installed under $PWD/dist; $gpu"
exit 0
