"""Containers, losses and checkpoints: the library's own error, naming what is wrong, raised
before anything changes (issue 15, sections 4 to 6; issue 13, section 4)."""

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor import F, nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(5, 4)
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: nn.Sequential(1, 2), r"Sequential: argument 0 is int 1, not a Module"),
        (lambda: nn.Sequential(nn.ReLU(), mt.zeros(3)), r"Sequential: argument 1 is a Tensor of shape \(3,\), not a"),
        (lambda: nn.ModuleList([nn.ReLU(), "relu"]), r"ModuleList: item 1 is str 'relu', not a Module"),
        (lambda: nn.ModuleList(nn.ReLU()), r"ModuleList: expected an iterable of Modules, got one ReLU; wrap it in a"),
        (lambda: nn.ModuleList().append(3), r"ModuleList.append is int 3, not a Module"),
    ],
)
def test_containers_refuse_what_is_not_a_module(make, message):
    with pytest.raises(TypeError, match=message):
        make()


def test_a_refused_append_leaves_the_list_as_it_was():
    layers = nn.ModuleList([nn.Linear(2, 2)])
    with pytest.raises(TypeError, match="not a Module"):
        layers.append(nn.Parameter(np.ones(2)))
    assert len(layers) == 1 and len(list(layers.parameters())) == 2


def test_sequential_of_modules_still_runs_in_order():
    x = mt.tensor(np.array([[-1.0, 2.0]]))
    model = nn.Sequential(nn.ReLU(), nn.Tanh())
    np.testing.assert_allclose(model(x).data, np.tanh(np.maximum(x.data, 0)))


def test_boolean_cross_entropy_targets_are_refused_naming_the_dtype():
    logits = mt.randn(3, 2, requires_grad=True)
    with pytest.raises(
        TypeError,
        match=r"cross_entropy: targets must be class indices \(integers\) or probabilities \(floats\), got dtype bool",
    ):
        F.cross_entropy(logits, np.array([True, False, True]))


def test_integer_cross_entropy_targets_still_match_torch():
    logits = np.random.default_rng(0).standard_normal((3, 2))
    target = np.array([1, 0, 1])
    ours = F.cross_entropy(mt.tensor(logits), target).item()
    theirs = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(target)).item()
    assert ours == pytest.approx(theirs, rel=1e-12)


# -- load_state_dict ------------------------------------------------------------


def test_load_state_dict_of_a_list_names_the_type():
    with pytest.raises(TypeError, match=r"load_state_dict for Tiny: expected a dict of name -> array .*got list"):
        Tiny().load_state_dict([("embed.weight", np.zeros((5, 4)))])


def test_misshapen_missing_and_unexpected_keys_raise_a_runtime_error_not_a_key_error():
    model = Tiny()
    state = model.state_dict()
    state["body.0.weight"] = np.zeros((3, 3), dtype=np.float32)
    with pytest.raises(
        RuntimeError,
        match=r"nothing was loaded\. misshapen keys: body\.0\.weight: checkpoint \(3, 3\), model \(8, 4\)",
    ) as info:
        model.load_state_dict(state)
    assert not isinstance(info.value, KeyError)  # a KeyError prints its message in quotes
    del state["body.0.weight"]
    with pytest.raises(RuntimeError, match=r"missing keys: body\.0\.weight"):
        model.load_state_dict(state)
    with pytest.raises(RuntimeError, match=r"unexpected keys: extra"):
        model.load_state_dict({**model.state_dict(), "extra": np.zeros(1)})


@pytest.mark.parametrize(
    "bad_value, message",
    [
        (np.full(4, 1 + 2j), r"body\.2\.bias: checkpoint dtype complex128, model float32"),
        (np.array(["a", "b", "c", "d"]), r"body\.2\.bias: checkpoint dtype <U1, model float32"),
    ],
)
def test_one_bad_value_loads_nothing(bad_value, message):
    model = Tiny()
    before = model.state_dict()
    state = {name: value + 1 for name, value in before.items()}  # good values, to be loaded first
    state["body.2.bias"] = bad_value  # the last key: copied after the good ones
    expected = r"nothing was loaded\. values of a dtype the parameter cannot hold: " + message
    with pytest.raises(RuntimeError, match=expected):
        model.load_state_dict(state)
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)


def test_tensors_and_lists_are_loadable_values():
    model, other = Tiny(), Tiny()
    state = {name: (mt.tensor(v) if name.startswith("embed") else v.tolist()) for name, v in model.state_dict().items()}
    other.load_state_dict(state)
    for name, value in other.state_dict().items():
        np.testing.assert_array_equal(value, model.state_dict()[name], err_msg=name)


# -- Module.load ------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"weights: 1 2 3\n", b"", b"\x93NUMPY not an archive"])
def test_loading_a_file_that_is_not_a_checkpoint_says_so_without_mentioning_pickle(tmp_path, content):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(
        ValueError,
        match=r"Module\.load: .*notes\.txt is not a minitensor checkpoint \(an \.npz archive written by Module\.save\)",
    ) as info:
        Tiny().load(path)
    assert "pickle" not in str(info.value)


def test_loading_a_single_npy_array_is_refused_as_not_a_checkpoint(tmp_path):
    path = tmp_path / "weights.npy"
    np.save(path, np.zeros(3))
    with pytest.raises(ValueError, match="is not a minitensor checkpoint"):
        Tiny().load(path)


def test_loading_a_checkpoint_cut_short_says_it_is_incomplete(tmp_path):
    whole, cut = tmp_path / "whole.npz", tmp_path / "cut.npz"
    Tiny().save(whole)
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(ValueError, match=r"Module\.load: .*cut\.npz is a damaged or incomplete \.npz archive"):
        Tiny().load(cut)
