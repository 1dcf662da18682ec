"""Stub of comfy.ldm.modules.diffusionmodules.util: the two names attention.py imports (used only by
its video transformer blocks, which the drop-in test does not build)."""


class AlphaBlender:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("stub: comfy's AlphaBlender is not part of the drop-in test")


def timestep_embedding(*args, **kwargs):
    raise NotImplementedError("stub: comfy's timestep_embedding is not part of the drop-in test")
