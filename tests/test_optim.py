"""Optimizers and schedules, step by step against torch.optim on the same parameters and gradients."""

import numpy as np
import pytest
import torch

from minitensor import nn, optim

CASES = [
    (lambda p: optim.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    (lambda p: optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01), lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01)),
    (lambda p: optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1), lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1)),
    (lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True), lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True)),
    (lambda p: optim.Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01)),
    (lambda p: optim.Adam(p, lr=0.01, betas=(0.8, 0.95), weight_decay=0.1), lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.95), weight_decay=0.1)),
    (lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.1), lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)),
    (lambda p: optim.Adam(p, lr=0.01, amsgrad=True), lambda p: torch.optim.Adam(p, lr=0.01, amsgrad=True)),
    (lambda p: optim.AdamW(p, lr=0.01, betas=(0.5, 0.6), amsgrad=True), lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.5, 0.6), amsgrad=True)),
]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_optimizer_matches_torch_step_by_step(index):
    make_ours, make_theirs = CASES[index]
    rng = np.random.default_rng(index)
    start = [rng.standard_normal((3, 4)), rng.standard_normal(4)]
    ours = [nn.Parameter(a.copy()) for a in start]
    theirs = [torch.tensor(a.copy(), requires_grad=True) for a in start]
    opt, topt = make_ours(ours), make_theirs(theirs)
    for step in range(6):
        # gradients that shrink then grow: amsgrad's largest v differs from the current v
        grads = [rng.standard_normal(a.shape) * (0.3 if step in (2, 3) else 1.0) for a in start]
        for p, t, g in zip(ours, theirs, grads):
            p.grad, t.grad = g.copy(), torch.tensor(g.copy())
        opt.step()
        topt.step()
        for p, t in zip(ours, theirs):
            np.testing.assert_allclose(p.data, t.detach().numpy(), rtol=1e-12, atol=1e-14, err_msg=f"step {step}")


def test_decay_groups_exclude_gains_and_biases():
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    groups = optim.decay_groups(model, 0.1)
    assert [p.ndim for p in groups[0]["params"]] == [2, 2] and groups[0]["weight_decay"] == 0.1
    assert [p.ndim for p in groups[1]["params"]] == [1, 1] and groups[1]["weight_decay"] == 0.0
    opt = optim.AdamW(groups, lr=0.1)
    bias, weight = model[0].bias, model[0].weight
    bias_before, weight_before = bias.data.copy(), weight.data.copy()
    for p in model.parameters():
        p.grad = np.zeros_like(p.data)
    opt.step()  # zero gradients: only decay moves a parameter, and biases have none
    np.testing.assert_array_equal(bias.data, bias_before)
    np.testing.assert_allclose(weight.data, weight_before * (1 - 0.1 * 0.1), rtol=1e-6)


def test_clip_grad_norm_matches_torch():
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((3, 3)) * 5, rng.standard_normal(3)]
    ours = [nn.Parameter(np.zeros(g.shape)) for g in grads]
    theirs = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for p, t, g in zip(ours, theirs, grads):
        p.grad, t.grad = g.copy(), torch.tensor(g)
    total = optim.clip_grad_norm_(ours, 1.0)
    torch_total = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    assert total == pytest.approx(torch_total.item())
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-12)


