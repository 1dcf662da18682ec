"""Stub of comfy.cli_args: the parsed command line of `python main.py --use-sage-attention`."""
import argparse

args = argparse.Namespace(
    use_sage_attention=True,
    use_flash_attention=False,
    use_pytorch_cross_attention=False,
    use_split_cross_attention=False,
    use_quad_cross_attention=False,
    disable_xformers=True,
    dont_upcast_attention=False,
    force_upcast_attention=False,
)
