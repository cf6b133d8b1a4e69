"""The engine: graph shapes, accumulation, retain_graph, hooks, no_grad, in-place
versions, freed graphs, custom Functions, dtypes, and the repr."""

import sys

import numpy as np
import pytest
import torch
from wrong_ops import Cube

import minitensor as mt
from minitensor.autograd import topological_order


def test_readme_example():
    x = mt.tensor(np.random.randn(4, 3), requires_grad=True)
    w = mt.tensor(np.random.randn(3, 2), requires_grad=True)
    loss = (x @ w).relu().sum()
    loss.backward()
    assert x.grad.shape == (4, 3) and isinstance(x.grad, np.ndarray)
    assert w.grad.shape == (3, 2)


def test_diamond_graph_sums_both_paths():
    # y = x * x + x: x reaches the output along three edges
    x = mt.tensor([2.0, -3.0], requires_grad=True)
    a = x * x
    y = (a + x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad, 2 * x.data + 1)


def test_node_used_twice_runs_backward_once():
    calls = []

    class Double(mt.Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x

        @staticmethod
        def backward(ctx, grad):
            calls.append(grad.copy())
            return 2 * grad

    x = mt.tensor([1.0, 2.0], requires_grad=True)
    h = Double.apply(x)
    (h * h + h).sum().backward()
    assert len(calls) == 1  # the two uses of h are summed before h's backward runs
    np.testing.assert_allclose(calls[0], 2 * h.data + 1)
    np.testing.assert_allclose(x.grad, 2 * (2 * h.data + 1))


def test_topological_order_puts_consumers_first():
    x = mt.tensor(1.0, requires_grad=True)
    a = x.exp()
    b = a * 2
    c = a + b  # c needs a after b: b -> a is an edge
    order = [node.name for node in topological_order(c.grad_fn)]
    assert order.index("Add") < order.index("Mul") < order.index("Exp")


def test_a_100000_op_chain_has_no_recursion_error():
    x = mt.tensor(1.0, dtype=np.float64, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    assert sys.getrecursionlimit() < 100_000
    y.backward()
    assert x.grad == 1.0


def test_gradients_accumulate_across_backward_calls():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [6.0, 6.0])
    x.zero_grad()
    assert x.grad is None


def test_leaf_gradients_do_not_share_memory():
    x = mt.tensor([1.0], requires_grad=True)
    y = mt.tensor([1.0], requires_grad=True)
    (x + y).sum().backward()
    x.grad *= 0  # an optimizer updating one leaf's gradient in place
    assert y.grad[0] == 1.0


def test_retain_graph_allows_a_second_backward():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.copy()
    y.backward()
    np.testing.assert_allclose(x.grad, 2 * first)


def test_second_backward_through_a_freed_graph_raises():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=r"backward through the graph a second time.*retain_graph=True"):
        y.backward()


def test_saved_arrays_are_freed_after_backward():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    node = y.grad_fn
    y.sum().backward()
    assert node.freed and node.saved_arrays == () and dict(node.saved) == {}


def test_no_grad_records_nothing_and_enable_grad_reenables():
    x = mt.tensor([1.0], requires_grad=True)
    with mt.no_grad():
        y = x * 2
        with mt.enable_grad():
            z = x * 2
    assert y.grad_fn is None and not y.requires_grad
    assert z.grad_fn is not None

    @mt.no_grad()
    def evaluate(t):
        return t * 2

    assert evaluate(x).grad_fn is None


def test_detach_cuts_the_graph():
    x = mt.tensor([3.0], requires_grad=True)
    y = x * x.detach()  # the detached factor is a constant
    y.backward(np.ones(1))
    np.testing.assert_array_equal(x.grad, [3.0])


def test_hooks_see_and_can_replace_gradients():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    seen = []
    h.register_hook(lambda g: seen.append(g.copy()))
    h.register_hook(lambda g: g * 10)  # replaces the gradient flowing on
    leaf_seen = []
    x.register_hook(lambda g: leaf_seen.append(g.copy()))
    h.sum().backward()
    np.testing.assert_array_equal(seen[0], [1.0, 1.0])
    np.testing.assert_array_equal(leaf_seen[0], [30.0, 30.0])
    np.testing.assert_array_equal(x.grad, [30.0, 30.0])


