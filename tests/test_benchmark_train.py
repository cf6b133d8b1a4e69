"""`python -m benchmarks train` times the seed's adding-problem model on both sides: check
that both sides are that model (56,897 parameters) and that a step trains."""

import numpy as np
import pytest

import minitensor as mt
from benchmarks import train
from benchmarks.common import compare_rounds


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


def test_the_floors_multiply_adds_are_pytorchs_count_of_the_same_step():
    """The floor's count from the shapes against PyTorch's FlopCounterMode on its step (which has no
    formula for the fused CPU attention kernel, so the attention's part is left out of both)."""
    from torch.utils.flop_counter import FlopCounterMode

    _, step = train.torch_model()
    x, y = train._batches(1)[0]
    with FlopCounterMode(display=False) as flops:
        step(x, y)
    assert flops.get_total_flops() == 2 * train.step_multiply_adds(attention=False)


def test_the_overhead_line_prints_ratio_target_and_floor(monkeypatch, capsys):
    import json

    from benchmarks import overhead

    monkeypatch.setattr(overhead, "CHAIN", 12)
    monkeypatch.setattr(overhead, "REPEATS", 1)
    overhead.worker("minitensor")
    timed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(timed) == {label for label, _ in overhead.ROWS} and all(s > 0 for s in timed.values())
    label = overhead.ROWS[0][0]
    compared = compare_rounds([2e-5], [1e-5])
    line = overhead.mix_line({label: {"minitensor": 2e-5, "engine-alone": 1e-5, "torch": 1e-5, "ratio": 2.0,
                                      "compared": compared}})
    assert "2.00x" in line and f"target <= {overhead.TARGET}x" in line and "floor" in line
