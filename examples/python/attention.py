"""One attention call through sage2 from PyTorch, checked against torch's own attention.

    python3 examples/python/attention.py

B 1, H 8, N 1024, head dim 128, fp16, causal. Exit status: 0 the call ran and matched; 1 a mismatch
or an error; 77 nothing to run here (no torch, or no CUDA GPU: the script says which)."""
import sys


def main():
    try:
        import torch
    except ImportError:
        print("sage2 example: PyTorch is not installed here; the example passes torch tensors to sage2")
        return 77
    if not torch.cuda.is_available():
        print("sage2 example: torch sees no CUDA GPU here; sage2 needs an NVIDIA GPU of sm_80 or newer")
        return 77
    import sage2

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, 8, 1024, 128, dtype=torch.float16, device="cuda", generator=g) for _ in range(3))
    out = sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=True)  # compiles on first use, then cached
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    cos = torch.nn.functional.cosine_similarity(out.float().flatten(), ref.flatten(), dim=0).item()
    rel_l1 = ((out.float() - ref).abs().sum() / ref.abs().sum()).item()
    print("sage2 %s on %s: cos %.6f, rel-L1 %.4f against torch's fp32 attention"
          % (sage2.__version__, torch.cuda.get_device_name(0), cos, rel_l1))
    return 0 if cos >= 0.999 else 1


if __name__ == "__main__":
    sys.exit(main())