def test_retain_grad_keeps_a_non_leaf_gradient():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    h.retain_grad()
    k = x * 2
    (h * 3 + k).sum().backward()
    np.testing.assert_array_equal(h.grad, [3.0, 3.0])
    assert k.grad is None  # not retained, as in PyTorch


def test_backward_with_an_explicit_gradient_matches_torch():
    g = np.array([[1.0, -2.0, 0.5]])
    x = mt.tensor([[1.0, 2.0, 3.0]], dtype=np.float64, requires_grad=True)
    (x * x).backward(g)
    tx = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64, requires_grad=True)
    (tx * tx).backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad, tx.grad.numpy())


# ---------------------------------------------------------------------------
# In place
# ---------------------------------------------------------------------------


def test_inplace_ops_bump_the_version():
    x = mt.zeros(3)
    assert x.version == 0
    x += 1
    x -= 0.5
    x *= 4
    x /= 2
    x.masked_fill_(np.array([True, False, False]), 9.0)
    assert x.version == 5
    np.testing.assert_array_equal(x.data, [9.0, 1.0, 1.0])


def test_inplace_change_of_a_saved_output_raises_naming_the_op():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = x.sigmoid()  # Sigmoid saves its output y
    z = y.sum()
    y += 1
    with pytest.raises(RuntimeError) as info:
        z.backward()
    message = str(info.value)
    assert "Sigmoid" in message and "output" in message
    assert "shape (2,)" in message and "version 1" in message and "expected version 0" in message


def test_inplace_change_of_a_saved_input_raises():
    a = mt.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1.0
    c = b * b  # Mul saves b
    with mt.no_grad():
        b *= 3
    with pytest.raises(RuntimeError, match=r"Mul.backward needs its saved input 0 .* version 1; Mul expected version 0"):
        c.sum().backward()


def test_inplace_on_a_non_leaf_is_differentiated_like_torch():
    x = mt.tensor([1.0, 2.0], dtype=np.float64, requires_grad=True)
    y = x * 2
    y += x * x
    y *= 3
    y.sum().backward()
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    ty = tx * 2
    ty += tx * tx
    ty *= 3
    ty.sum().backward()
    np.testing.assert_allclose(y.data, ty.detach().numpy())
    np.testing.assert_allclose(x.grad, tx.grad.numpy())


def test_inplace_on_a_leaf_that_requires_grad_raises():
    w = mt.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\+= on a leaf tensor that requires grad.*no_grad"):
        w += 1
    assert w.data[0] == 1.0 and w.version == 0  # nothing changed
    with mt.no_grad():
        w -= 0.5  # an optimizer step
    assert w.data[0] == 0.5


def test_inplace_that_would_broadcast_self_raises_before_changing():
    x = mt.zeros(3)
    with pytest.raises(ValueError, match=r"shape \(2, 3\).*in place in a tensor of shape \(3,\)"):
        x += np.ones((2, 3))
    np.testing.assert_array_equal(x.data, 0)
    assert x.version == 0


# ---------------------------------------------------------------------------
# Writing your own Function
# ---------------------------------------------------------------------------


class ScaledAdd(mt.Function):
    """y = a + alpha * b (b broadcasts); the engine undoes the broadcasting."""

    @staticmethod
    def forward(ctx, a, b, alpha=1.0):
        ctx.alpha = alpha
        return a + alpha * b

    @staticmethod
    def backward(ctx, grad):
        return grad, ctx.alpha * grad


def test_custom_functions_work_and_pass_gradcheck():
    x = mt.tensor(np.random.randn(3, 4), requires_grad=True)
    b = mt.tensor(np.random.randn(4), requires_grad=True)
    assert mt.gradcheck(lambda x: Cube.apply(x), x)
    assert mt.gradcheck(lambda x, b: ScaledAdd.apply(x, b, alpha=2.5), x, b)
    y = ScaledAdd.apply(x, b, alpha=2.0)
    assert y.grad_fn.name == "ScaledAdd"
    y.sum().backward()
    np.testing.assert_allclose(b.grad, np.full(4, 2.0 * 3))


