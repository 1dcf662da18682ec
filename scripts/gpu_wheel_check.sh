#!/usr/bin/env bash
# The sage2 wheel on the GPU machine, with NVRTC from torch's NVIDIA wheel only.
#
#   bash scripts/gpu_wheel_check.sh WHEEL [OUT_DIR]
#
# WHEEL: a built wheel (scripts/test_wheel.sh leaves one in wheelhouse/). OUT_DIR: where the log
# goes (default: $OUT when set, else ./gpu-wheel-check); the log is OUT_DIR/gpu_wheel_check.log.
# Needs: python3 with a CUDA torch and pytest (nothing is downloaded: the machine has no internet),
# a GPU, and root or password-less sudo for the step below.
#
# Steps: `pip install --no-deps --target DIR` the wheel (beside the machine's torch); move every
# system libnvrtc and libnvrtc-builtins (the toolkit's, and whatever ldconfig or LD_LIBRARY_PATH
# would find) out of the way by renaming it to *.sage2-moved — restored on exit, also after a failure or Ctrl-C (not
# after SIGKILL: then run the `mv` lines printed in the log); check that no libnvrtc can be
# loaded by name any more; `python -m sage2 info` must show the library from DIR and NVRTC from
# torch's NVIDIA wheel; the pytest suite (python/tests) runs from DIR with GPU tests required and
# an empty kernel cache, so every kernel is compiled by that NVRTC; one call in a fresh process
# lists the NVRTC files it mapped (all must be torch's). Exit 0 only if every step passed.
set -uo pipefail

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then usage; exit 2; fi
wheel="$(readlink -f "$1")"
out="${2:-${OUT:-$PWD/gpu-wheel-check}}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$out" || { echo "gpu_wheel_check: cannot create $out" >&2; exit 2; }
out="$(cd "$out" && pwd)"
log="$out/gpu_wheel_check.log"
: >"$log"
exec > >(tee -a "$log") 2>&1
tee_pid=$!

