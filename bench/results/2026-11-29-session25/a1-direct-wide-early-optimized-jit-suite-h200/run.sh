#!/usr/bin/env bash
# Session 25 call a1 (branch s24-direct-wide + 1b8bc28: the direct path up to hd 512; the optimized
# build started before the quick ones): the cold first call at hd 72/136/200/320 (3 rounds, the
# `jit` records) against main's build (hd 200 / 136, 2 rounds); NVRTC on this host for hd 200's four
# optimized kernels, alone and together; ncu of the quantize stage at hd 128 1K and Flux; then the
# whole C++ GPU suite on the branch (4 shards).
set -u
O=$OUT/a1; mkdir -p $O
nproc > $O/host.txt; lscpu | grep -E "Model name|MHz" >> $O/host.txt
timeout 120 bash scripts/gpu_cold_jit.sh /tmp/s25a1/jit_new .dev "200 136 72 320" 3 > $O/jit_new.log 2>&1
echo "jit_new rc=$?" >> $O/steps.txt
timeout 60 bash scripts/gpu_cold_jit.sh /tmp/s25a1/jit_base .dev-base "200 136" 2 > $O/jit_base.log 2>&1
echo "jit_base rc=$?" >> $O/steps.txt
NV=$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)
cd .scratch/s25/d200 && NVRTC=$NV timeout 60 python3 ../par.py ../../../templates f3baf2b2f98496f5.cu b20656f293ce7b4f.cu 001a09a0b173c14e.cu 29f606a0fc043ac4.cu > $O/par.txt 2>&1; cd ../../..
echo "par rc=$?" >> $O/steps.txt
export SAGE2_LIBRARY=$PWD/.dev/libsage2.so PYTHONPATH=$PWD/python SAGE2_TIERED_COMPILE=0
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats"
python3 .scratch/s25/ncu_one.py 4 32 1024 128 > /dev/null 2>&1  # compile first (cache)
timeout 90 ncu --kernel-name regex:"channel_stats|quantize_k|quantize_v" --launch-skip 3 --launch-count 3 $S python3 .scratch/s25/ncu_one.py 4 32 1024 128 > $O/ncu_hd128_1k.txt 2>&1
echo "ncu1 rc=$?" >> $O/steps.txt
python3 .scratch/s25/ncu_one.py 1 24 4608 128 0 bf16 > /dev/null 2>&1
timeout 90 ncu --kernel-name regex:"channel_stats|quantize_k|quantize_v" --launch-skip 3 --launch-count 3 $S python3 .scratch/s25/ncu_one.py 1 24 4608 128 0 bf16 > $O/ncu_flux.txt 2>&1
echo "ncu2 rc=$?" >> $O/steps.txt
unset SAGE2_LIBRARY PYTHONPATH SAGE2_TIERED_COMPILE
tar czf $O/jit.tgz -C /tmp s25a1
cat $O/steps.txt; cat $O/par.txt; grep -h '"what": "first_call"' /tmp/s25a1/*/cold_jit.jsonl | python3 -c "
import sys, json
for l in sys.stdin:
    r = json.loads(l); print(r['commit'][:7], r['head_dim'], r.get('cache'), r['first_call_ms'], r['optimized_after_ms'], [(k['key'][:14], round(k['load_ms'])) for k in r['kernels'] if k['tier'] == 'optimized'])"
timeout 400 bash scripts/gpu_run.sh /tmp/s25a1-suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1
echo "gpu_run rc=$?" >> $O/steps.txt
tar czf $O/suite.tgz -C /tmp s25a1-suite
tail -12 $O/gpu_run.log
cp .scratch/s25/a1.sh $O/run.sh
