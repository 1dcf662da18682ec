"""One attention call of a method, for a profiler to catch (ncu -k regex:...): B 4, H 32, fp16,
seeded inputs, three calls (the profiler picks one with --launch-skip).

  python3 bench/ncu_attention.py {sage2|sage2_ref} HEAD_DIM N CAUSAL
"""
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import sys

import torch


def main() -> None:
    method, hd, n, causal = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(4, 32, n, hd, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
    if method == "sage2":
        import sage2

        def call():
            return sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=causal)
    else:
        from sageattention import sageattn_qk_int8_pv_fp8_cuda_sm90 as ref

        def call():
            return ref(q, k, v, tensor_layout="HND", is_causal=causal)
    for _ in range(3):
        call()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
