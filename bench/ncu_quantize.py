"""One shape's sage2.sageattn calls for a profiler to catch (issue 39: the quantize stage's kernels
under ncu -k regex:...): seeded inputs of a bench/stage_profile.py shape, three calls (the profiler
picks some with --launch-skip / --launch-count).

  python3 bench/ncu_quantize.py SHAPE      (a name of bench/stage_profile.py SHAPES)
"""
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stage_profile import SHAPES  # noqa: E402


def main() -> None:
    import torch
    import sage2

    b, h, hkv, hd, n, causal, dtype = SHAPES[sys.argv[1]]
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, h, n, hd, device="cuda", dtype=dt, generator=g)
    k, v = (torch.randn(b, hkv, n, hd, device="cuda", dtype=dt, generator=g) for _ in range(2))
    for _ in range(3):
        sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=causal)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
