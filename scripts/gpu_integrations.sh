#!/usr/bin/env bash
# The Python suite on the one-GPU machine with the integrations' packages (issue 25 item 7): one
# device call, logs under OUT (files come back from there).
#   bash scripts/gpu_integrations.sh OUT [--bundle .dev] [--wheels .wheels-int] [--hf4 .wheels] [--only EXPR] [--wheel WHEEL]
# Carry: the bundle (bash scripts/dev_bundle.sh build .dev) and .wheels-int
# (bash scripts/integration_wheels.sh). It installs the carried wheels whose module the machine lacks
# (diffusers, yunchang, Pillow, requests ...) offline into a scratch --target folder, then runs the
# whole suite with SAGE2_REQUIRE_GPU_TESTS=1 (a skip for a missing library or GPU support fails):
# OUT/pytest.log, OUT/pytest.xml, OUT/env.txt, OUT/summary.txt.
# --hf4 DIR: instead, the transformers tests with transformers 4.57.6 installed offline from DIR
# (bash scripts/hf_wheelhouse.sh DIR; ~38 MB: a separate device call carrying DIR and the bundle,
# not .wheels-int): OUT/pytest-hf4.log. --only EXPR: pytest -k EXPR (a subset, e.g. "integrations").
# --wheel WHEEL: the suite runs against that wheel instead of the checkout (issue 42): pip installs
# it with --target into a scratch folder that is put on sys.path at run time (not on PYTHONPATH, so
# the subprocess tests must pass the parent's sys.path on), from a copy of python/tests outside the
# checkout, with SAGE2_LIBRARY unset (the wheel's own libsage2). --bundle is then not needed.
set -uo pipefail
out=${1:?usage: gpu_integrations.sh OUT [--bundle DIR] [--wheels DIR] [--hf4 DIR] [--only EXPR] [--wheel WHEEL]}
shift
bundle=.dev wheels=.wheels-int hf4="" only="" wheel=""
while (($#)); do
  case $1 in
    --bundle) bundle=$2; shift 2 ;;
    --wheels) wheels=$2; shift 2 ;;
    --hf4) hf4=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --wheel) wheel=$(readlink -f "$2"); shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never NVLink multicast
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export SAGE2_REQUIRE_GPU_TESTS=1
repo=$PWD
site=$(mktemp -d /tmp/sage2-int-site.XXXXXX)
if [ -n "$wheel" ]; then
  [ -f "$wheel" ] || { echo "no wheel at $wheel" >&2; exit 2; }
  unset SAGE2_LIBRARY
  "$py" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --target "$site/wheel" "$wheel" \
    >"$out/install-wheel.log" 2>&1 || { echo "install of $wheel failed" >&2; tail "$out/install-wheel.log"; exit 1; }
  cp -r python/tests "$site/tests"
  export SAGE2_SOURCE_DIR=$repo
else
  export SAGE2_LIBRARY="$PWD/$bundle/libsage2.so"
  [ -f "$SAGE2_LIBRARY" ] || { echo "no $SAGE2_LIBRARY: carry the bundle (bash scripts/dev_bundle.sh build $bundle)" >&2; exit 2; }
fi
summary=()

# module name of a wheel's distribution (the import that tells whether the machine has it)
source "$(dirname "${BASH_SOURCE[0]}")/offline_wheels.sh"  # install_missing_wheels

if [ -n "$hf4" ]; then
  # transformers 4.x and its closure shadow the machine's 5.x for this run only
  "$py" -m pip install -q --disable-pip-version-check --no-index --no-compile --find-links "$hf4" --target "$site" \
    transformers==4.57.6 >"$out/install-hf4.log" 2>&1 || { echo "install of transformers 4.57.6 failed" >&2; tail "$out/install-hf4.log"; exit 1; }
  pyfiles=(python/tests/test_gpu_integrations.py python/tests/test_gpu_hf_model.py python/tests/test_integrations.py)
  kexpr=${only:-transformers or hf or padded or unpadded}
  log=pytest-hf4
else
  install_missing_wheels "$py" "$wheels" "$site" "$out/install.log" || exit $?
  pyfiles=(python/tests)
  kexpr=$only
  log=pytest
fi
if [ -n "$wheel" ]; then
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  pyfiles=("${pyfiles[@]/#python\/tests/$site/tests}")
  cd "$site"  # nothing of the checkout on sys.path
else
  export PYTHONPATH="$PWD/python:$site${PYTHONPATH:+:$PYTHONPATH}"
fi
# sage2 from the wheel's folder through a sys.path entry added at run time (--wheel), else as imported
if [ -n "$wheel" ]; then
  pymod=("$py" -c 'import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = "python"; runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)' "$site/wheel")
else
  pymod=("$py" -m)
fi

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  "$py" - "$site/wheel" <<'PY'
import importlib, sys
if len(sys.argv) > 1: sys.path.insert(0, sys.argv[1])
print("python", sys.version.split()[0])
for m in ("torch", "transformers", "diffusers", "yunchang", "huggingface_hub", "PIL", "requests", "numpy"):
    try:
        mod = importlib.import_module(m)
        print("%-16s %-12s %s" % (m, getattr(mod, "__version__", "?"), getattr(mod, "__file__", "")))
    except Exception as e:
        print("%-16s missing (%s)" % (m, e))
import sage2
print("sage2", sage2.__version__, sage2.library_path(), sage2.build_commit())
PY
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

t0=$SECONDS
args=(-p no:cacheprovider -rs -q --junitxml="$out/$log.xml")
[ -n "$kexpr" ] && args+=(-k "$kexpr")
timeout 540 "${pymod[@]}" pytest "${args[@]}" "${pyfiles[@]}" >"$out/$log.log" 2>&1
rc=$?
summary+=("$log rc=$rc $((SECONDS - t0))s")
tail -40 "$out/$log.log"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
rm -rf "$site"
exit $rc
