"""Stub of the comfy_kitchen package that recent ComfyUI's attention.py imports: no INT8 attention."""


def int8_attention_is_available(device=None):
    return False
