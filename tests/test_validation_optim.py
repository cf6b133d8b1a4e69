"""Optimizers refuse what torch.optim refuses, with its words, and a step updates every
parameter or none (issue 15, sections 4 and 5)."""

import math

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor import nn, optim


def two_parameters():
    w = nn.Parameter(np.arange(6.0).reshape(2, 3))
    b = nn.Parameter(np.ones(3))
    w.name, b.name = "w", "b"
    return w, b


def test_one_bare_parameter_is_refused_not_iterated_by_rows():
    p = nn.Parameter(np.ones(3))
    with pytest.raises(
        TypeError,
        match=r"SGD: params should be an iterable of Tensors or of dicts.*got a Parameter of shape \(3,\).*SGD\(\[p\]",
    ):
        optim.SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        torch.optim.SGD(torch.ones(3, requires_grad=True), lr=0.1)


def test_one_bare_parameter_in_clip_grad_norm_is_clipped_as_torch_does():
    p, t = nn.Parameter(np.array([3.0, 4.0])), torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    p.grad, t.grad = np.array([3.0, 4.0]), torch.tensor([3.0, 4.0], dtype=torch.float64)
    total = optim.clip_grad_norm_(p, 1.0)
    expected = torch.nn.utils.clip_grad_norm_(t, 1.0)
    assert total == pytest.approx(float(expected))
    np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-12)


BAD_SETTINGS = [
    ("SGD", dict(lr=-0.1), r"Invalid learning rate: -0.1"),
    ("SGD", dict(lr=0.1, momentum=-0.5), r"Invalid momentum value: -0.5"),
    ("SGD", dict(lr=0.1, weight_decay=-1e-4), r"Invalid weight_decay value: -0.0001"),
    ("Adam", dict(lr=-1e-3), r"Invalid learning rate: -0.001"),
    ("Adam", dict(eps=-1e-8), r"Invalid epsilon value: -1e-08"),
    ("Adam", dict(weight_decay=-0.1), r"Invalid weight_decay value: -0.1"),
    ("Adam", dict(betas=(1.0, 0.999)), r"Invalid beta parameter at index 0: 1.0"),
    ("Adam", dict(betas=(0.9, -0.1)), r"Invalid beta parameter at index 1: -0.1"),
    ("AdamW", dict(betas=(0.9, 1.5)), r"Invalid beta parameter at index 1: 1.5"),
    ("AdamW", dict(lr=math.nan), r"Invalid learning rate: nan"),
]


@pytest.mark.parametrize("name, settings, message", BAD_SETTINGS)
def test_settings_torch_refuses_are_refused_with_its_words(name, settings, message):
    with pytest.raises(ValueError, match=message):
        getattr(torch.optim, name)([torch.ones(2, requires_grad=True)], **settings)
    with pytest.raises(ValueError, match=rf"^{name}: {message}"):
        getattr(optim, name)([nn.Parameter(np.ones(2))], **settings)


def test_a_bad_setting_in_one_group_is_refused():
    w, b = two_parameters()
    with pytest.raises(ValueError, match=r"Invalid learning rate: -1"):
        optim.SGD([{"params": [w]}, {"params": [b], "lr": -1.0}], lr=0.1)


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr="0.1"), lambda ps: optim.Adam(ps, lr="0.1")])
def test_a_learning_rate_given_as_a_string_is_refused_when_made(make):
    with pytest.raises(TypeError, match=r"lr must be a number, got str '0.1'"):
        make(list(two_parameters()))


def test_betas_that_are_not_a_pair_are_refused():
    with pytest.raises(TypeError, match=r"Adam: betas must be a pair of numbers \(beta1, beta2\), got float 0.9"):
        optim.Adam(list(two_parameters()), betas=0.9)


def test_a_parameter_in_two_groups_is_refused_as_torch_does():
    w, b = two_parameters()
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        tw = torch.ones(2, requires_grad=True)
        torch.optim.SGD([{"params": [tw]}, {"params": [tw]}], lr=0.1)
    with pytest.raises(
        ValueError,
        match=r"some parameters appear in more than one parameter group: parameter 0 of group 0 is also parameter 1 of "
              r"group 1 \('w'\)",
    ):
        optim.SGD([{"params": [w]}, {"params": [b, w]}], lr=0.1)


