#!/usr/bin/env bash
# The `sageattention` drop-in (python/sageattention_shim) proved with its real clients on the GPU
# machine (issue 32, Targets, first bullet), in one device call on the two-GPU kind:
#   bash scripts/gpu_dropin_clients.sh OUT [--bundle .dev] [--wheels .wheels-int] [--comfy .comfy]
#        [--nproc N] [--only diffusers,yunchang,comfy] [--fake-sage2] [--dry-run]
# Carry the bundle (bash scripts/dev_bundle.sh build .dev), .wheels-int (bash
# scripts/integration_wheels.sh: diffusers, yunchang, flit_core, einops, ...) and .comfy (ComfyUI's
# comfy/ldm/modules/attention.py, git-ignored: .comfy/<label>/comfy/ldm/modules/attention.py).
# Offline, into a scratch --target folder: the carried wheels whose module the machine lacks, then the
# drop-in itself built and installed as a user does (pip install python/sageattention_shim; its build
# backend flit_core comes from the wheel folder), so diffusers finds the distribution `sageattention`.
# Then, each part under a time limit, NVLink multicast off:
#   diffusers  python bench/dropin_clients.py diffusers   -> OUT/diffusers.json, OUT/diffusers.log
#   yunchang   torchrun --nproc_per_node N bench/dropin_clients_usp.py -> OUT/yunchang.json, OUT/yunchang.log
#   comfy      python bench/dropin_clients.py comfy       -> OUT/comfy.json, OUT/comfy.log
# and OUT/env.json (versions), OUT/install.log, OUT/topo.txt, OUT/parts.txt (exit codes, seconds) and
# OUT/summary.txt (versions, shapes, accuracy, call counts, the verdict per target). Exit 0 when every
# target passes. --nproc: yunchang's ranks (default: the GPUs, at most 2). --only: a subset.
# --fake-sage2: sage2 replaced by fp32 PyTorch (a harness check on a machine without a GPU: CPU and
# gloo; proves nothing). --dry-run: check the arguments and inputs, print the plan, run nothing.
set -uo pipefail
usage="usage: gpu_dropin_clients.sh OUT [--bundle DIR] [--wheels DIR] [--comfy DIR] [--nproc N] [--only PARTS] [--fake-sage2] [--dry-run]"
if (($# < 1)) || [[ $1 == -* ]]; then
  echo "$usage" >&2
  exit 2
fi
out=$1
shift
bundle=.dev wheels=.wheels-int comfy=.comfy nproc="" only="diffusers,yunchang,comfy" fake="" dry=""
while (($#)); do
  case $1 in
    --bundle|--wheels|--comfy|--nproc|--only)
      (($# >= 2)) || { echo "$1 needs a value; $usage" >&2; exit 2; }
      case $1 in
        --bundle) bundle=$2 ;; --wheels) wheels=$2 ;; --comfy) comfy=$2 ;; --nproc) nproc=$2 ;; --only) only=$2 ;;
      esac
      shift 2 ;;
    --fake-sage2) fake=--fake-sage2; shift ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "unknown option $1; $usage" >&2; exit 2 ;;
  esac
done
for p in ${only//,/ }; do
  case $p in diffusers|yunchang|comfy) ;; *) echo "--only: unknown part '$p' (diffusers, yunchang, comfy)" >&2; exit 2 ;; esac
done
if [ -n "$nproc" ] && ! [[ $nproc =~ ^[1-9][0-9]*$ ]]; then
  echo "--nproc: a positive integer, not '$nproc'" >&2
  exit 2
fi
has_part() { [[ ",$only," == *",$1,"* ]]; }
case $out in /*) ;; *) out=$PWD/$out ;; esac
py=${PYTHON:-python3}
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 2

# ---- inputs
problems=()
lib="$repo/$bundle/libsage2.so"
[ -f "$lib" ] || [ -n "$fake" ] || problems+=("no $bundle/libsage2.so: carry the bundle (bash scripts/dev_bundle.sh build $bundle)")
compgen -G "$wheels/*.whl" >/dev/null || problems+=("no wheels in $wheels (bash scripts/integration_wheels.sh)")
compgen -G "$wheels/flit_core-*.whl" >/dev/null || problems+=("no flit_core wheel in $wheels (the drop-in's build backend; bash scripts/integration_wheels.sh)")
[ -f python/sageattention_shim/pyproject.toml ] || problems+=("no python/sageattention_shim")
if has_part comfy; then
  n=$(find "$comfy" -path '*/comfy/ldm/modules/attention.py' 2>/dev/null | wc -l)
  ((n > 0)) || problems+=("no comfy/ldm/modules/attention.py under $comfy (fetch ComfyUI's file into the git-ignored $comfy and carry it)")
fi
if [ -z "$nproc" ]; then
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  nproc=$(( ngpu >= 2 ? 2 : (ngpu == 1 ? 1 : 2) ))  # no GPU: 2 CPU ranks (gloo; --fake-sage2 only)
fi

