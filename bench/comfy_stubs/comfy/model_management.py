"""Stub of comfy.model_management: what attention.py asks at import and in its attention functions,
answered as ComfyUI does on an NVIDIA GPU started with --use-sage-attention."""
import torch


def xformers_enabled():
    return False


def sage_attention_enabled():
    return True


def flash_attention_enabled():
    return False


def pytorch_attention_enabled():
    return True


def comfy_kitchen_attention_enabled():
    return False


def force_upcast_attention_dtype():
    return None


def is_nvidia():
    return torch.cuda.is_available() and torch.version.cuda is not None


def get_torch_device():
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def get_free_memory(dev=None, torch_free_too=False):
    dev = dev or get_torch_device()
    if getattr(dev, "type", "cpu") == "cuda":
        free = torch.cuda.mem_get_info(dev)[0]
    else:
        free = 8 << 30
    return (free, free) if torch_free_too else free


def soft_empty_cache(force=False):
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def raise_non_oom(e):
    if not isinstance(e, torch.cuda.OutOfMemoryError):
        raise e
