#!/usr/bin/env bash
# The tests: install dependencies, build, run every suite through CTest. Without a GPU the GPU
# suite reports itself skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure
