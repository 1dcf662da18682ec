"""What the custom ops of sage2 (torch.ops.sage2.*) share."""


def inference_only(op, name):
    """Registers an autograd rule for the custom op `op` that refuses backward: sage2's kernels are
    inference kernels (quantized attention). `name` is the Python entry point named in the error."""

    def setup_context(ctx, inputs, output):
        pass

    def backward(ctx, grad_out, grad_lse):
        raise RuntimeError("%s has no backward: it is an inference kernel (quantized attention). "
                           "Use torch.nn.functional.scaled_dot_product_attention for training." % name)

    op.register_autograd(backward, setup_context=setup_context)