plan=()
plan+=("install: $py -m pip install --no-index --no-deps --target SITE <wheels of $wheels whose module is missing>")
plan+=("install: $py -m pip install --no-index --find-links $wheels --no-deps --target SITE python/sageattention_shim")
plan+=("env:       $py bench/dropin_clients.py env --out $out $fake")
has_part diffusers && plan+=("diffusers: timeout 170 $py bench/dropin_clients.py diffusers --out $out $fake")
has_part yunchang && plan+=("yunchang:  timeout 170 $py -m torch.distributed.run --standalone --nproc_per_node $nproc bench/dropin_clients_usp.py --out $out $fake")
has_part comfy && plan+=("comfy:     timeout 150 $py bench/dropin_clients.py comfy --out $out --comfy $comfy $fake")
plan+=("summary:   $py bench/dropin_clients.py summary --out $out --parts $only")

if [ -n "$dry" ]; then
  echo "dry run: OUT=$out bundle=$bundle wheels=$wheels comfy=$comfy nproc=$nproc only=$only${fake:+ (fake sage2)}"
  printf '  %s\n' "${plan[@]}"
  if ((${#problems[@]})); then
    printf 'problem: %s\n' "${problems[@]}" >&2
    exit 2
  fi
  echo "inputs ok"
  exit 0
fi
if ((${#problems[@]})); then
  printf 'error: %s\n' "${problems[@]}" >&2
  exit 2
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/{env,diffusers,yunchang,comfy}.json "$out"/parts.txt "$out"/summary.txt
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never NVLink multicast
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
# diffusers checks each backend's constraints (CUDA device, fp16/bf16, shapes) per call; not on a CPU harness check
[ -z "$fake" ] && export DIFFUSERS_ATTN_CHECKS=1
export PYTHONUNBUFFERED=1
[ -f "$lib" ] && export SAGE2_LIBRARY="$lib"
scratch=$(mktemp -d /tmp/sage2-dropin.XXXXXX)
site="$scratch/site"
mkdir -p "$site"
export SAGE2_CACHE_DIR=${SAGE2_CACHE_DIR:-$scratch/kernel-cache}  # one kernel cache for every part and rank
trap 'rm -rf "$scratch"' EXIT

# ---- install (offline)
source "$(dirname "${BASH_SOURCE[0]}")/offline_wheels.sh"  # install_missing_wheels
{
  echo "# $(date -u) python: $("$py" -c 'import sys; print(sys.version.split()[0])') pip: $("$py" -m pip --version)"
  echo "# sageattention before the install: $("$py" -c 'import importlib.util as u; s = u.find_spec("sageattention"); print(s.origin if s else None)' 2>&1)"
} >"$out/install.log"
# flit_core is a build requirement only (pip's isolated build of the drop-in takes it from $wheels)
install_missing_wheels "$py" "$wheels" "$site" "$out/install.log" flit_core || exit $?
# the drop-in, as a user installs it: a wheel built from python/sageattention_shim (pip's isolated build
# gets flit_core from $wheels); then without build isolation, flit_core put on the path by hand
echo "installing the drop-in: pip install --no-index --find-links $wheels --no-deps --target SITE python/sageattention_shim" \
  >>"$out/install.log"
if ! "$py" -m pip install --disable-pip-version-check --no-index --find-links "$wheels" --no-deps --no-compile \
    --target "$site" python/sageattention_shim >>"$out/install.log" 2>&1; then
  echo "isolated build failed; again without build isolation (flit_core from $wheels on PYTHONPATH)" >>"$out/install.log"
  "$py" -m pip install -q --disable-pip-version-check --no-index --no-deps --target "$scratch/build" \
    "$wheels"/flit_core-*.whl >>"$out/install.log" 2>&1
  PYTHONPATH="$scratch/build" "$py" -m pip install --disable-pip-version-check --no-index --no-deps --no-compile \
    --no-build-isolation --target "$site" python/sageattention_shim >>"$out/install.log" 2>&1 ||
    { echo "the drop-in did not build / install" >&2; tail -20 "$out/install.log"; exit 1; }
fi
export PYTHONPATH="$repo/python:$site${PYTHONPATH:+:$PYTHONPATH}"
"$py" - >>"$out/install.log" 2>&1 <<'PY' || { echo "the installed drop-in does not import as sage2's" >&2; tail "$out/install.log"; exit 1; }
import importlib.metadata as m
import sageattention
assert getattr(sageattention, "SAGE2_SHIM", False), sageattention.__file__
print("drop-in: sageattention %s (distribution %s) from %s" % (sageattention.__version__, m.version("sageattention"),
                                                              sageattention.__file__))
PY
tail -1 "$out/install.log"

# ---- the parts
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; nvidia-smi topo -m; } >"$out/topo.txt" 2>&1
run_part() {  # name limit command...
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  echo "== $name: $*"
  timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s$([ $rc = 124 ] && echo " (timed out after ${limit}s)")" | tee -a "$out/parts.txt"
  grep -E '^ *FAIL |ERROR|Traceback' "$out/$name.log" | head -12
  tail -2 "$out/$name.log"
}
run_part env 60 "$py" bench/dropin_clients.py env --out "$out" $fake
has_part diffusers && run_part diffusers 170 "$py" bench/dropin_clients.py diffusers --out "$out" $fake
has_part yunchang && run_part yunchang 170 "$py" -m torch.distributed.run --standalone --nproc_per_node "$nproc" \
  bench/dropin_clients_usp.py --out "$out" $fake
has_part comfy && run_part comfy 150 "$py" bench/dropin_clients.py comfy --out "$out" --comfy "$comfy" $fake
echo
"$py" bench/dropin_clients.py summary --out "$out" --parts "$only"
exit $?
