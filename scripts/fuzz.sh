#!/usr/bin/env bash
# Fuzzing: builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan) in their own build
# directory, runs each for a bounded time against its corpus fuzz/corpus/<target>/, and prints
# the executions of each run. Exits non-zero when a target finds a crash (the input is kept as
# build-fuzz/artifacts/<target>-crash-*; reproduce with build-fuzz/fuzz/<target> <file>).
#
#   bash scripts/fuzz.sh                  # every target, FUZZ_SECONDS (30) each
#   FUZZ_SECONDS=600 bash scripts/fuzz.sh # longer runs
#   FUZZ_TARGETS="fuzz_cache_entry" ...   # a subset
#   FUZZ_MERGE=1 ...                      # afterwards, merge new inputs into fuzz/corpus (minimised)
#
# Installs clang and its runtime (libFuzzer, sanitizers) with apt when missing. New inputs found
# during a run go to build-fuzz/corpus-new/<target>/, never into the repository's corpus unless
# FUZZ_MERGE=1 asks for it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-30}"
build="${FUZZ_BUILD_DIR:-build-fuzz}"
jobs="$(nproc)"

bash scripts/install_deps.sh

# --- clang with libFuzzer ----------------------------------------------------------------------
probe_dir="$(mktemp -d)"
trap 'rm -rf "$probe_dir"' EXIT
libfuzzer_works() {
  command -v clang++ >/dev/null 2>&1 || return 1
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
    >"$probe_dir/probe.cpp"
  clang++ -fsanitize=fuzzer,address,undefined "$probe_dir/probe.cpp" -o "$probe_dir/probe" >/dev/null 2>&1
}
if ! libfuzzer_works; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "fuzz: installing clang and its runtime (libFuzzer, sanitizers) with apt"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang >/dev/null
  major="$(clang++ --version | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -n1)"
  # Debian 12+ ships the runtime separately; older releases have it in libclang-common-N-dev.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "libclang-rt-${major}-dev" >/dev/null 2>&1 ||
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "libclang-common-${major}-dev" >/dev/null
  libfuzzer_works || { echo "fuzz: clang++ cannot link -fsanitize=fuzzer even after installing it" >&2; exit 1; }
fi
echo "fuzz: $(clang++ --version | head -n1)"

# --- build ---------------------------------------------------------------------------------------
t0=$(date +%s)
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSAGE2_BUILD_FUZZERS=ON \
  -DSAGE2_BUILD_TESTS=OFF -DSAGE2_BUILD_TOOLS=OFF -DSAGE2_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target sage2_fuzzers
t1=$(date +%s)
echo "fuzz: built in $((t1 - t0)) s"

# --- run -----------------------------------------------------------------------------------------
targets="${FUZZ_TARGETS:-$(cat "$build/fuzz/targets.txt")}"
mkdir -p "$build/artifacts" "$build/logs"
# tmpfs when there is one: the bundle target writes (and fsyncs) a file per input.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
summary="$build/summary.txt"
printf '%-22s %12s %8s %8s %12s %12s %8s\n' target executions seconds exec/s corpus_repo corpus_new crashes | tee "$summary"
failed=0
for t in $targets; do
  corpus="fuzz/corpus/$t"
  fresh="$build/corpus-new/$t"
  mkdir -p "$corpus" "$fresh"
  log="$build/logs/$t.log"
  rm -f "$build/artifacts/$t-"*  # count this run's findings only
  rc=0
  "$build/fuzz/$t" "$fresh" "$corpus" -max_total_time="$seconds" -print_final_stats=1 -use_value_profile=1 \
    -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$build/artifacts/$t-" >"$log" 2>&1 || rc=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)"
  secs="$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n1)"
  crashes="$(ls "$build/artifacts" | grep -c "^$t-" || true)"
  rate="-"
  if [ -n "$execs" ] && [ -n "$secs" ] && [ "$secs" -gt 0 ]; then rate=$((execs / secs)); fi
  printf '%-22s %12s %8s %8s %12s %12s %8s\n' "$t" "${execs:-?}" "${secs:-?}" "$rate" \
    "$(ls "$corpus" | wc -l)" "$(ls "$fresh" | wc -l)" "$crashes" | tee -a "$summary"
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "fuzz: $t FAILED (exit $rc); last lines of $log:" >&2
    tail -n 40 "$log" >&2
  fi
done

if [ "${FUZZ_MERGE:-0}" = 1 ]; then
  for t in $targets; do
    "$build/fuzz/$t" -merge=1 "fuzz/corpus/$t" "$build/corpus-new/$t" >"$build/logs/$t.merge.log" 2>&1
    echo "fuzz: merged into fuzz/corpus/$t: $(ls "fuzz/corpus/$t" | wc -l) files"
  done
fi
exit "$failed"
