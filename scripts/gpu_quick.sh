#!/usr/bin/env bash
# The quick GPU tier (issue 34: <= 3 minutes on an H100, beside the ~9.5-minute full suite): one or
# two test cases per area of the GPU suite — arch paths, both attention families against the
# emulation, the public API's matrix against fp64, graphs, bad input, the direct path, masks, non-finite
# inputs, varlen, threads (the quantize stage runs inside every attention case; its exhaustive
# variant test, 116 s of compiles on a cold cache, stays in the full suite) — with
# SAGE2_GPU_TESTS_REDUCED=1 (small shapes, no
# wall-clock bounds). The full suite stays the check before a release.
#   bash scripts/gpu_quick.sh [TEST_BINARY=build/tests/sage2_gpu_tests] [extra doctest options]
# Exit status: the test binary's. The wall time is printed last.
set -uo pipefail
bin=${1:-build/tests/sage2_gpu_tests}
shift $(($# > 0 ? 1 : 0))
cases=(
  "gpu arch paths: targets the device cannot run*"
  "gpu attention: quantize + ΔS + mma attention*"
  "gpu attention: matrix vs emulation*"
  "gpu attention: CUDA graph capture*"
  "gpu attention: bad input*"
  "gpu concurrency*"
  "gpu direct path: vs fp64*"
  "gpu mask: bool masks*"
  "gpu mask: bad masks*"
  "gpu nonfinite: Context::attention*"
  "gpu probe wgmma: fragment*"
  "gpu varlen: key padding*"
  "gpu wgmma: quantize + ΔS + wgmma attention*"
)
filter=$(IFS=,; echo "${cases[*]}")
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
t0=$SECONDS
SAGE2_GPU_TESTS_REDUCED=1 "$bin" -tc="$filter" "$@"
rc=$?
echo "quick GPU tier: exit $rc, $((SECONDS - t0)) s"
exit $rc
