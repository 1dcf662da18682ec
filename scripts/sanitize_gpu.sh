#!/usr/bin/env bash
# compute-sanitizer on the reduced GPU suite (issue #8): memcheck, racecheck, synccheck, initcheck.
#
#   bash scripts/sanitize_gpu.sh [LOG_DIR]        (default LOG_DIR: ./sanitize-logs)
#
# Runs the GPU suite's binary ($SAGE2_GPU_TESTS, default build/tests/sage2_gpu_tests) with
# SAGE2_GPU_TESTS_REDUCED=1 (test cases shrink to a few KV tiles and drop wall-clock bounds):
#   0. warm-up without a sanitizer: fills the kernel cache ($SAGE2_CACHE_DIR) so that no NVRTC
#      compile happens under a tool, and tells test failures apart from sanitizer findings;
#   1. each tool with --error-exitcode, its whole output in LOG_DIR/<tool>.log;
# then prints one line per tool ("memcheck: 0 errors ...", parsed from the tool's ERROR SUMMARY /
# RACECHECK SUMMARY) and exits 0 only when every tool ran to its summary with 0 errors and every
# test passed; 1 otherwise; 2 when the sanitizer or the binary is missing.
#
# Environment:
#   SAGE2_GPU_TESTS            test binary (default build/tests/sage2_gpu_tests)
#   COMPUTE_SANITIZER          sanitizer (default: on PATH, else /usr/local/cuda/bin/compute-sanitizer)
#   SAGE2_SANITIZE_TOOLS       tools to run (default "memcheck racecheck synccheck initcheck")
#   SAGE2_SANITIZE_TC_<TOOL>   doctest -tc filter for that tool (TOOL upper case; defaults below)
#   SAGE2_SANITIZE_TIMEOUT_<TOOL>  seconds before that tool's run is stopped (defaults: memcheck and
#                              racecheck 130, synccheck and initcheck 90, WARMUP 120: at most
#                              ~9.5 min in all, under a 10-minute command limit)
#   SAGE2_SANITIZE_NO_WARMUP=1 skip step 0
#   SAGE2_SANITIZE_LEAKCHECK=1 memcheck with --leak-check full
set -u

log_dir="${1:-./sanitize-logs}"
bin="${SAGE2_GPU_TESTS:-build/tests/sage2_gpu_tests}"
san="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}"
tools="${SAGE2_SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}"
sanitizer_rc=86   # --error-exitcode: tells "the tool found errors" from a failed test (1)

# Test cases per tool. memcheck: every reduced case that launches kernels through the stages
# or the API (incl. graph capture and the rejection paths). racecheck, synccheck and initcheck
# (slower, or about the kernels' shared memory / barriers / reads): one case per kernel family —
# quantize, ΔS + mma attention, wgmma attention — plus the non-finite API cases.
tc_all='gpu quantize*,gpu attention: quantize*,gpu attention: a small*,gpu attention: matrix*,gpu attention: head dim 512*,gpu attention: CUDA graph*,gpu attention: bad input*,gpu wgmma: quantize*,gpu wgmma: a small*,gpu nonfinite*'
tc_kernels='gpu quantize*,gpu attention: quantize*,gpu wgmma: quantize*,gpu nonfinite: Context*'
default_tc() {
  case "$1" in
    memcheck) echo "$tc_all" ;;
    *) echo "$tc_kernels" ;;
  esac
}
default_timeout() {
  case "$1" in
    memcheck | racecheck) echo 130 ;;
    *) echo 90 ;;
  esac
}

if [[ ! -x "$bin" ]]; then
  echo "sanitize_gpu: test binary not found: $bin (build it, or set SAGE2_GPU_TESTS)" >&2
  exit 2
fi
if [[ ! -x "$san" ]]; then
  echo "sanitize_gpu: compute-sanitizer not found ($san; set COMPUTE_SANITIZER)" >&2
  exit 2
fi
mkdir -p "$log_dir" || exit 2
export SAGE2_GPU_TESTS_REDUCED=1

