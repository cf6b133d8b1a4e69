"""`python -m benchmarks block` times minitensor's block against a hand-written NumPy one and
PyTorch's: check that the three compute the same block, so the ratios compare like with like."""

import numpy as np
import torch

from benchmarks import block


def test_the_hand_written_block_equals_minitensors():
    assert block._agree()


def test_minitensors_block_equals_pytorchs_on_the_same_weights():
    torch.set_num_threads(1)
    ours, theirs = block.make_models()
    x, dout = block._inputs()
    out, dx, _ = block.handwritten(ours, x, dout)
    tx = torch.from_numpy(x).requires_grad_()
    mask = torch.triu(torch.ones(block.T, block.T, dtype=torch.bool), diagonal=1)
    y = theirs(tx, mask)
    y.backward(torch.from_numpy(dout))
    np.testing.assert_allclose(out, y.detach().numpy(), atol=1e-3)
    np.testing.assert_allclose(dx, tx.grad.numpy(), atol=1e-3)


def test_the_floors_multiply_adds_are_pytorchs_count_of_the_same_block():
    """As for the training step: the count from the shapes equals FlopCounterMode's (attention aside)."""
    from torch.utils.flop_counter import FlopCounterMode

    torch.set_num_threads(1)
    _, theirs = block.make_models()
    x, dout = block._inputs()
    mask = torch.triu(torch.ones(block.T, block.T, dtype=torch.bool), diagonal=1)
    with FlopCounterMode(display=False) as flops:
        theirs(torch.from_numpy(x).requires_grad_(), mask).backward(torch.from_numpy(dout))
    assert flops.get_total_flops() == 2 * block.block_multiply_adds(attention=False)
