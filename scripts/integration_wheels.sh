#!/usr/bin/env bash
# Downloads (on a machine with internet) the wheels the GPU machine lacks for the integration tests
# (python/tests/test_gpu_integrations.py, bench/usp_bench.py): diffusers and yunchang, and what
# they import that the GPU machine's torch / transformers / sentence-transformers environment may
# not have (Pillow; requests with its own dependencies: diffusers checks `requests` at import).
#   bash scripts/integration_wheels.sh [DEST=.wheels-int]
# DEST (git-ignored) must travel with a device call next to the other carried folders, so it is kept
# at most $SIZE_LIMIT_MB (default 12). Wheels for CPython 3.12 on manylinux x86_64, pinned below,
# one version each, no dependency resolution (--no-deps): the GPU machine installs them with
# `pip install --no-index --no-deps --target` only where the import is missing
# (scripts/gpu_integrations.sh). yunchang's optional flash-attn is not needed: sage2 is passed as its
# attention (sage2/integrations/yunchang.py).
# flit_core (the build backend of python/sageattention_shim) lets the GPU machine build and install the
# sageattention drop-in offline the way a user does (pip install python/sageattention_shim with
# --no-index --find-links DEST: pip's isolated build takes flit_core from DEST;
# scripts/gpu_dropin_clients.sh). einops: ComfyUI's attention.py imports it (the GPU image has it;
# carried in case an image does not).
# Environment: PYTHON (default python3), SIZE_LIMIT_MB.
set -euo pipefail
dest=${1:-.wheels-int}
py=${PYTHON:-python3}
limit_mb=${SIZE_LIMIT_MB:-12}
# pillow 10.4: the smallest cp312 Pillow wheel that fits beside diffusers (diffusers needs PIL >= 9.1;
# the GPU machine's torch / transformers / sentence-transformers do not bring it).
pins=(
  diffusers==0.42.1
  yunchang==0.6.4
  pillow==10.4.0
  requests==2.32.5
  urllib3==2.5.0
  idna==3.10
  charset_normalizer==3.4.4
  certifi==2025.10.5
  flit_core==3.12.0
  einops==0.8.1
)
target=(--python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none)
for minor in $(seq 28 -1 17); do target+=(--platform "manylinux_2_${minor}_x86_64"); done
target+=(--platform manylinux2014_x86_64)
mkdir -p "$dest"
rm -f "$dest"/*.whl
"$py" -m pip download --disable-pip-version-check -q --no-deps --only-binary=:all: "${target[@]}" -d "$dest" "${pins[@]}"
ls -1 "$dest"/*.whl | sed 's|.*/||'
bytes=$(du -sb "$dest" | cut -f1)
echo "$dest: $(ls "$dest"/*.whl | wc -l) wheels, $(du -sh "$dest" | cut -f1) ($bytes bytes)"
if ((bytes > limit_mb * 1024 * 1024)); then
  echo "error: $dest is larger than $limit_mb MiB" >&2
  exit 1
fi
