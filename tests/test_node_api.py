"""The public, read-only API the tools read nodes and tensors through (issue 33, item 2): what a
node saved, by name; whether backward freed it; a tensor's version and the one way to say that
its memory changed; where a node was made and by which module; and recording costing one call."""

import types

import numpy as np
import pytest

import minitensor as mt
from minitensor import autograd, nn, sites, views
from minitensor.backward_page.collect import forward_values
from models.layernorm import LayerNorm


def _product():
    a = mt.tensor(np.array([[1.0, 2.0]]), requires_grad=True)
    b = mt.tensor(np.array([[3.0], [4.0]]), requires_grad=True)
    return a, b, a @ b


# -- what a node saved ----------------------------------------------------------------------------


def test_saved_is_a_read_only_mapping_of_the_arrays_by_the_names_forward_gives_them():
    a, b, y = _product()
    node = y.grad_fn
    assert isinstance(node.saved, types.MappingProxyType)
    assert list(node.saved) == list(node.saved_names) == ["a", "b"]
    assert node.saved["a"] is a.data and node.saved["b"] is b.data
    assert node.saved_arrays == (a.data, b.data)
    with pytest.raises(TypeError):
        node.saved["a"] = np.zeros(2)


def test_a_keyword_save_is_named_by_its_keyword():
    x = mt.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    node = x.max().grad_fn  # Max saves at_max=... by keyword
    assert set(node.saved) == set(node.saved_names) and len(node.saved) == len(node.saved_arrays) > 0


def test_after_backward_saved_is_empty_and_freed_says_why_and_neither_raises():
    _, _, y = _product()
    node = y.grad_fn
    assert not node.freed
    y.sum().backward()
    assert node.freed and dict(node.saved) == {} and node.saved_arrays == ()
    with pytest.raises(RuntimeError, match="freed"):
        node.saved_tensors  # what backward reads still refuses, naming why


def test_retain_graph_keeps_what_the_tools_see():
    a, _, y = _product()
    y.sum().backward(retain_graph=True)
    assert not y.grad_fn.freed and y.grad_fn.saved["a"] is a.data


def test_saved_and_freed_cannot_be_set():
    _, _, y = _product()
    for name in ("saved", "saved_arrays", "freed"):
        with pytest.raises(AttributeError):
            setattr(y.grad_fn, name, None)


# -- a tensor's version --------------------------------------------------------------------------


def test_version_counts_in_place_changes_and_is_shared_by_views_and_detach():
    x = mt.tensor(np.arange(6.0))
    view, alias = x.reshape(2, 3), x.detach()
    assert x.version == view.version == alias.version == 0
    x += 1
    view *= 2
    assert x.version == view.version == alias.version == 2
    with pytest.raises(AttributeError):
        x.version = 0


def test_increment_version_is_how_code_that_writes_data_says_so():
    w = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = (w * w).sum()
    with mt.no_grad():
        w.data[...] = 0.0  # an optimizer's step, written by hand
    views.increment_version(w)
    assert w.version == 1
    with pytest.raises(RuntimeError, match="version 1; Mul expected version 0"):
        y.backward()


def test_a_parameter_made_from_a_tensor_shares_its_version():
    t = mt.tensor(np.array([1.0, 2.0]))
    p = nn.Parameter(t)
    views.increment_version(t)
    assert p.version == t.version == 1


def test_optimizers_and_init_say_that_they_changed_a_parameter():
    p = nn.Parameter(np.array([1.0, 2.0]))
    p.grad = np.array([0.5, 0.5])
    mt.optim.SGD([p], lr=0.1).step()
    nn.init.zeros_(p)
    assert p.version == 2


# -- where a node was made, by which module, from which inputs ---------------------------------


def test_module_of_is_the_innermost_module_that_made_the_node():
    norm = LayerNorm(4)
    y = norm(mt.randn(2, 4, requires_grad=True))
    assert sites.module_of(y.grad_fn) is norm and sites.module_of(y) is norm
    assert sites.module_text(y.grad_fn) == "norm (LayerNorm)"
    assert sites.module_of((mt.randn(2, requires_grad=True) * 2).grad_fn) is None


def test_saved_sources_say_which_input_or_the_output_each_saved_array_is():
    a, b, y = _product()
    assert [(position, array is (a.data, b.data)[position]) for position, array in views.saved_sources(y.grad_fn)] \
        == [(0, True), (1, True)]
    e = a.exp()
    assert [(position, array is e.data) for position, array in views.saved_sources(e.grad_fn)] == [(None, True)]
    assert forward_values([e.grad_fn])[id(e.grad_fn)] is e.data


# -- recording costs one call --------------------------------------------------------------------


class _Counting:
    """An observer that counts the engine's calls."""

    def __init__(self, watching):
        self.watching, self.sites, self.forwards = watching, 0, []

    def record_site(self):
        self.sites += 1
        return ("site", self.sites)

    def after_forward(self, function, ctx, arrays, options, output):
        self.forwards.append((function.__name__, ctx.site, len(arrays), dict(options), output.shape))


@pytest.fixture
def counting():
    def install(watching):
        observer = _Counting(watching)
        autograd.set_observer(observer)
        return observer

    yield install
    autograd.set_observer(mt.debug.engine_observer)


def test_the_engine_asks_for_a_site_once_per_recorded_op_and_calls_nothing_else_while_no_tool_watches(counting):
    observer = counting(watching=False)
    x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = (x * 2).exp().sum()
    with mt.no_grad():
        x * 3  # no node: no site
    mt.tensor(np.array([1.0])) * 2  # no input needs a gradient: no site
    assert observer.sites == 3 and observer.forwards == []
    assert y.grad_fn.site == ("site", 3)


def test_a_watching_observer_sees_every_forward_with_its_site_already_recorded(counting):
    observer = counting(watching=True)
    x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    x.sum(axis=0)
    with mt.no_grad():
        x * 3
    assert observer.forwards == [("Sum", ("site", 1), 1, {"axis": 0, "keepdims": False}, ()),
                                 ("Mul", None, 2, {}, (2,))]


def test_the_site_recorded_is_the_line_of_your_code():
    x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = x.sigmoid()  # a Tensor method: the site steps out of it to this line
    assert mt.debug.created_at(y).endswith("y = x.sigmoid()  # a Tensor method: the site steps out of it to this line")
