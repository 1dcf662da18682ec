#!/usr/bin/env bash
cd "$(dirname "$0")/.."
O=/tmp/t; rm -rf $O; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout 400 .dev/tests/sage2_gpu_tests -tc='gpu tiered*,*concurren*' > $O/gpu_tiered_concurrency.log 2>&1
echo "rc=$?"; tail -4 $O/gpu_tiered_concurrency.log; grep -h "MESSAGE" -A1 $O/gpu_tiered_concurrency.log | head -8
tar czf $OUT/t.tgz -C /tmp t
