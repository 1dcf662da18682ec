#!/usr/bin/env bash
# The tests: install dependencies, build everything (library, tools, test suites, benchmark
# programs), run every suite through CTest — the CPU suite, the GPU suite (without a usable GPU it
# reports itself skipped), the install consumer, the layer check and the examples — then print what
# each suite said (doctest's counts, the skip reasons).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSAGE2_BUILD_TESTS=ON -DSAGE2_BUILD_BENCH=ON >/dev/null
cmake --build build -j"$(nproc)"
echo "sage2: running the suites through CTest (the CPU suite takes about 5 minutes on 2 cores)"
set +e
ctest --test-dir build --output-on-failure
status=$?
set -e
echo "sage2: what the suites said"
python3 scripts/ctest_summary.py build/Testing/Temporary/LastTest.log
exit $status
