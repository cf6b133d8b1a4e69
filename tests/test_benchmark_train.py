"""`python -m benchmarks train` times the seed's adding-problem model on both sides: check
that both sides are that model (56,897 parameters) and that a step trains."""

import numpy as np
import pytest

import minitensor as mt
from benchmarks import train


def test_both_sides_are_the_seeds_adding_problem_transformer():
    ours, _ = train.minitensor_model()
    theirs, _ = train.torch_model()
    assert ours.num_parameters() == 56_897
    assert sum(p.numel() for p in theirs.parameters()) == 56_897


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_a_minitensor_training_step_lowers_the_loss_on_one_batch(backend):
    with mt.use_backend(backend):
        _, step = train.minitensor_model()
        x, y = train._batches(1)[0]
        losses = [step(x, y) for _ in range(5)]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
