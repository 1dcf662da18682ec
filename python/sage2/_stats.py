"""sage2.stats(): how many kernels this process compiled with NVRTC and how many it loaded from the
disk cache (sage2_process_kernel_stats / sage2_context_kernel_stats, include/sage2/sage2.h).

Reading the counts loads nothing: no context is created, and torch is consulted only when a sage2
context exists whose device has to be told apart (device=None).
"""
from . import _lib, _tune

__all__ = ["stats"]

_WHERE = "sage2.stats"


def stats(device=None):
    """Kernel counts: {"process": {...}, "context": {...} or None, "device": ordinal or None}.

    Each count dict holds compiled (kernels compiled by NVRTC: found neither in memory nor in the
    disk cache), disk_loads (loaded from the disk cache), memory_hits (kernel requests served by a
    kernel the context already held; a call whose plan is cached asks for none), loaded (kernels
    held now; process: by the live contexts) and compile_seconds (wall time of the compiles).
    "process" covers every context of the process, destroyed ones included (not the compile phases
    of sage2.tune and sage2.warmup, which build straight into the disk cache: what they then load
    counts as disk_loads). "context" is the sage2 context of `device` —
    None (torch's current device when torch is loaded and sees CUDA, else 0), an ordinal,
    "cuda:N" or a torch.device — or None when this process has not used sage2 on that device.
    "device" is the ordinal whose context was looked up; with no sage2 context in the process
    nothing is looked up, and it is the ordinal given (None for the current device).

    A bad device raises TypeError/ValueError before the library is loaded; a libsage2 without the
    counts raises sage2.UnsupportedError."""
    spec = _tune._device_spec(device, _WHERE)
    _lib.require_kernel_stats()
    out = {"process": _lib.kernel_stats(None), "context": None, "device": spec}
    if not _lib._contexts:
        return out  # no context anywhere: nothing to resolve, torch's CUDA state left alone
    ordinal = _tune._device_ordinal(spec)
    out["device"] = ordinal
    ctx = _lib.existing_context(ordinal)
    if ctx is not None:
        out["context"] = _lib.kernel_stats(ctx)
    return out