py="${PYTHON:-python3}"
failures=()
step() { printf '\n== %s\n' "$*"; }
failed() { printf 'FAILED: %s\n' "$*"; failures+=("$*"); }
work=""
finish() {
  restore
  [ -z "$work" ] || rm -rf "$work"
  step "summary"
  if [ ${#failures[@]} -eq 0 ]; then
    echo "PASSED: wheel $(basename "$wheel") with NVRTC from torch's NVIDIA wheel"
  else
    printf 'FAILED steps (%d):\n' ${#failures[@]}; printf '  %s\n' "${failures[@]}"
  fi
  echo "log: $log"
  exec 1>&- 2>&-
  wait "$tee_pid" 2>/dev/null  # the log is complete when the script returns
  [ ${#failures[@]} -eq 0 ] || exit 1
}

# ---- moving the system's libnvrtc aside, and back ----------------------------------------------
SUDO=""
moved=()  # entries renamed to <entry>.sage2-moved
restore() {
  local f
  for f in "${moved[@]+"${moved[@]}"}"; do
    if $SUDO mv -f "$f.sage2-moved" "$f"; then echo "restored $f"; else echo "COULD NOT RESTORE $f (mv $f.sage2-moved $f)"; fi
  done
  moved=()
}
trap finish EXIT
trap 'echo "interrupted"; exit 130' INT TERM

# Every libnvrtc.so* / libnvrtc-builtins.so* a bare-name dlopen (or sage2's build-toolkit
# fallback) could reach, as <real directory>/<entry name> so that one entry seen through two
# symlinked paths is moved once. Python packages (torch's own NVIDIA wheel) are left alone. The
# builtins go too: NVRTC opens them by bare name, and the wheel's NVRTC must not lean on the
# toolkit's.
system_nvrtc() {
  {
    local d n
    for d in /usr/local/cuda*/lib64 /usr/local/cuda*/lib /usr/local/cuda*/targets/*/lib \
      /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
      for n in libnvrtc.so libnvrtc-builtins.so; do ls -d "$d/$n"* 2>/dev/null; done
    done
    ldconfig -p 2>/dev/null | awk '$1 ~ /^libnvrtc(-builtins)?\.so/ {print $NF}'
    IFS=: read -r -a lds <<<"${LD_LIBRARY_PATH:-}"
    for d in "${lds[@]+"${lds[@]}"}"; do
      [ -n "$d" ] || continue
      for n in libnvrtc.so libnvrtc-builtins.so; do ls -d "$d/$n"* 2>/dev/null; done
    done
  } | while read -r p; do
    case "$p" in *site-packages/*|*dist-packages/*|*.sage2-moved) continue ;; esac
    [ -e "$p" ] || [ -L "$p" ] || continue
    echo "$(readlink -f "$(dirname "$p")")/$(basename "$p")"
  done | sort -u
}

# ---- facts -----------------------------------------------------------------------------------
step "machine"
date -u +%Y-%m-%dT%H:%M:%SZ
uname -srm
ldd --version 2>/dev/null | head -1
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not available"
command -v nvcc >/dev/null && nvcc --version | tail -2
echo "wheel: $wheel"
if [ ! -f "$wheel" ]; then failed "no wheel file at $wheel"; exit 1; fi
echo "wheel size: $(stat -c %s "$wheel") bytes, sha256 $(sha256sum "$wheel" | cut -d' ' -f1)"
echo "python: $(command -v "$py") ($("$py" --version 2>&1))"
if ! "$py" - <<'EOF'; then failed "a CUDA torch with a visible GPU is needed"; exit 1; fi
import sys, torch
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
print("torch %s (CUDA %s) at %s, GPU: %s" % (torch.__version__, torch.version.cuda, torch.__file__, gpu))
sys.exit(0 if torch.cuda.is_available() else 1)
EOF
"$py" -c 'import pytest; print("pytest", pytest.__version__)' || { failed "pytest is not installed for $py"; exit 1; }
"$py" - <<'EOF'
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
found = sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", "libnvrtc*")))
print("torch's NVIDIA NVRTC files:", *(found or ["none"]), sep="\n  ")
EOF

# ---- install ---------------------------------------------------------------------------------
work="$(mktemp -d /tmp/sage2-gpu-wheel.XXXXXX)"
target="$work/site"
step "pip install --no-deps --target $target"
if ! "$py" -m pip install --no-deps --no-index --no-compile --target "$target" "$wheel"; then
  failed "pip install of the wheel"; exit 1
fi
ls -l "$target/sage2"

step "moving the system's libnvrtc and libnvrtc-builtins out of the way"
if [ "$(id -u)" -ne 0 ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else failed "need root or password-less sudo to rename system files"; exit 1; fi
fi
while read -r f; do
  [ -n "$f" ] || continue
  if $SUDO mv "$f" "$f.sage2-moved"; then
    moved+=("$f"); echo "moved $f -> $f.sage2-moved   (restore by hand: mv $f.sage2-moved $f)"
  else
    failed "could not move $f"
  fi
done < <(system_nvrtc)
[ ${#moved[@]} -gt 0 ] || echo "no system libnvrtc found (nothing to move)"
ldconfig -p 2>/dev/null | grep -i nvrtc | sed 's/^/ldconfig cache (stale entries fail to open): /' 
[ ${#failures[@]} -eq 0 ] || exit 1
# A fresh process must not find any libnvrtc by name now (torch's wheel is found only by path).
if ! "$py" - <<'EOF'; then failed "a system libnvrtc is still loadable"; exit 1; fi
import ctypes, sys
bad = []
for name in ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"):
    try:
        ctypes.CDLL(name)
    except OSError as e:
        print("%s: not loadable (%s)" % (name, str(e).split(":")[-1].strip()))
    else:
        maps = [l.split()[-1] for l in open("/proc/self/maps") if "libnvrtc" in l]
        bad.append("%s still loads: %s" % (name, sorted(set(maps))))
print(*bad, sep="\n")
sys.exit(1 if bad else 0)
EOF

# ---- use it ----------------------------------------------------------------------------------
cd "$work"  # nothing of the checkout on sys.path
unset SAGE2_LIBRARY SAGE2_LIBNVRTC
export PYTHONPATH="$target"
export SAGE2_CACHE_DIR="$work/kernel-cache"  # empty: every kernel is compiled by torch's NVRTC
step "python -m sage2 info"
"$py" -m sage2 info | tee "$work/info.txt"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || failed "python -m sage2 info exited $rc (0 = a usable GPU)"
grep -q "(library: $target/sage2/libsage2.so)" "$work/info.txt" || failed "info: libsage2 is not the installed wheel's"
grep -qE "^NVRTC: .* from .*/nvidia/(cu13|cuda_nvrtc)/lib/libnvrtc\.so\.1[0-9]+ \(torch's NVIDIA wheel" "$work/info.txt" ||
  failed "info: NVRTC is not torch's NVIDIA wheel"

step "pytest python/tests from the install (GPU tests required)"
cp -r "$repo/python/tests" "$work/tests"
SAGE2_REQUIRE_GPU_TESTS=1 SAGE2_SOURCE_DIR="$repo" "$py" -m pytest -p no:cacheprovider -rs \
  --junitxml="$out/pytest.xml" "$work/tests" || failed "pytest"

step "what a compile mapped (one sageattn call in a fresh process)"
"$py" - <<'EOF' || failed "sageattn smoke call"
import torch, sage2
q = torch.randn(1, 2, 256, 128, device="cuda", dtype=torch.float16)
o = sage2.sageattn(q, q, q)
torch.cuda.synchronize()
ref = torch.nn.functional.scaled_dot_product_attention(q, q, q)
cos = torch.nn.functional.cosine_similarity(o.flatten().float(), ref.flatten().float(), dim=0).item()
print("sage2 %s from %s; cosine vs SDPA %.6f" % (sage2.__version__, sage2.library_path(), cos))
mapped = sorted({l.split()[-1] for l in open("/proc/self/maps") if "nvrtc" in l})
print("mapped NVRTC files:", *mapped, sep="\n  ")
assert cos > 0.999, cos
assert mapped and all("/nvidia/" in m for m in mapped), "an NVRTC file from outside torch's NVIDIA wheel"
EOF
"$py" -m sage2 info | grep -E "^NVRTC|^cache directory"
exit 0  # finish (EXIT trap) restores the files and prints the summary
