#!/usr/bin/env bash
# On the GPU machine: sage2's sm_80 and sm_89 mma.sync paths through PTX beside the reference's
# sm80 / sm89 kernels (issue 31, scoreboard group `ptx`), one run id for both arch processes.
#
#   bash scripts/gpu_ptx_bench.sh OUT [RUN_ID] [extra ptx_bench.py options]
#
# Needs: the library bundle in .dev (scripts/dev_bundle.sh build .dev) and the reference's sources
# in .anchors-ref-mma (cp -r ../shared/anchors/sageattention-ref/source .anchors-ref-mma; both
# git-ignored, carried). The reference's sm80/sm89 extensions are built there when absent
# (TORCH_CUDA_ARCH_LIST="8.0+PTX;8.9+PTX": real sm_80 / sm_89 code, for the SASS census, plus PTX,
# which this GPU's driver JIT-compiles; about 4.5 minutes on 16 cores). Writes OUT/ptx.jsonl, the
# logs, and after a build the reference's resource usage and sm_80 / sm_89 SASS
# (OUT/ref_res_sm*.txt, OUT/ref_sass_sm*.txt.xz: scripts/sass_census.py reads them).
set -euo pipefail
OUT=${1:?usage: gpu_ptx_bench.sh OUT [RUN_ID] [ptx_bench options]}
RUN=${2:-$(date -u +%Y-%m-%dT%H:%MZ)-ptx}
shift $(( $# >= 2 ? 2 : 1 ))
REF=${SAGE2_REF_MMA_DIR:-.anchors-ref-mma}
mkdir -p "$OUT"
[ -e .dev/libsage2.so ] || { echo "gpu_ptx_bench: no .dev/libsage2.so (scripts/dev_bundle.sh build .dev)" >&2; exit 2; }
[ -e "$REF/setup.py" ] || { echo "gpu_ptx_bench: no reference sources in $REF" >&2; exit 2; }

# A tarball of the two extensions from an earlier build (ref_mma_so.tar.xz: a build leaves it in
# OUT; copy it into $REF and carry it) saves the build; _fused (the quantize kernels) may be the sm_90a
# anchor's (../shared/anchors/sageattention-ref/sageattention/), native on this GPU.
if [ -e "$REF/ref_mma_so.tar.xz" ] && ! ls "$REF"/sageattention/_qattn_sm80*.so >/dev/null 2>&1; then
  (cd "$REF" && tar xJf ref_mma_so.tar.xz)
fi
if ! ls "$REF"/sageattention/_qattn_sm80*.so "$REF"/sageattention/_qattn_sm89*.so "$REF"/sageattention/_fused*.so \
    >/dev/null 2>&1; then
  start=$(date +%s)
  (cd "$REF" && SAGE_REF_MMA=1 TORCH_CUDA_ARCH_LIST="8.0+PTX;8.9+PTX" MAX_JOBS=16 \
      python3 setup.py build_ext --inplace) > "$OUT/ref_build.log" 2>&1
  echo "reference sm80/sm89 build: $(( $(date +%s) - start )) s"
  dump_sass=1
  # Keep the build for the next session: OUT/ref_mma_so.tar.xz, to copy into $REF and carry.
  out_abs=$(cd "$OUT" && pwd)
  (cd "$REF" && tar cJf "$out_abs/ref_mma_so.tar.xz" sageattention/_qattn_sm80*.so sageattention/_qattn_sm89*.so \
      sageattention/_fused*.so) || true
fi
if [ "${dump_sass:-0}" = 1 ] && command -v cuobjdump >/dev/null; then  # after a build only
  for a in 80 89; do
    so=$(ls "$REF"/sageattention/_qattn_sm${a}*.so | head -1)
    cuobjdump -res-usage -arch sm_$a "$so" > "$OUT/ref_res_sm$a.txt" 2>&1 || true
    cuobjdump -sass -arch sm_$a "$so" 2>/dev/null | xz -6 > "$OUT/ref_sass_sm$a.txt.xz" || true
  done
fi

export PYTHONPATH=$PWD/python:$PWD/$REF SAGE2_LIBRARY=$PWD/.dev/libsage2.so PYTHONUNBUFFERED=1
export SAGE2_CACHE_DIR=${SAGE2_CACHE_DIR:-/tmp/sage2-ptx-cache}
for arch in sm_80 sm_89; do
  SAGE2_TARGET_ARCH=$arch python3 bench/ptx_bench.py --out "$OUT/ptx.jsonl" --run "$RUN" "$@" 2>&1 |
    tee -a "$OUT/ptx_bench.log"
done
