#!/usr/bin/env bash
# The Python wheel as a user gets it: build it from this checkout (scripts/build_wheel.sh: zig's
# clang against glibc 2.28, tagged manylinux_2_28 by auditwheel, which must succeed), install it alone into a fresh
# virtual environment (no torch, no build tree, no SAGE2_LIBRARY, run from outside the checkout),
# with the `sageattention` drop-in (python/sageattention_shim, a pure-Python wheel of its own), then run
# `python -m sage2 info` and the Python tests that need no GPU against that install.
# The wheel is left in wheelhouse/ (for scripts/gpu_wheel_check.sh). Called by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
say() { printf '== test_wheel: %s\n' "$*"; }
fail() { printf 'test_wheel: FAILED: %s\n' "$*" >&2; exit 1; }

bash scripts/install_deps.sh  # compiler, CMake, nlohmann-json, CUDA headers: what the build needs

work="$(mktemp -d /tmp/sage2-wheel.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# A virtual environment; python3-venv (ensurepip) is a separate package on Debian/Ubuntu.
make_venv() {
  python3 -m venv "$1" >/dev/null 2>&1 && return 0
  rm -rf "$1"
  say "python3 -m venv failed; installing python3-venv"
  local SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  local ver; ver="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null ||
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "python$ver-venv" >/dev/null
  python3 -m venv "$1" || fail "cannot create a virtual environment with $(command -v python3)"
}

# ---- build ------------------------------------------------------------------------------------
# The wheel users get: scripts/build_wheel.sh (zig's clang against glibc 2.28, auditwheel's tag).
say "bash scripts/build_wheel.sh (manylinux_2_28)"
start=$SECONDS
bash scripts/build_wheel.sh "$work/repaired" || fail "scripts/build_wheel.sh"
wheel="$(ls "$work"/repaired/sage2-*.whl)"
say "built $(basename "$wheel") in $((SECONDS - start)) s"
make_venv "$work/tools"
"$work/tools/bin/python" -m pip install -q --upgrade pip
name="$(basename "$wheel")"
# manylinux_2_28 or older: installs on RHEL 8, Debian 10+, Ubuntu 20.04+ (docs/deploying.md, "The Python wheel").
# (auditwheel may add an older tag: manylinux_2_24_x86_64.manylinux_2_28_x86_64)
[[ "$name" =~ ^sage2-[0-9][0-9.]*-py3-none-(manylinux_2_[0-9]+_x86_64\.)*manylinux_2_(1[7-9]|2[0-8])_x86_64\.whl$ ]] ||
  fail "unexpected wheel name $name (want sage2-<version>-py3-none-manylinux_2_<=28_x86_64.whl)"
contents="$(python3 -m zipfile -l "$wheel")"
for f in sage2/libsage2.so sage2/_version.py sage2/__init__.py sage2/_lib.py sage2/_bin/sage2-autotune \
         sage2/_bin/sage2-cache sage2/_bin/sage2-info sage2/_bin/sage2-jit-worker sage2/integrations/transformers.py; do
  grep -q "^$f " <<<"$contents" || fail "$name lacks $f"
done
cmake_version="$(sed -nE 's/^project\(sage2 VERSION ([0-9][0-9.]*).*/\1/p' CMakeLists.txt)"
[[ "$name" == "sage2-$cmake_version-"* ]] || fail "$name does not carry the CMake project version $cmake_version"
mkdir -p wheelhouse
rm -f wheelhouse/sage2-*.whl
cp "$wheel" wheelhouse/
say "wheel: wheelhouse/$name, $(stat -c %s "$wheel") bytes"

# The opt-in `sageattention` drop-in: a pure-Python wheel of its own (python/sageattention_shim).
say "pip wheel python/sageattention_shim (the sageattention drop-in)"
shim_src="$work/shim-src"  # a copy: the build writes nothing into the checkout
cp -r "$repo/python/sageattention_shim" "$shim_src"
"$work/tools/bin/python" -m pip wheel -q --no-deps -w "$work/shim" "$shim_src" || fail "pip wheel of the drop-in failed"
shim="$(ls "$work"/shim/sageattention-*.whl)"
shim_name="$(basename "$shim")"
[[ "$shim_name" == "sageattention-2."*"+sage2.$cmake_version-py3-none-any.whl" ]] ||
  fail "unexpected drop-in wheel name $shim_name (want sageattention-2.x.y+sage2.$cmake_version-py3-none-any.whl)"
rm -f wheelhouse/sageattention-*.whl
cp "$shim" wheelhouse/
say "drop-in: wheelhouse/$shim_name"