# "N passed | M failed" of doctest's test-case summary line, or "no doctest summary".
tests_of() {
  local line
  line=$(grep -a '^\[doctest\] test cases:' "$1" | tail -n 1)
  if [[ -z "$line" ]]; then
    echo "no doctest summary"
  else
    echo "$line" | sed -E 's/.*\| *([0-9]+) passed *\| *([0-9]+) failed.*/\1 passed, \2 failed/'
  fi
}
doctest_ok() { grep -aq '^\[doctest\] Status: SUCCESS!' "$1"; }

status=0
summary=()

if [[ "${SAGE2_SANITIZE_NO_WARMUP:-0}" != 1 ]]; then
  t0=$(date +%s)
  timeout -k 10 "${SAGE2_SANITIZE_TIMEOUT_WARMUP:-120}" "$bin" -tc="$tc_all" >"$log_dir/warmup.log" 2>&1
  rc=$?
  t1=$(date +%s)
  line="warm-up (no sanitizer): rc $rc, tests $(tests_of "$log_dir/warmup.log"), $((t1 - t0)) s"
  echo "$line"
  summary+=("$line")
  if [[ $rc -ne 0 ]]; then
    status=1
    [[ $rc -eq 77 ]] && { echo "sanitize_gpu: the GPU suite is skipped on this machine (no usable GPU)" >&2; exit 2; }
  fi
fi

for tool in $tools; do
  upper=$(echo "$tool" | tr '[:lower:]' '[:upper:]')
  tc_var="SAGE2_SANITIZE_TC_$upper"
  to_var="SAGE2_SANITIZE_TIMEOUT_$upper"
  tc="${!tc_var:-$(default_tc "$tool")}"
  limit="${!to_var:-$(default_timeout "$tool")}"
  extra=()
  [[ "$tool" == memcheck && "${SAGE2_SANITIZE_LEAKCHECK:-0}" == 1 ]] && extra+=(--leak-check full)
  log="$log_dir/$tool.log"
  {
    echo "# $san --tool $tool --error-exitcode $sanitizer_rc ${extra[*]} $bin -tc=\"$tc\""
    echo "# SAGE2_GPU_TESTS_REDUCED=1 SAGE2_CACHE_DIR=${SAGE2_CACHE_DIR:-} timeout ${limit}s"
  } >"$log"
  t0=$(date +%s)
  timeout -k 10 "$limit" "$san" --tool "$tool" --error-exitcode "$sanitizer_rc" ${extra[@]+"${extra[@]}"} \
    "$bin" -tc="$tc" >>"$log" 2>&1
  rc=$?
  t1=$(date +%s)
  # memcheck / synccheck / initcheck: "ERROR SUMMARY: N error(s)";
  # racecheck: "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)".
  errors=$(grep -aoE 'ERROR SUMMARY: [0-9]+ error' "$log" | tail -n 1 | grep -oE '[0-9]+')
  if [[ -z "$errors" ]]; then
    errors=$(grep -a 'RACECHECK SUMMARY' "$log" | tail -n 1 | grep -oE '\(([0-9]+) error' | grep -oE '[0-9]+')
  fi
  warnings=$(grep -a 'RACECHECK SUMMARY' "$log" | tail -n 1 | grep -oE '[0-9]+ warning' | grep -oE '[0-9]+')
  tests=$(tests_of "$log")
  secs=$((t1 - t0))
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    line="$tool: TIMED OUT after ${limit} s (no result; raise SAGE2_SANITIZE_TIMEOUT_$upper), tests $tests"
    status=1
  elif [[ -z "$errors" ]]; then
    line="$tool: no sanitizer summary in the log (rc $rc), tests $tests, $secs s"
    status=1
  else
    line="$tool: $errors errors${warnings:+ ($warnings warnings)}, tests $tests, $secs s"
    [[ "$errors" != 0 ]] && status=1
    if ! doctest_ok "$log"; then
      line="$line, TESTS FAILED"
      status=1
    fi
    [[ $rc -ne 0 && "$errors" == 0 ]] && { line="$line, rc $rc"; status=1; }
  fi
  echo "$line"
  summary+=("$line")
done

{
  echo "# sanitize_gpu.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) binary $bin"
  printf '%s\n' "${summary[@]}"
} >"$log_dir/summary.txt"
echo "sanitize_gpu: logs in $log_dir ($( [[ $status -eq 0 ]] && echo clean || echo 'NOT clean'))"
exit $status
