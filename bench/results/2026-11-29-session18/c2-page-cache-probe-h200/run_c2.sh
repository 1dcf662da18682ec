#!/usr/bin/env bash
# session 18 c2: which files a cold first compile reads: sage2-info's NVRTC, then drop caches and pre-read candidates one group at a time.
cd "$(dirname "$0")/.."
O=/tmp/c2; rm -rf $O; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fc() { d=$(mktemp -d); .dev/bench/sage2-bench-jit --cache-dir $d --first-call $1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print('$2 hd', r['head_dim'], 'first', round(r['first_call_ms']), 'ms ctx', round(r['context_ms']), [round(k['load_ms']) for k in r['kernels']])"; rm -rf $d; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
.dev/tools/sage2-info 2>&1 | tee $O/info.txt
NV=$(awk '/^NVRTC [0-9]/{print $3}' $O/info.txt); NVB=$(awk '/^NVRTC builtins/{print $3}' $O/info.txt)
CUDA=$(awk '/^driver/{for(i=1;i<=NF;i++) if ($i ~ /libcuda/) print $i}' $O/info.txt | head -1)
echo "nvrtc=$NV builtins=$NVB"; ls -la $(readlink -f $NV) $(readlink -f $NVB)
LIBCUDA=$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}'); PTXJIT=$(ldconfig -p | awk '/libnvidia-ptxjitcompiler.so.1 /{print $NF; exit}')
echo "libcuda=$LIBCUDA ptxjit=$PTXJIT"
fc 72 "warm-up of this machine"
drop; fc 136 "after drop"
drop; cat $(readlink -f $NV) $(readlink -f $NVB) > /dev/null; fc 200 "after drop + pre-read of sage2's NVRTC"
drop; cat $(readlink -f $LIBCUDA) $(readlink -f $PTXJIT) > /dev/null; fc 104 "after drop + pre-read of libcuda + ptxjit"
drop; cat $(readlink -f $NV) $(readlink -f $NVB) $(readlink -f $LIBCUDA) $(readlink -f $PTXJIT) .dev/libsage2.so* .dev/bench/sage2-bench-jit > /dev/null; fc 88 "after drop + pre-read of all of them"
tar czf $OUT/c2.tgz -C /tmp c2