# ---- install alone and use it -------------------------------------------------------------------
say "fresh venv: the wheel, the sageattention drop-in and pytest only"
make_venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q "$wheel" "$shim" pytest
unset SAGE2_LIBRARY SAGE2_LIBNVRTC PYTHONPATH
cd "$work"  # nothing of the checkout on sys.path
"$py" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is not None)' ||
  fail "torch is importable in the fresh venv"
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')"
"$py" - "$site" "$cmake_version" <<'EOF' || fail "the installed package is not the wheel's"
import os, sys
import sage2
site, want = sys.argv[1], sys.argv[2]
pkg = os.path.dirname(os.path.abspath(sage2.__file__))
assert pkg == os.path.join(site, "sage2"), pkg
assert sage2.library_path() == os.path.join(pkg, "libsage2.so"), sage2.library_path()
assert sage2.__version__ == want == sage2.library_version(), (sage2.__version__, want)
print("import sage2: %s from %s" % (sage2.__version__, pkg))
EOF

say "import sageattention (the drop-in), as diffusers finds it"
"$py" - "$cmake_version" <<'EOF' || fail "the sageattention drop-in"
import importlib.metadata as md, os, sys
import sage2, sageattention
v = md.version("sageattention")  # what diffusers reads (it needs >= 2.1.1)
assert v == sageattention.__version__ and v.endswith("+sage2." + sys.argv[1]), v
assert tuple(int(x) for x in v.split("+")[0].split(".")) >= (2, 1, 1), v
assert sageattention.SAGE2_SHIM and sageattention.core.sage2 is sage2
print("import sageattention: %s from %s" % (v, os.path.dirname(sageattention.__file__)))
EOF

say "python -m sage2 info"
set +e
"$py" -m sage2 info | tee "$work/info.txt"
rc=${PIPESTATUS[0]}
set -e
# 0 a GPU, 3 no driver, 4 no supported device: all fine here; 1 (library missing) is not
case $rc in 0|3|4) ;; *) fail "python -m sage2 info exited $rc" ;; esac
grep -q "^sage2 $cmake_version (library: $site/sage2/libsage2.so)" "$work/info.txt" || fail "info: wrong library"
grep -qE "^NVRTC: [0-9]+\.[0-9]+ from .*libnvrtc" "$work/info.txt" || fail "info: NVRTC not found or no file named"
"$work/venv/bin/sage2-py-info" info >/dev/null || [ $? -ne 1 ] || fail "sage2-py-info did not find the library"
set +e
"$work/venv/bin/sage2-py-info" >"$work/py-info.txt" 2>&1  # bare: the info, under its own name
rc=$?
set -e
case $rc in 0|3|4) ;; *) cat "$work/py-info.txt"; fail "sage2-py-info (no arguments) exited $rc" ;; esac
grep -q "^sage2 $cmake_version" "$work/py-info.txt" || fail "sage2-py-info (no arguments) did not print the info"

say "console scripts of the wheel: sage2-info, sage2-cache, sage2-autotune on the venv's PATH"
for t in sage2-info sage2-cache sage2-autotune; do
  [ -x "$work/venv/bin/$t" ] || fail "$t is not installed in the venv's bin/"
done
PATH="$work/venv/bin:$PATH" sage2-info --archs | grep -q "^sm_90a" || fail "sage2-info --archs (the shipped program)"
set +e
PATH="$work/venv/bin:$PATH" sage2-info >"$work/tool-info.txt" 2>&1
rc=$?
set -e
case $rc in 0|3|4) ;; *) cat "$work/tool-info.txt"; fail "sage2-info exited $rc" ;; esac
grep -q "^sage2 $cmake_version" "$work/tool-info.txt" || fail "sage2-info: wrong version"
mkdir -p "$work/tool-cache"  # sage2-cache refuses a directory that does not exist
PATH="$work/venv/bin:$PATH" SAGE2_CACHE_DIR="$work/tool-cache" sage2-cache list >/dev/null || fail "sage2-cache list"
PATH="$work/venv/bin:$PATH" sage2-autotune --help >/dev/null 2>&1 || [ $? -eq 2 ] || fail "sage2-autotune --help"

say "Python tests that need no GPU, from the install (a copy of python/tests outside the checkout)"
cp -r "$repo/python/tests" "$work/tests"
SAGE2_SOURCE_DIR="$repo" "$py" -m pytest -p no:cacheprovider -rs "$work/tests" || fail "pytest"
say "OK: $name ($(stat -c %s "$wheel") bytes)"
