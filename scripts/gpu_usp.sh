#!/usr/bin/env bash
# sage2 under yunchang's USP on the two-GPU machine (kind nvidia-h100-x2), one device call:
#   bash scripts/gpu_usp.sh OUT [--bundle .dev] [--wheels .wheels-int] [--nproc 2] [-- usp_bench.py options]
# Carry the bundle (bash scripts/dev_bundle.sh build .dev) and .wheels-int (yunchang is installed
# from it offline when the machine lacks it). Runs
#   torchrun --nproc_per_node NPROC bench/usp_bench.py --out OUT ...
# (the one-GPU baseline runs inside, on rank 0, in the same command) with NVLink multicast off in
# torchrun's environment. OUT/usp.jsonl: one record per (mode, N); OUT/usp.log; OUT/topo.txt.
set -uo pipefail
out=${1:?usage: gpu_usp.sh OUT [--bundle DIR] [--wheels DIR] [--nproc N] [-- bench options]}
shift
bundle=.dev wheels=.wheels-int nproc=2 extra=()
while (($#)); do
  case $1 in
    --bundle) bundle=$2; shift 2 ;;
    --wheels) wheels=$2; shift 2 ;;
    --nproc) nproc=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never NVLink multicast
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SAGE2_LIBRARY="$PWD/$bundle/libsage2.so"
[ -f "$SAGE2_LIBRARY" ] || { echo "no $SAGE2_LIBRARY: carry the bundle" >&2; exit 2; }
site=$(mktemp -d /tmp/sage2-usp-site.XXXXXX)
if ! "$py" -c "import yunchang" 2>/dev/null; then
  "$py" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --target "$site" \
    "$wheels"/yunchang-*.whl >"$out/install.log" 2>&1 || { echo "yunchang install failed" >&2; cat "$out/install.log"; exit 1; }
fi
export PYTHONPATH="$PWD/python:$site${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi topo -m >"$out/topo.txt" 2>&1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv >>"$out/topo.txt" 2>&1
rm -f "$out/usp.jsonl"
timeout 540 "$py" -m torch.distributed.run --standalone --nproc_per_node "$nproc" bench/usp_bench.py --out "$out" \
  "${extra[@]}" >"$out/usp.log" 2>&1
rc=$?
cat "$out/usp.log" | grep -v "^\[W" | tail -40
echo "usp rc=$rc" | tee "$out/summary.txt"
rm -rf "$site"
exit $rc
