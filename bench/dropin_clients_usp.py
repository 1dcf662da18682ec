"""yunchang's own SAGE attention types through the `sageattention` drop-in on several GPUs of one
host, against full attention on one GPU (issue 32, Targets, first bullet; the yunchang part of
scripts/gpu_dropin_clients.sh):

    torchrun --standalone --nproc_per_node 2 bench/dropin_clients_usp.py --out DIR [--fake-sage2]

yunchang (0.6.4) imports `sageattention` at import (yunchang.globals.HAS_SAGE_ATTENTION) and, for
AttnType.SAGE_FP8 / SAGE_AUTO, calls sageattention.sageattn_qk_int8_pv_fp8_cuda(pv_accum_dtype=
"fp32+fp32") / sageattention.sageattn with tensor_layout="NHD", return_lse=True and FlashAttention's
keywords (causal, softmax_scale, dropout_p, window_size, softcap, alibi_slopes, return_softmax) from
its ring's blocks (yunchang.ring.ring_flash_attn: select_flash_attn_impl(attn_type, "fwd-only")),
merging the blocks' (out, lse) itself. Here sage2 is reached only through that: no sage2 processor is
passed (unlike sage2.integrations.yunchang).

For each type, each mode and causal False / True, on every shape:
  ulysses  LongContextAttention, Ulysses degree P, ring degree 1 (all-to-all of heads, one block)
  ring     LongContextAttention, Ulysses degree 1, ring degree P ("basic" ring: P blocks, LSE merge)
Every rank builds the same full q, k, v (seeded; per-channel biases as in sage2's GPU tests) and takes
its contiguous sequence shard; the outputs are all-gathered and compared on rank 0 with torch SDPA in
fp32 on the whole, unsharded sequence (bar cos >= 0.9999), and with yunchang's block call on the whole
sequence on one GPU (the same kernels without the split: "one_gpu_*"). Calls into sage2 are counted
on every rank and summed (Ulysses: one per rank; ring: P per rank, causal r + 1 on rank r).
yunchang's UlyssesAttention class is tried too: it asks select_flash_attn_impl for the "fwd-bwd"
stage, which yunchang 0.6.4 has for no SAGE type (a note, not a failure of the drop-in's).
Rank 0 writes DIR/yunchang.json.
"""
import argparse
import datetime
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import sys
import time
import traceback

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import dropin_clients as DC  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

