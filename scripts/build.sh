#!/usr/bin/env bash
# The main job: install dependencies, build libsage2 and the tools (Release), install them under
# ./dist, then report what sage2 sees here (sage2-info). On a machine with a supported GPU it also
# warms the kernel cache for the common specialisations when sage2-autotune is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
cmake --install build --prefix "$PWD/dist" >/dev/null
echo "installed under $PWD/dist"
set +e
./dist/bin/sage2-info
status=$?
set -e
if [ $status -eq 0 ] && [ -x ./dist/bin/sage2-autotune ]; then
  ./dist/bin/sage2-autotune --device 0
fi
exit 0
