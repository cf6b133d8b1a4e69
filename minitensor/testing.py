"""Compare a minitensor function with its PyTorch twin, on the same arrays.

    from minitensor.testing import assert_matches_torch
    assert_matches_torch(lambda x: x.softmax(axis=-1),
                         lambda x: torch.softmax(x, dim=-1),
                         np.random.randn(4, 5))

Both functions get the same inputs (floating arrays require grad on both
sides); the outputs are compared, then both backpropagate the same random
upstream gradient and every input's gradient is compared. A gradient that one
side has and the other lacks (None) is a difference, not zeros: PyTorch's zero
gradient against minitensor's None, or the reverse, fails. PyTorch is imported
only when this is called.
"""

import numpy as np

from .tensor import Tensor


def assert_matches_torch(mt_fn, torch_fn, *arrays, rtol=1e-5, atol=1e-6, check_grad=True, seed=0):
    """Raise AssertionError naming what differs (the output, or input k's gradient).

    arrays: NumPy arrays (floating ones require grad), or anything else, which
    both functions receive unchanged. Returns (minitensor output, torch output).
    """
    import torch

    mt_inputs, torch_inputs = [], []
    for a in arrays:
        if isinstance(a, np.ndarray):
            floating = a.dtype.kind == "f"
            mt_inputs.append(Tensor(a.copy(), requires_grad=floating and check_grad))
            torch_inputs.append(torch.tensor(a.copy(), requires_grad=floating and check_grad))
        else:
            mt_inputs.append(a)
            torch_inputs.append(a)

    mt_out = mt_fn(*mt_inputs)
    torch_out = torch_fn(*torch_inputs)
    torch_values = torch_out.detach().numpy()
    if mt_out.shape != torch_values.shape:
        raise AssertionError(f"output shapes differ: minitensor {mt_out.shape}, torch {tuple(torch_values.shape)}")
    np.testing.assert_allclose(mt_out.data, torch_values, rtol=rtol, atol=atol, err_msg="outputs differ")

    if check_grad and mt_out.requires_grad != torch_out.requires_grad:
        raise AssertionError(f"the output requires grad in {'minitensor' if mt_out.requires_grad else 'torch'} only: "
                             f"the other side's graph does not reach the inputs")
    if check_grad and mt_out.requires_grad:
        upstream = np.random.default_rng(seed).standard_normal(mt_out.shape).astype(mt_out.dtype)
        mt_out.backward(upstream)
        torch_out.backward(torch.from_numpy(upstream.copy()))
        for k, (m, t) in enumerate(zip(mt_inputs, torch_inputs)):
            if not isinstance(m, Tensor) or not m.requires_grad:
                continue
            if m.grad is None and t.grad is None:
                continue  # neither side's output depends on this input
            if m.grad is None or t.grad is None:
                has, lacks = ("torch", "minitensor") if m.grad is None else ("minitensor", "torch")
                raise AssertionError(f"input {k} (shape {m.shape}): {has} gives it a gradient, {lacks} none (None)")
            np.testing.assert_allclose(
                m.grad, t.grad.numpy(), rtol=rtol, atol=atol, err_msg=f"gradients of input {k} differ"
            )
    return mt_out, torch_out


def op_forward(function, *arrays, **options):
    """A Function's own forward on plain arrays, with no accelerator active (what every
    accelerator's kernel is tested against): (output, node), the node holding what forward
    saved (node.saved_tensors) and set (node.axis, ...).

        y, node = op_forward(mt.ops.Softmax, x, axis=-1)
    """
    from . import backends
    from .autograd import Context

    node = Context(function, (True,) * len(arrays))
    with backends.use_backend("numpy"):
        return function.forward(node, *arrays, **options), node


def op_backward(function, grad, saved, **attributes):
    """A Function's own backward, with no accelerator active, on a node holding the arrays
    `saved` (as forward saves them) and the `attributes` forward sets:

        dx = op_backward(mt.ops.Softmax, dy, (y,), axis=-1, mask=None)
    """
    from . import backends
    from .autograd import Context

    node = Context(function, (True,) * 3)
    node.save_for_backward(*saved)
    for name, value in attributes.items():
        setattr(node, name, value)
    with backends.use_backend("numpy"):
        return function.backward(node, grad)
