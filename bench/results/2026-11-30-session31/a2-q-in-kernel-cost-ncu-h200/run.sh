#!/usr/bin/env bash
# Session 31 call a2 (main 05d8507): where the wgmma attention kernel loses to the reference's at
# short sequences. (1) sage2-bench-attention kernel mode, Auto (Q quantized in the attention
# kernel) against SAGE2_QUANT_PATH=split (Q̂ from quantize_q), 3 rounds alternated, hd 64 / 128,
# N 1K / 2K / 8K, non-causal. (2) ncu --set full of the attention kernel at hd 128 1K: sage2 Auto,
# sage2 split, the reference's kernel. (3) ncu of channel_stats (the cluster form) at hd 128 1K.
set -u
O=/tmp/s31a2; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s31-nvcache SAGE2_TIERED_COMPILE=0
export PYTHONPATH=$PWD/python:$PWD/.anchors-ref SAGE2_LIBRARY=$PWD/.dev-sb/libsage2.so
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev-sb/tools/sage2-info --version > $O/version.txt 2>&1
cp .scratch/s31/a2.sh $O/run.sh
for r in 1 2 3; do
  for p in auto split; do
    SAGE2_QUANT_PATH=$p timeout 60 .dev-sb/bench/sage2-bench-attention --head-dims 64,128 --seq-lens 1024,2048,8192 --causal 0 --modes kernel --json $O/k_${p}_r$r.jsonl > $O/k_${p}_r$r.log 2>&1; t "kernel $p r$r" $?
  done
done
tar czf $OUT/s31a2_k.tgz -C /tmp s31a2
for m in sage2:auto sage2:split sage2_ref:auto; do
  meth=${m%%:*}; p=${m##*:}; k='regex:sage2_attention_wgmma'; [[ $meth == sage2_ref ]] && k='regex:qk_int8_sv_f8'
  SAGE2_QUANT_PATH=$p timeout 90 ncu --set full -k "$k" --launch-skip 2 -c 1 -o $O/ncu_${meth}_$p -f python3 bench/ncu_attention.py $meth 128 1024 0 > $O/ncu_${meth}_$p.log 2>&1; t "ncu $m" $?
  ncu -i $O/ncu_${meth}_$p.ncu-rep --page details > $O/ncu_${meth}_$p.txt 2>&1
  tar czf $OUT/s31a2_n.tgz -C /tmp s31a2
done
timeout 90 ncu --set full -k regex:channel_stats --launch-skip 2 -c 1 -o $O/ncu_stats -f python3 bench/ncu_attention.py sage2 128 1024 0 > $O/ncu_stats.log 2>&1; t "ncu stats" $?
ncu -i $O/ncu_stats.ncu-rep --page details > $O/ncu_stats.txt 2>&1
tar czf $OUT/s31a2.tgz -C /tmp s31a2
