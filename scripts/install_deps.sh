#!/usr/bin/env bash
# Installs what building sage2 needs on a fresh Debian/Ubuntu machine (idempotent).
set -euo pipefail
need=()
for pkg in cmake g++ make nlohmann-json3-dev doctest-dev libcli11-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# The CUDA toolkit provides the build-time headers cuda.h and nvrtc.h, and libnvrtc (loaded at
# run time with dlopen). libcuda is never linked.
cuda_root="${CUDAToolkit_ROOT:-/usr/local/cuda}"
if [ ! -f "$cuda_root/include/nvrtc.h" ] || [ ! -f "$cuda_root/include/cuda.h" ]; then
  echo "sage2: the CUDA toolkit (cuda.h, nvrtc.h, libnvrtc) was not found under $cuda_root;" >&2
  echo "       install CUDA 12 or 13 there or set CUDAToolkit_ROOT" >&2
  exit 1
fi
