#!/usr/bin/env bash
# session 18 c4: where does a repeated first compile find its work? files written by a compile, outside our cache dir.
cd "$(dirname "$0")/.."
O=/tmp/c4; rm -rf $O; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fc() { d=$(mktemp -d); .dev/bench/sage2-bench-jit --cache-dir $d --first-call $1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print(r['head_dim'], 'first', round(r['first_call_ms']), [round(k['load_ms']) for k in r['kernels']])"; rm -rf $d; }
touch $O/marker; sleep 1
fc 152
find / -xdev \( -path /proc -o -path /sys -o -path /tmp/c4 \) -prune -o -type f -newer $O/marker -print 2>/dev/null | grep -v "^/tmp/sage2\|/work" | head -40 > $O/new_files.txt
cat $O/new_files.txt; echo "HOME=$HOME"; ls -la $HOME/.nv 2>&1 | head; du -sh $HOME/.nv/* 2>/dev/null
fc 152
HOME=/tmp/h2 XDG_CACHE_HOME=/tmp/h2c fc 152
tar czf $OUT/c4.tgz -C /tmp c4
