#!/usr/bin/env bash
# Downloads (on a machine with internet) the wheels the GPU machine needs to install Hugging Face
# transformers offline, for python/tests/test_gpu_hf_model.py:
#   bash scripts/hf_wheelhouse.sh [DEST=.wheels]
# and there (CPython 3.12, Linux x86_64, torch already installed; no internet):
#   python3 -m pip install --no-index --find-links .wheels transformers==4.57.6
# DEST (git-ignored) gets transformers and its whole dependency closure as wheels for CPython 3.12
# on manylinux x86_64 (glibc 2.17 to 2.28; torch 2.11's own wheels need 2.28), whatever this
# machine's Python is. torch is not among transformers' requirements: the machine's own is used.
# transformers 4.57.6, the last 4.x: BERT/RoBERTa with attn_implementation="sdpa", torch >= 2.2,
# and a smaller closure than 5.x (which needs huggingface_hub 1.x/2.x with httpx, pydantic, typer
# and rich: over the size budget). The folder must stay small enough to travel with a device
# call (the script fails above $SIZE_LIMIT_MB, default 40).
# Environment: PYTHON (default python3; its pip downloads), TRANSFORMERS_VERSION, SIZE_LIMIT_MB.
set -euo pipefail
dest=${1:-.wheels}
py=${PYTHON:-python3}
version=${TRANSFORMERS_VERSION:-4.57.6}
limit_mb=${SIZE_LIMIT_MB:-40}

# The target: CPython 3.12, manylinux x86_64. Older pips do not widen a manylinux_2_28 platform to
# the older glibc tags, so every tag is listed; abi3 wheels (tokenizers, safetensors, hf_xet) and
# pure-Python ones ("none") are accepted as well.
target=(--python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none)
for minor in $(seq 28 -1 17); do
  target+=(--platform "manylinux_2_${minor}_x86_64")
done
target+=(--platform manylinux2014_x86_64)

mkdir -p "$dest"
rm -f "$dest"/*.whl  # a fresh set: no stale versions beside the pinned ones
"$py" -m pip download --disable-pip-version-check --only-binary=:all: "${target[@]}" -d "$dest" \
  "transformers==$version"

# The folder alone must satisfy the install, even where nothing but Python is installed (a dry
# run for the target; pip wants --target with platform options, nothing is written there).
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$py" -m pip install --disable-pip-version-check --dry-run --ignore-installed --no-index --find-links "$dest" \
  --ignore-requires-python --only-binary=:all: "${target[@]}" --target "$scratch/site" "transformers==$version" >"$scratch/dry-run.txt"
grep -E "^Would install" "$scratch/dry-run.txt"

ls -1 "$dest"/*.whl | sed 's|.*/||'
bytes=$(du -sb "$dest" | cut -f1)
echo "$dest: $(ls "$dest"/*.whl | wc -l) wheels, $(du -sh "$dest" | cut -f1) ($bytes bytes)"
echo "install on the GPU machine: python3 -m pip install --no-index --find-links $dest transformers==$version"
if ((bytes > limit_mb * 1024 * 1024)); then
  echo "error: $dest is larger than $limit_mb MiB" >&2
  exit 1
fi
