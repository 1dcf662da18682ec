#!/usr/bin/env bash
# session 18 c3: the same first call 10 times (fresh cache each) with the cgroup's CPU throttling counters around each.
cd "$(dirname "$0")/.."
O=/tmp/c3; rm -rf $O; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cat /sys/fs/cgroup/cpu.max 2>/dev/null; nproc
thr() { awk '/nr_throttled|throttled_usec|usage_usec/{printf "%s=%s ", $1, $2}' /sys/fs/cgroup/cpu.stat 2>/dev/null; }
for i in 1 2 3 4 5 6 7 8 9 10; do
  hd=$((64 + 8 * i)); d=$(mktemp -d)
  a=$(thr); s=$(date +%s.%N)
  .dev/bench/sage2-bench-jit --cache-dir $d --first-call $hd > $O/r$i.json
  e=$(date +%s.%N); b=$(thr)
  python3 -c "import json; r=json.load(open('$O/r$i.json')); print('hd', r['head_dim'], 'first', round(r['first_call_ms']), [round(k['load_ms']) for k in r['kernels']], 'wall', round(($e-$s)*1000))"
  echo "   before: $a"; echo "   after:  $b"; cat /proc/loadavg
  rm -rf $d
done
tar czf $OUT/c3.tgz -C /tmp c3