# name, B, N, H, D, dtype
SHAPES = [
    ("N16384_h24_d128_bf16", 1, 16384, 24, 128, "bfloat16"),  # a Flux / Wan sized sequence
    ("B2_N4096_h16_d64_fp16", 2, 4096, 16, 64, "float16"),
]
TYPES = {"SAGE_FP8": "sage2.sageattn_qk_int8_pv_fp8_cuda", "SAGE_AUTO": "sage2.sageattn"}
MODES = ("ulysses", "ring")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--fake-sage2", action="store_true", help="fp32 PyTorch in place of sage2 (harness check only)")
    args = ap.parse_args()

    local = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    timeout = datetime.timedelta(seconds=180)
    if cuda:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        dist.init_process_group("nccl", device_id=dev, timeout=timeout)
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    log = DC.Log(None) if rank == 0 else (lambda *a: None)
    out_path = os.path.join(args.out, "yunchang.json")
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)

    import sage2
    if args.fake_sage2:
        DC.install_fake_sage2(sage2)
    calls = DC.Calls()
    calls.install(sage2, torch)
    if not args.fake_sage2:
        try:
            sage2.set_log_level("debug")
        except Exception as e:  # noqa: BLE001
            log("note: sage2.set_log_level('debug'): %s" % e)

    rec = dict(part="yunchang", fake_sage2=bool(args.fake_sage2), world=world, device=str(dev),
               gpu=torch.cuda.get_device_name(local) if cuda else None, bar_cos=DC.COS_USP, checks={}, cases=[],
               notes={}, errors=[])
    ok_setup = True
    try:
        import sageattention
        import yunchang
        import yunchang.globals as YG
        import yunchang.kernels as YK
        from yunchang import LongContextAttention, UlyssesAttention
        from yunchang.kernels import AttnType, select_flash_attn_impl
        rec["versions"] = dict(yunchang=getattr(yunchang, "__version__", "?"), torch=torch.__version__,
                               sage2=sage2.__version__, sageattention=getattr(sageattention, "__version__", None),
                               nccl=".".join(map(str, torch.cuda.nccl.version())) if cuda else None)
        rec["checks"] = dict(HAS_SAGE_ATTENTION=bool(YG.HAS_SAGE_ATTENTION),
                             kernels_use_dropin=getattr(YK, "sageattention", None) is sageattention,
                             dropin_is_sage2=bool(getattr(sageattention, "SAGE2_SHIM", False)),
                             dropin_file=sageattention.__file__)
        log("yunchang %s, world %d (%s): HAS_SAGE_ATTENTION %s, yunchang.kernels.sageattention is the drop-in %s" % (
            rec["versions"]["yunchang"], world, rec["gpu"] or dev, rec["checks"]["HAS_SAGE_ATTENTION"],
            rec["checks"]["kernels_use_dropin"]))
        for tname in TYPES:
            try:
                UlyssesAttention(attn_type=getattr(AttnType, tname))
                rec["notes"]["UlyssesAttention(%s)" % tname] = "constructed"
            except Exception as e:  # noqa: BLE001
                rec["notes"]["UlyssesAttention(%s)" % tname] = (
                    "yunchang refuses it: %s: %s (its UlyssesAttention asks for the 'fwd-bwd' stage, which yunchang "
                    "has for no SAGE type; Ulysses runs through LongContextAttention with ring degree 1)"
                    % (e.__class__.__name__, e))
    except Exception as e:  # noqa: BLE001
        ok_setup = False
        rec["errors"].append("setup: %s: %s\n%s" % (e.__class__.__name__, e, traceback.format_exc(limit=8)))
        log("ERROR setup: %s" % e)

    groups = {}

    def layer_for(mode, attn_type):
        u, r = (world, 1) if mode == "ulysses" else (1, world)
        if (u, r) not in groups:  # new_group is collective: every rank makes the same groups in order
            yunchang.set_seq_parallel_pg(u, r, rank, world)
            groups[(u, r)] = (YG.PROCESS_GROUP.ULYSSES_PG, YG.PROCESS_GROUP.RING_PG)
        YG.PROCESS_GROUP.ULYSSES_PG, YG.PROCESS_GROUP.RING_PG = groups[(u, r)]
        return LongContextAttention(ring_impl_type="basic", attn_type=attn_type), (u, r)

    def expected_calls(mode, causal):
        if mode == "ulysses":
            return world
        return world * (world + 1) // 2 if causal else world * world

    if ok_setup:
        for si, (sname, B, N, H, D, dt) in enumerate(SHAPES):
            dtype = getattr(torch, dt)
            if not cuda:  # CPU harness check: small, fp32
                N, H, dtype = 256, 4, torch.float32
            if N % world or H % world:
                rec["errors"].append("%s: N %d / H %d not divisible by %d ranks" % (sname, N, H, world))
                continue
            q, k, v = DC.make_qkv(torch, (B, N, H, D), (B, N, H, D), dtype, dev, 500 + si)
            shard = N // world
            ql, kl, vl = (t[:, rank * shard:(rank + 1) * shard].contiguous() for t in (q, k, v))
            shape = dict(B=B, N=N, H=H, D=D, dtype=str(dtype).replace("torch.", ""), layout="NHD", shard=shard)
            for causal in (False, True):
                ref = one = None
                if rank == 0:
                    with torch.no_grad():
                        ref = DC.ref_attention(calls, torch, q, k, v, causal=causal)
                for tname, entry in TYPES.items():
                    attn_type = getattr(AttnType, tname)
                    one_cos = one_rel = None
                    one = None
                    if rank == 0:
                        try:  # yunchang's block call on the whole sequence, one GPU
                            fn = select_flash_attn_impl(attn_type, stage="fwd-only")
                            with torch.no_grad():
                                one, _ = fn(q, k, v, dropout_p=0.0, softmax_scale=D ** -0.5, causal=causal,
                                            window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_softmax=False)
                            one_cos, one_rel = DC.cosine(one, ref), DC.rel_l1(one, ref)
                        except Exception as e:  # noqa: BLE001
                            one_cos = "error: %s: %s" % (e.__class__.__name__, e)
                    for mode in MODES:
                        name = "%s/%s/%s/%s" % (tname, mode, sname, "causal" if causal else "full")
                        t0 = time.time()
                        err = None
                        full = None
                        got = {}
                        degrees = None
                        try:
                            lay, degrees = layer_for(mode, attn_type)
                            with torch.no_grad(), calls.window() as got:
                                out_local = lay(ql, kl, vl, causal=causal)
                            if cuda:
                                torch.cuda.synchronize()
                        except Exception as e:  # noqa: BLE001
                            err = "%s: %s" % (e.__class__.__name__, e)
                            out_local = torch.zeros_like(ql)
                            tb = traceback.format_exc(limit=8)
                        # collectives in the same order on every rank, failed or not
                        gathered = [torch.empty_like(out_local) for _ in range(world)]
                        dist.all_gather(gathered, out_local.contiguous())
                        per_rank = [None] * world
                        dist.all_gather_object(per_rank, dict(calls=dict(got), error=err))
                        if rank == 0:
                            full = torch.cat(gathered, dim=1)
                            total = {}
                            for pr in per_rank:
                                for kk, vv in pr["calls"].items():
                                    total[kk] = total.get(kk, 0) + vv
                            errs = [pr["error"] for pr in per_rank if pr["error"]]
                            sage_calls = {kk: vv for kk, vv in total.items() if kk.startswith("sage2.")}
                            r = dict(name=name, attn_type=tname, mode=mode, causal=causal, shape=shape,
                                     ulysses_degree=degrees[0] if degrees else None,
                                     ring_degree=degrees[1] if degrees else None,
                                     calls=sage_calls, expected_calls={entry: expected_calls(mode, causal)},
                                     sdpa_calls=total.get("torch.sdpa", 0), one_gpu_cos_vs_fp32=one_cos,
                                     one_gpu_rel_l1_vs_fp32=one_rel, seconds=round(time.time() - t0, 3))
                            if errs:
                                r.update(passed=False, why="exception", error=errs[0])
                                if err:
                                    r["traceback"] = tb
                            else:
                                r.update(cos_vs_fp32=DC.cosine(full, ref), rel_l1_vs_fp32=DC.rel_l1(full, ref),
                                         max_abs_vs_fp32=DC.max_abs(full, ref),
                                         finite=bool(torch.isfinite(full).all()))
                                if isinstance(one_cos, float):
                                    r["cos_vs_one_gpu"] = DC.cosine(full, one)
                                    r["identical_to_one_gpu"] = bool(torch.equal(full, one))
                                why = ""
                                if sage_calls.get(entry, 0) != expected_calls(mode, causal):
                                    why = "%s called %d times, expected %d" % (entry, sage_calls.get(entry, 0),
                                                                              expected_calls(mode, causal))
                                elif r["sdpa_calls"]:
                                    why = "torch SDPA ran %d times" % r["sdpa_calls"]
                                elif not r["finite"]:
                                    why = "output not finite"
                                elif r["cos_vs_fp32"] < DC.COS_USP:
                                    why = "cos %.6f < %g" % (r["cos_vs_fp32"], DC.COS_USP)
                                r.update(passed=not why, why=why)
                            rec["cases"].append(r)
                            log("  %-4s %-52s cos %s rel-L1 %s (one GPU: cos %s) calls %s%s" % (
                                "ok" if r["passed"] else "FAIL", name, DC._fmt(r.get("cos_vs_fp32")),
                                DC._fmt(r.get("rel_l1_vs_fp32"), 5), DC._fmt(one_cos), sage_calls,
                                (" -- %s %s" % (r["why"], r.get("error", ""))) if not r["passed"] else ""))
                            rec["sage2_debug_lines"] = dict(calls.debug.lines)
                            DC.write_json(out_path, rec)
                        del gathered, full
                    del one
                del ref
            del q, k, v, ql, kl, vl
            if cuda:
                torch.cuda.empty_cache()

    if rank == 0:
        rec["sage2_debug_lines"] = dict(calls.debug.lines)
        rec["python_warnings"] = dict(calls.warnings.seen)
        c = rec["checks"]
        rec["passed"] = bool(ok_setup and c.get("HAS_SAGE_ATTENTION") and c.get("kernels_use_dropin")
                             and c.get("dropin_is_sage2") and rec["cases"] and not rec["errors"]
                             and all(r["passed"] for r in rec["cases"]))
        DC.write_json(out_path, rec)
        log("yunchang: %s (%d cases, world %d)" % ("PASS" if rec["passed"] else "FAIL", len(rec["cases"]), world))
    code = torch.tensor([0 if rank else (0 if rec.get("passed") else 1)], device=dev)
    dist.broadcast(code, 0)
    dist.destroy_process_group()
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