def test_a_parameter_twice_in_one_group_is_refused():
    w, _ = two_parameters()
    with pytest.raises(ValueError, match=r"appear in group 0 twice.*updated twice per step"):
        optim.Adam([w, w])


def test_things_that_are_not_tensors_are_refused():
    with pytest.raises(TypeError, match=r"SGD: can only optimize Tensors, but parameter 1 of group 0 is float 3.0"):
        optim.SGD([nn.Parameter(np.ones(2)), 3.0], lr=0.1)
    with pytest.raises(TypeError, match=r"mixes parameter groups \(dicts\) with a Parameter"):
        optim.SGD([{"params": [nn.Parameter(np.ones(2))]}, nn.Parameter(np.ones(2))], lr=0.1)


def test_a_non_leaf_tensor_is_refused():
    w, _ = two_parameters()
    with pytest.raises(ValueError, match=r"can't optimize a non-leaf Tensor .*computed by Mul"):
        optim.SGD([w * 2], lr=0.1)


@pytest.mark.parametrize(
    "make", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), lambda ps: optim.Adam(ps), lambda ps: optim.AdamW(ps)]
)
def test_a_gradient_of_the_wrong_shape_is_refused_before_any_update(make):
    w, b = two_parameters()
    opt = make([w, b])
    before = [w.data.copy(), b.data.copy()]
    w.grad = np.ones((2, 3))
    b.grad = np.ones(1)  # would broadcast into b's update
    name = type(opt).__name__
    with pytest.raises(
        ValueError,
        match=rf"{name}.step: the gradient of parameter 1 of group 0 \('b'\), shape \(3,\) has shape \(1,\), not the "
              rf"parameter's shape \(3,\)",
    ):
        opt.step()
    np.testing.assert_array_equal(w.data, before[0])  # the first parameter was not updated either
    np.testing.assert_array_equal(b.data, before[1])
    assert opt.state == {} and opt.step_count == 0
    assert w._version_counter[0] == 0


def test_a_tensor_as_gradient_is_refused():
    w, b = two_parameters()
    opt = optim.SGD([w, b], lr=0.1)
    w.grad = mt.ones(2, 3)
    with pytest.raises(
        TypeError,
        match=r"SGD.step: the gradient of parameter 0 of group 0 \('w'\), shape \(2, 3\) must be an array, "
              r"got a Tensor",
    ):
        opt.step()


def test_a_setting_broken_after_construction_stops_the_step_before_any_state_changes():
    w, b = two_parameters()
    opt = optim.Adam([w, b], lr=0.01)
    w.grad, b.grad = np.ones((2, 3)), np.ones(3)
    opt.step()
    state = {key: {name: np.copy(value) for name, value in s.items()} for key, s in opt.state.items()}
    weights = [w.data.copy(), b.data.copy()]
    opt.param_groups[0]["lr"] = "0.1"
    with pytest.raises(TypeError, match=r"Adam: lr must be a number, got str '0.1'"):
        opt.step()
    assert opt.step_count == 1
    for key, s in opt.state.items():
        for name, value in s.items():
            np.testing.assert_array_equal(value, state[key][name])
    np.testing.assert_array_equal(w.data, weights[0])
    np.testing.assert_array_equal(b.data, weights[1])


def test_valid_groups_and_settings_still_match_torch():
    """The checks refuse nothing torch accepts: two groups, zero lr and betas at 0."""
    rng = np.random.default_rng(0)
    start = [rng.standard_normal((2, 3)), rng.standard_normal(3)]
    ours = [nn.Parameter(a.copy()) for a in start]
    theirs = [torch.tensor(a.copy(), requires_grad=True) for a in start]
    opt = optim.Adam([{"params": [ours[0]], "lr": 0.0}, {"params": ours[1]}], lr=0.1, betas=(0.0, 0.5), eps=0.0)
    topt = torch.optim.Adam(
        [{"params": [theirs[0]], "lr": 0.0}, {"params": theirs[1]}], lr=0.1, betas=(0.0, 0.5), eps=0.0
    )
    for _ in range(3):
        grads = [rng.standard_normal(a.shape) for a in start]
        for p, t, g in zip(ours, theirs, grads):
            p.grad, t.grad = g.copy(), torch.tensor(g.copy())
        opt.step()
        topt.step()
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.data, t.detach().numpy(), rtol=1e-12, atol=1e-14)
