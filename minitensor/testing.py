"""Compare a minitensor function with its PyTorch twin, on the same arrays.

    from minitensor.testing import assert_matches_torch
    assert_matches_torch(lambda x: x.softmax(axis=-1),
                         lambda x: torch.softmax(x, dim=-1),
                         np.random.randn(4, 5))

Both functions get the same inputs (floating arrays require grad on both
sides); the outputs are compared, then both backpropagate the same random
upstream gradient and every input's gradient is compared. PyTorch is imported
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

    if check_grad and mt_out.requires_grad:
        upstream = np.random.default_rng(seed).standard_normal(mt_out.shape).astype(mt_out.dtype)
        mt_out.backward(upstream)
        torch_out.backward(torch.from_numpy(upstream.copy()))
        for k, (m, t) in enumerate(zip(mt_inputs, torch_inputs)):
            if not isinstance(m, Tensor) or not m.requires_grad:
                continue
            mt_grad = m.grad if m.grad is not None else np.zeros(m.shape, m.dtype)
            torch_grad = t.grad.numpy() if t.grad is not None else np.zeros(m.shape, m.dtype)
            np.testing.assert_allclose(
                mt_grad, torch_grad, rtol=rtol, atol=atol, err_msg=f"gradients of input {k} differ"
            )
    return mt_out, torch_out
