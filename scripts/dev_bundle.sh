#!/usr/bin/env bash
# Copies what the GPU machine runs out of a build folder into a small git-ignored folder that a
# device call can carry (the whole build/ is too large to travel):
#   bash scripts/dev_bundle.sh [BUILD=build] [DEST=.dev]
# DEST gets libsage2.so*, bench/sage2-bench-*, tests/sage2_gpu_tests and tools/sage2-{autotune,cache,info,jit-worker}
# (statically linked; the Python console-script shims find tools/ beside the library), laid
# out like a build folder, so `bash bench/scoreboard_run.sh --build DEST` and
# `DEST/tests/sage2_gpu_tests` work there.
set -euo pipefail
build=${1:-build}
dest=${2:-.dev}
rm -rf "$dest"
mkdir -p "$dest/bench" "$dest/tests" "$dest/tools"
cp -a "$build"/libsage2.so* "$dest/"
cp -a "$build"/bench/sage2-bench-* "$dest/bench/"
cp -a "$build/tests/sage2_gpu_tests" "$dest/tests/"
cp -a "$build"/tools/sage2-autotune "$build"/tools/sage2-cache "$build"/tools/sage2-info "$build"/tools/sage2-jit-worker "$dest/tools/"
du -sh "$dest"