def test_custom_function_returning_the_wrong_number_of_gradients():
    class Bad(mt.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, grad):
            return grad

    y = Bad.apply(mt.ones(2, requires_grad=True), mt.ones(2, requires_grad=True))
    with pytest.raises(RuntimeError, match=r"Bad.backward returned 1 gradient\(s\) for 2 input\(s\)"):
        y.sum().backward()


def test_apply_rejects_non_tensors_with_a_hint():
    with pytest.raises(TypeError, match=r"Cube.apply: argument 0 is a list, not a Tensor"):
        Cube.apply([1.0, 2.0])


# ---------------------------------------------------------------------------
# dtypes, constructors, repr
# ---------------------------------------------------------------------------


def test_dtype_rules():
    assert mt.tensor(1.5).dtype == np.float32
    assert mt.tensor([1.0, 2.0]).dtype == np.float32
    assert mt.tensor(np.array([1.0, 2.0])).dtype == np.float64  # arrays keep their dtype
    assert mt.tensor(np.float64(1.0)).dtype == np.float64
    assert mt.tensor([1, 2]).dtype == np.int64
    assert mt.tensor([True]).dtype == np.bool_
    assert mt.randn(2, 3).dtype == np.float32
    assert mt.arange(5).dtype == np.int64 and mt.arange(0.0, 1.0, 0.5).dtype == np.float32
    mt.set_default_dtype(np.float64)
    try:
        assert mt.tensor([1.0]).dtype == np.float64 and mt.zeros(2).dtype == np.float64
    finally:
        mt.set_default_dtype(np.float32)


def test_a_gradient_is_cast_to_its_inputs_dtype():
    """float32 x times float64 y makes a float64 product, but x.grad stays float32 (as PyTorch):
    the engine casts each gradient to the dtype of the input it goes to, leaf or not."""
    x = mt.tensor(np.array([1.5, -2.25], dtype=np.float32), requires_grad=True)
    y = mt.tensor(np.array([1 / 3, 0.1]), requires_grad=True)
    a = x * 1.0  # a float32 node between x and the float64 product
    a.retain_grad()
    z = a * y
    assert z.dtype == np.float64
    z.sum().backward()
    assert a.grad.dtype == np.float32 and x.grad.dtype == np.float32 and y.grad.dtype == np.float64
    np.testing.assert_array_equal(x.grad, y.data.astype(np.float32))  # dz/dx = y, rounded once to float32
    np.testing.assert_array_equal(a.grad, y.data.astype(np.float32))
    np.testing.assert_array_equal(y.grad, x.data.astype(np.float64))


def test_constructors_take_separate_ints_or_a_tuple():
    for make in (mt.zeros, mt.ones, mt.randn, mt.rand):
        assert make(2, 3).shape == (2, 3) == make((2, 3)).shape
    assert mt.full((2, 2), 7.0).data.sum() == 28.0
    assert mt.eye(3).data.trace() == 3.0
    x = mt.randn(2, 5)
    assert mt.zeros_like(x).shape == (2, 5) and mt.ones_like(x).data.sum() == 10.0


def test_manual_seed_makes_random_tensors_reproducible():
    mt.manual_seed(123)
    a = mt.randn(4)
    b = mt.rand(4)
    mt.manual_seed(123)
    np.testing.assert_array_equal(a.data, mt.randn(4).data)
    np.testing.assert_array_equal(b.data, mt.rand(4).data)


def test_repr_shows_shape_dtype_op_and_values():
    x = mt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert repr(x) == (
        "tensor([[1., 2.],\n        [3., 4.]], shape=(2, 2), dtype=float32, requires_grad=True)"
    )
    y = (x @ x).sum()
    assert "grad_fn=<Sum>" in repr(y) and "shape=()" in repr(y)
    big = mt.zeros(100, 100)
    assert "..." in repr(big) and len(repr(big)) < 400


def test_item_numpy_and_comparisons():
    x = mt.tensor([1.0, 2.0, 3.0])
    assert (x > 1.5).dtype == np.bool_ and (x > 1.5).data.tolist() == [False, True, True]
    assert x.sum().item() == 6.0
    assert x.numpy() is x.data
    with pytest.raises(ValueError, match=r"only one-element tensors.*shape \(3,\)"):
        x.item()
