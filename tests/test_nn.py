"""Module bookkeeping, the basic layers against PyTorch, and checkpoints."""

import os

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor import nn
from minitensor.testing import assert_matches_torch


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.body = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4))
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.embed.weight  # tied
        self.drop = nn.Dropout(0.1)


def test_parameters_are_registered_and_tied_weights_count_once():
    model = Tiny()
    names = [name for name, _ in model.named_parameters()]
    assert names == ["embed.weight", "body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias"]
    assert model.num_parameters() == 40 + (32 + 8) + (32 + 4)
    assert "out.weight" in model.state_dict()  # the state dict names every use, as PyTorch's


def test_train_eval_and_zero_grad():
    model = Tiny()
    assert all(m.training for m in model.modules())
    model.eval()
    assert not any(m.training for m in model.modules())
    x = mt.randn(3, 4)
    model.body(x).sum().backward()
    assert model.body[0].weight.grad is not None
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_linear_matches_torch():
    layer = nn.Linear(5, 3)
    w, b = layer.weight.data.astype(np.float64), layer.bias.data.astype(np.float64)
    x = np.random.default_rng(0).standard_normal((2, 4, 5))
    assert_matches_torch(
        lambda x, w, b: mt.F.linear(x, w, b), torch.nn.functional.linear, x, w, b, rtol=1e-10
    )


def test_default_initialisations_have_pytorchs_scale():
    mt.manual_seed(0)
    layer = nn.Linear(400, 300)
    bound = 1 / np.sqrt(400)
    assert np.abs(layer.weight.data).max() <= bound and np.abs(layer.weight.data).max() > 0.95 * bound
    assert abs(layer.weight.data.std() - bound / np.sqrt(3)) < 0.01 * bound
    assert abs(nn.Embedding(1000, 100).weight.data.std() - 1.0) < 0.02


def test_linear_bias_init_is_pytorchs_uniform_over_one_over_sqrt_in():
    """PyTorch's documented Linear bias init: U(-1/sqrt(in), 1/sqrt(in)). With in = 64 the bound is
    1/8 (1/in would be 1/64). Over 20,000 biases the largest |b| falls short of 0.99 of the bound
    on each side with probability 0.995**20000 < 1e-43: the empirical range pins the bound."""
    mt.manual_seed(0)
    bias = nn.Linear(64, 20000).bias.data.astype(np.float64)
    bound = 1 / 8
    assert bias.max() <= bound and bias.min() >= -bound
    assert bias.max() > 0.99 * bound and bias.min() < -0.99 * bound
    assert abs(bias.std() - bound / np.sqrt(3)) < 0.02 * bound  # uniform, not clustered at the ends


def test_embedding_padding_row_gets_no_gradient_even_with_an_upstream_gradient_there():
    """padding_idx's row gets no gradient (torch's padding_idx), whatever the upstream gradient at
    the positions that read it. The upstream is integer-valued, so every row's sum is exact and
    the float64 truth (np.add.at) is compared bit for bit."""
    layer = nn.Embedding(6, 3, padding_idx=2, dtype=np.float64)
    index = np.array([[0, 2, 2, 5], [2, 1, 0, 2]])
    upstream = np.arange(1.0, 25.0).reshape(2, 4, 3)  # non-zero at every position, the padding ones too
    y = layer(index)
    np.testing.assert_array_equal(y.data[index == 2], 0.0)  # the padding row is zero, and read as it is
    (y * mt.tensor(upstream)).sum().backward()
    expected = np.zeros((6, 3))
    np.add.at(expected, index, upstream)
    expected[2] = 0.0
    np.testing.assert_array_equal(layer.weight.grad, expected)


DROPOUT_P = 0.25  # not 0.5: keeping with probability p and with 1 - p must differ


def test_dropout_keeps_one_minus_p_and_scales_the_kept_by_one_over_one_minus_p():
    """Inverted dropout: each element kept with probability 1 - p and scaled by 1 / (1 - p), so the
    expected output is the input. n = 10^6 elements: by Hoeffding, the kept fraction is farther
    than 0.005 from 1 - p with probability at most 2 exp(-2 n 0.005^2) = 2 e^-50 < 1e-21, and the
    seed makes it the same draw every run. The kept values are checked exactly: x * float32(4/3)
    rounded once to float32 (the float64 product of two float32 numbers is exact)."""
    x = mt.tensor(np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32) + 3, requires_grad=True)
    layer = nn.Dropout(DROPOUT_P)
    mt.manual_seed(5)
    y = layer(x)
    assert y.dtype == np.float32
    kept = y.data != 0
    assert abs(kept.mean() - (1 - DROPOUT_P)) < 0.005
    scale = np.float32(1 / (1 - DROPOUT_P))
    exact = (x.data[kept].astype(np.float64) * np.float64(scale)).astype(np.float32)
    np.testing.assert_array_equal(y.data[kept], exact)
    assert abs(y.data.astype(np.float64).mean() / x.data.astype(np.float64).mean() - 1) < 0.01  # E[y] = x
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, np.where(kept, scale, np.float32(0)))
    layer.eval()
    assert layer(x) is x


def test_parameter_from_an_array_or_a_tensor():
    array = np.ones((2, 2), dtype=np.float64)
    assert nn.Parameter(array).dtype == np.float64 and nn.Parameter(array).requires_grad
    t = mt.zeros(3)
    p = nn.Parameter(t)
    assert p.data is t.data


def test_save_and_load_round_trip_bit_for_bit(tmp_path):
    model, other = Tiny(), Tiny()
    path = tmp_path / "tiny.npz"
    model.save(path)
    other.load(path)
    for (name, a), (_, b) in zip(model.state_dict().items(), other.state_dict().items()):
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]  # no temporary left behind


def test_load_with_bad_keys_changes_nothing_and_names_them():
    model = Tiny()
    before = model.state_dict()
    state = dict(before)
    del state["body.0.bias"]
    state["extra.weight"] = np.zeros(3)
    state["body.2.weight"] = np.zeros((5, 5), dtype=np.float32)
    with pytest.raises(RuntimeError) as info:
        model.load_state_dict(state)
    message = str(info.value)
    assert "missing keys: body.0.bias" in message
    assert "unexpected keys: extra.weight" in message
    assert "body.2.weight: checkpoint (5, 5), model (4, 8)" in message
    for name, value in model.state_dict().items():
        assert np.array_equal(value, before[name]), name


def test_an_interrupted_save_leaves_the_old_checkpoint(tmp_path, monkeypatch):
    model = Tiny()
    path = tmp_path / "model.npz"
    model.save(path)
    original = path.read_bytes()

    def exploding_savez(file, **arrays):
        file.write(b"half a checkpoint")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", exploding_savez)
    with pytest.raises(KeyboardInterrupt):
        Tiny().save(path)
    assert path.read_bytes() == original
    assert sorted(os.listdir(tmp_path)) == ["model.npz"]


def test_a_pickled_npz_is_refused(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, **{"embed.weight": np.array([{"not": "an array"}], dtype=object)})
    with pytest.raises(ValueError, match="allow_pickle"):
        Tiny().load(path)


def test_module_repr():
    text = repr(Tiny())
    assert "(body): Sequential(" in text and "(0): Linear(4, 8, bias=True)" in text
