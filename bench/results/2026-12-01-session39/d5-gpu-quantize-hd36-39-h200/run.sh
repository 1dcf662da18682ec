#!/usr/bin/env bash
# Session 39 d5: the GPU quantize test cases (`gpu quantize*`) of 0cca167, whose case matrix adds
# head dims 36 and 39 on the wgmma family (the library's code is e190d8e's, whose whole C++ GPU
# suite passed in d3).
set -u
o=$OUT/d5; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/gpu.txt
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout 400 .dev/tests/sage2_gpu_tests -tc="gpu quantize*" > $o/gpu_quantize.log 2>&1; echo "rc=$?" >> $o/gpu_quantize.log
grep -E "d=(36|39)|test cases|assertions|Status|rc=" $o/gpu_quantize.log | tail -20
cd $OUT && tar cJf d5.tar.xz d5 && rm -rf d5