def test_clip_grad_norm_leaves_gradients_under_the_limit_bit_for_bit():
    """Scale by min(1, max_norm / total): a total norm under max_norm changes nothing (torch
    multiplies by the clamped 1.0, which leaves every bit), and the norm is still returned."""
    grads = [np.array([[0.3, -0.4], [0.1, 0.2]]), np.array([0.25, -0.05], dtype=np.float32)]
    params = [nn.Parameter(np.zeros(g.shape, dtype=g.dtype)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.copy()
    expected = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
    assert expected < 1.0
    for max_norm in (1.0, 10.0, expected * 1.001):
        total = optim.clip_grad_norm_(params, max_norm)
        assert total == pytest.approx(expected, rel=1e-12)
        for p, g in zip(params, grads):
            assert p.grad.dtype == g.dtype and p.grad.tobytes() == g.tobytes()
    total = optim.clip_grad_norm_(params, expected / 2)  # over the limit: scaled to it
    assert total == pytest.approx(expected, rel=1e-12)
    after = np.sqrt(sum(float(np.sum(p.grad.astype(np.float64) ** 2)) for p in params))
    assert after == pytest.approx(expected / 2, rel=1e-5)


def test_schedules():
    p = [nn.Parameter(np.zeros(1))]
    opt = optim.SGD(p, lr=1.0)
    schedule = optim.warmup_cosine(opt, warmup_steps=10, total_steps=110)
    lrs = []
    for _ in range(111):
        lrs.append(opt.param_groups[0]["lr"])
        schedule.step()
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[60] == pytest.approx(0.5) and lrs[110] == pytest.approx(0.0, abs=1e-12)
    opt2 = optim.SGD(p, lr=1.0)
    linear = optim.warmup_linear(opt2, 2, 12)
    values = [opt2.param_groups[0]["lr"]] + [linear.step() or opt2.param_groups[0]["lr"] for _ in range(12)]
    assert values[1] == pytest.approx(1.0) and values[7] == pytest.approx(0.5) and values[12] == pytest.approx(0.0)
    opt3 = optim.Adam(p, lr=1.0)
    original = optim.inverse_sqrt(opt3, d_model=512, warmup_steps=4000)
    for _ in range(3999):
        original.step()
    peak = opt3.param_groups[0]["lr"]
    assert peak == pytest.approx(512**-0.5 * 4000**-0.5)  # the maximum, at step 4000
    for _ in range(12000):
        original.step()
    assert opt3.param_groups[0]["lr"] == pytest.approx(peak / 2)  # 4x the steps, half the rate


def test_optimizer_step_bumps_the_version():
    p = nn.Parameter(np.ones(2))
    y = (p * p).sum()
    p.grad = np.ones(2)
    optim.SGD([p], lr=0.1).step()
    with pytest.raises(RuntimeError, match="in-place operation changed"):
        y.backward()


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_clip_grad_norm_with_a_nonfinite_gradient_follows_pytorch(bad):
    """Issue 21, item 7: a NaN norm left the gradients as they were; PyTorch makes them NaN
    (an inf norm: finite gradients 0, infinite ones NaN), or raises with error_if_nonfinite."""
    import torch

    grads = [np.array([1.0, bad, 3.0]), np.array([[0.5, -2.0]])]
    ours = [nn.Parameter(np.zeros_like(g)) for g in grads]
    theirs = [torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.float64)) for g in grads]
    for p, q, g in zip(ours, theirs, grads):
        p.grad, q.grad = g.copy(), torch.tensor(g)
    total = optim.clip_grad_norm_(ours, 1.0)
    their_total = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    np.testing.assert_equal(total, their_total.item())
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(p.grad, q.grad.numpy())  # (assert_array_equal: NaN == NaN)
    for p, g in zip(ours, grads):
        p.grad = g.copy()
    with pytest.raises(RuntimeError, match=r"clip_grad_norm_: the total norm of the gradients is (nan|inf).*\[\(3,\)\]"):
        optim.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)
    for p, g in zip(ours, grads):
        np.testing.assert_array_equal(p.grad, g)  # raised before changing anything
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.nn.utils.clip_grad_norm_(theirs, 1.0, error_if_nonfinite=True)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_a_zero_dimensional_parameter_steps_as_in_torch(index):
    """A learnable scalar: NumPy gives scalars, not arrays, for arithmetic on 0-d arrays, and an
    in-place update of such a result would change nothing (or fail on out=)."""
    make_ours, make_theirs = CASES[index]
    ours, theirs = nn.Parameter(np.array(2.0)), torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    opt, topt = make_ours([ours]), make_theirs([theirs])
    for step in range(4):
        ours.grad, theirs.grad = 2 * ours.data, 2 * theirs.detach()  # d(p*p)/dp
        opt.step()
        topt.step()
        np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-12, err_msg=f"step {step}")
        assert isinstance(ours.data, np.ndarray) and ours.data.shape == ()


def test_clip_grad_norm_inf_sees_a_nan_in_any_gradient():
    first, second = nn.Parameter(np.zeros(2, np.float32)), nn.Parameter(np.zeros(2, np.float32))
    first.grad, second.grad = np.array([1.0, 2.0], np.float32), np.array([np.nan, 1.0], np.float32)
    assert np.isnan(optim.clip_grad_norm_([first, second], 1.0, norm_type=float("inf")))
    first.grad, second.grad = np.array([1.0, 2.0], np.float32), np.array([np.nan, 1.0], np.float32)
    with pytest.raises(RuntimeError, match="total norm of the gradients is nan"):
        optim.clip_grad_norm_([first, second], 1.0, norm_type=float("inf"), error_if_nonfinite=True)
