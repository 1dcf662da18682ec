#!/usr/bin/env bash
# session 18 c: why is a cold machine's first compile slow? page cache of the NVRTC libraries vs other causes.
cd "$(dirname "$0")/.."
O=/tmp/c; rm -rf $O; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fc() { d=$(mktemp -d); .dev/bench/sage2-bench-jit --cache-dir $d --first-call $1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print('$2 hd', r['head_dim'], 'first', round(r['first_call_ms']), 'ms ctx', round(r['context_ms']), [round(k['load_ms']) for k in r['kernels']])"; rm -rf $d; }
ls -la /usr/local/cuda/lib64/libnvrtc* 2>&1 | head; whoami
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && echo "dropped" || echo "cannot drop caches"; }
fc 320 "cold machine, 1st"
fc 320 "2nd"
fc 72 "3rd"
drop
fc 200 "after drop_caches"
fc 200 "again"
drop
cat /usr/local/cuda/lib64/libnvrtc* > /dev/null; echo "pre-read nvrtc"
fc 136 "after drop + pre-read of libnvrtc"
drop
for f in $(ldd .dev/libsage2.so | awk '/=>/{print $3}') /usr/local/cuda/lib64/libnvrtc* .dev/libsage2.so* .dev/bench/sage2-bench-jit; do cat $f > /dev/null 2>&1; done; echo "pre-read all libs"
fc 104 "after drop + pre-read of every library"
tar czf $OUT/c.tgz -C /tmp c
