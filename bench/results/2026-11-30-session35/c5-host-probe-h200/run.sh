#!/usr/bin/env bash
# Session 35 c5 (discovery): where a call's host time goes, sage2 (26e6642's library, .dev-sb) and
# cuDNN through torch SDPA, 6 shapes: host µs per call with the GPU busy (whole call, sage2's C call
# alone, torch.empty alone), e2e on an idle GPU, and the replay of a CUDA graph of the call.
mkdir -p $OUT/c5 && PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev-sb/libsage2.so timeout 300 \
  python3 bench/results/2026-11-30-session35/c5-host-probe-h200/host_probe.py 2>&1 | tee $OUT/c5/host_probe.txt
