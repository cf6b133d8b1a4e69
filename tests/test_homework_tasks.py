"""The homework's graded tests, one group per task, in the order of minitensor.homework.TASKS.

Each task's tests use only that task and the tasks before it (tests/test_homework.py checks
this by grading copies with only the first k tasks solved). They compare with PyTorch or with
a formula, never with stored outputs, so they do not depend on the order in which a student
creates layers or draws random numbers.
"""

import math
import types

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor import autograd
from minitensor.backends import numpy_backend
from minitensor.testing import assert_matches_torch

task = pytest.mark.task
rng = np.random.default_rng


# 1 -------------------------------------------------------------------------
@task("topological_order")
def test_consumers_come_before_their_inputs():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    a = -x
    b = a + x
    c = b + a  # a is used twice: by b and by c
    order = autograd.topological_order(c.grad_fn)
    position = {node: i for i, node in enumerate(order)}
    assert len(order) == 3
    for node in order:
        for edge in node.edges:
            if isinstance(edge, autograd.Context):
                assert position[node] < position[edge]


@task("topological_order")
def test_a_diamond_and_a_long_chain_backpropagate():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    a = -x
    c = (a + x) + a  # = -x
    c.backward(np.ones(2))
    np.testing.assert_array_equal(x.grad, [-1.0, -1.0])
    y = mt.tensor(1.0, requires_grad=True)
    z = y
    for _ in range(20_000):
        z = z + 1.0
    z.backward()
    assert y.grad == 1.0


# 2 -------------------------------------------------------------------------
@task("elementwise_backward")
@pytest.mark.parametrize("op", ["mul", "div", "exp", "tanh"])
def test_elementwise_backward_matches_torch(op):
    a, b = rng(0).standard_normal((3, 4)), rng(1).uniform(0.5, 2.0, (3, 4))
    functions = {
        "mul": (lambda a, b: a * b, lambda a, b: a * b),
        "div": (lambda a, b: a / b, lambda a, b: a / b),
        "exp": (lambda a, b: a.exp() * 1.0 + b * 0.0, lambda a, b: a.exp() * 1.0 + b * 0.0),
        "tanh": (lambda a, b: a.tanh() + b, lambda a, b: a.tanh() + b),
    }
    ours, theirs = functions[op]
    assert_matches_torch(ours, theirs, a, b, rtol=1e-10, atol=1e-12)


# 3 -------------------------------------------------------------------------
@task("unbroadcast")
def test_summed_axes():
    assert autograd.summed_axes((8, 16, 64), (64,)) == (0, 1)
    assert autograd.summed_axes((2, 3, 4), (3, 1)) == (0, 2)
    assert autograd.summed_axes((5,), (5,)) == ()


@task("unbroadcast")
@pytest.mark.parametrize("shapes", [((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((2, 1, 4), (3, 1)), ((), (2, 2))])
def test_broadcasting_gradients_match_torch(shapes):
    a, b = rng(0).standard_normal(shapes[0]), rng(1).standard_normal(shapes[1])
    assert_matches_torch(lambda a, b: a + b * a, lambda a, b: a + b * a, a, b, rtol=1e-10, atol=1e-12)


# 4 -------------------------------------------------------------------------
@task("matmul_backward")
@pytest.mark.parametrize("shapes", [((3, 4), (4, 2)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4, 3)), ((2, 3, 4), (4,)), ((4,), (4,))])
def test_matmul_backward_matches_torch(shapes):
    a, b = rng(0).standard_normal(shapes[0]), rng(1).standard_normal(shapes[1])
    assert_matches_torch(lambda a, b: a @ b, torch.matmul, a, b, rtol=1e-10, atol=1e-12)


# 5 -------------------------------------------------------------------------
@task("reductions")
@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_reductions_match_torch(axis, keepdims):
    x = rng(0).standard_normal((2, 3, 4))
    dims = tuple(range(3)) if axis is None else axis
    cases = [
        (lambda t: t.sum(axis=axis, keepdims=keepdims), lambda t: t.sum(dim=dims, keepdim=keepdims)),
        (lambda t: t.mean(axis=axis, keepdims=keepdims), lambda t: t.mean(dim=dims, keepdim=keepdims)),
        (lambda t: t.var(axis=axis, keepdims=keepdims), lambda t: t.var(dim=dims, keepdim=keepdims, correction=0)),
        (lambda t: t.max(axis=axis, keepdims=keepdims), lambda t: t.amax(dim=dims, keepdim=keepdims)),
        (lambda t: t.min(axis=axis, keepdims=keepdims), lambda t: t.amin(dim=dims, keepdim=keepdims)),
    ]
    for ours, theirs in cases:
        assert_matches_torch(ours, theirs, x, rtol=1e-10, atol=1e-12)


@task("reductions")
def test_max_shares_the_gradient_between_ties():
    x = mt.tensor([[1.0, 3.0, 3.0]], requires_grad=True)
    x.max(axis=1).backward(np.ones(1))
    np.testing.assert_array_equal(x.grad, [[0.0, 0.5, 0.5]])


# 6 -------------------------------------------------------------------------
class _OffByTenPercent(mt.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2.2 * x


@task("gradcheck_central_difference")
def test_gradcheck_passes_a_right_backward_and_fails_a_wrong_one():
    x = mt.tensor(rng(0).standard_normal((3, 2)), requires_grad=True)
    assert mt.gradcheck(lambda x: (x.exp() * x).sum(axis=0), x)
    with pytest.raises(mt.GradcheckError, match="input 0"):
        mt.gradcheck(lambda x: _OffByTenPercent.apply(x), x)


# 7 -------------------------------------------------------------------------
@task("softmax_backward")
def test_softmax_backward():
    x = rng(0).standard_normal((3, 5))
    with mt.use_backend("numpy"):
        assert mt.gradcheck(lambda t: t.softmax(axis=-1), mt.tensor(x, requires_grad=True))
        assert mt.gradcheck(lambda t: t.softmax(axis=0), mt.tensor(x, requires_grad=True))
        assert_matches_torch(lambda t: t.softmax(axis=-1), lambda t: torch.softmax(t, dim=-1), x, rtol=1e-10, atol=1e-12)


# 8 -------------------------------------------------------------------------
@task("layer_norm_backward")
def test_layer_norm_backward():
    from models.layernorm import LayerNormFunction

    x, w, b = rng(0).standard_normal((4, 6)), rng(1).standard_normal(6), rng(2).standard_normal(6)
    with mt.use_backend("numpy"):
        tensors = [mt.tensor(a, requires_grad=True) for a in (x, w, b)]
        assert mt.gradcheck(lambda x, w, b: LayerNormFunction.apply(x, w, b, eps=1e-5), *tensors)
        assert_matches_torch(
            lambda x, w, b: LayerNormFunction.apply(x, w, b, eps=1e-5),
            lambda x, w, b: torch.nn.functional.layer_norm(x, (6,), w, b, eps=1e-5),
            x, w, b, rtol=1e-9, atol=1e-11,
        )


# 9 -------------------------------------------------------------------------
def _reference_attention(q, k, v, hidden):
    """PyTorch's attention with a boolean mask (True hides a key), as NumPy arrays: (out, weights)."""
    scores = torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) / math.sqrt(q.shape[-1])
    hide = torch.from_numpy(np.broadcast_to(hidden, scores.shape).copy())
    weights = torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)
    return (weights @ torch.from_numpy(v)).numpy(), weights.numpy()


@task("attention_masks")
def test_causal_mask_and_masked_attention():
    from models.attention import causal_mask, scaled_dot_product_attention

    np.testing.assert_array_equal(causal_mask(3), [[False, True, True], [False, False, True], [False, False, False]])
    q, k, v = (rng(i).standard_normal((2, 4, 3)) for i in range(3))
    padding = np.array([False, False, False, True])  # hide key 3 from everyone
    out, weights = scaled_dot_product_attention(mt.tensor(q), mt.tensor(k), mt.tensor(v), mask=padding, is_causal=True, return_weights=True)
    expected_out, expected_weights = _reference_attention(q, k, v, causal_mask(4) | padding)
    np.testing.assert_allclose(weights.data, expected_weights, atol=1e-12)
    np.testing.assert_allclose(out.data, expected_out, atol=1e-12)
    tensors = [mt.tensor(a, requires_grad=True) for a in (q, k, v)]
    with mt.use_backend("numpy"):
        assert mt.gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=True, return_weights=True)[0], *tensors)


# 10 ------------------------------------------------------------------------
@task("multihead_split_merge")
def test_split_and_merge_heads():
    from models.attention import merge_heads, split_heads

    x = mt.tensor(np.arange(2 * 3 * 8, dtype=np.float64).reshape(2, 3, 8))
    heads = split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 2)
    np.testing.assert_array_equal(heads.data[1, 2, 0], x.data[1, 0, 4:6])  # head 2 of token 0 = coordinates 4, 5
    np.testing.assert_array_equal(merge_heads(heads).data, x.data)


@task("multihead_split_merge")
def test_multihead_attention_matches_torch():
    from models.attention import MultiHeadAttention

    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True).double()
    ours = MultiHeadAttention.from_torch(theirs)
    x = rng(0).standard_normal((2, 5, 8))
    assert_matches_torch(
        lambda x: ours(x, need_weights=True)[0],
        lambda x: theirs(x, x, x, need_weights=False)[0],
        x, rtol=1e-9, atol=1e-11,
    )


# 11 ------------------------------------------------------------------------
def _materialised_backend():
    """The reference backend with attention computed the plain way (so that this task's tests
    do not need the tiled kernel, a later task)."""

    def attention(q, k, v, mask=None, scale=None, is_causal=False):
        queries, keys = q.shape[-2], k.shape[-2]
        future = np.triu(np.ones((queries, keys), dtype=bool), k=keys - queries + 1) if is_causal else False
        out, weights = _reference_attention(q, k, v, np.logical_or(future, False if mask is None else mask))
        return out, weights  # the weights stand in for the log-sum-exp

    def attention_backward(q, k, v, out, weights, dout, mask=None, scale=None, is_causal=False):
        scale = 1 / math.sqrt(q.shape[-1])
        dweights = dout @ np.swapaxes(v, -1, -2)
        dscores = numpy_backend.softmax_backward(weights, dweights, -1) * scale  # task softmax_backward
        return dscores @ k, np.swapaxes(dscores, -1, -2) @ q, np.swapaxes(weights, -1, -2) @ dout

    functions = {name: getattr(numpy_backend, name) for name in mt.backends.INTERFACE}
    functions.update(name="materialised", attention=attention, attention_backward=attention_backward)
    return types.SimpleNamespace(**functions)


@task("pre_norm_block")
def test_pre_norm_block_matches_the_seeds_block():
    from models.transformer import Block
    from benchmarks.torch_reference import TorchBlock

    torch.manual_seed(0)
    theirs = TorchBlock(8, 2).double()
    ours = Block.from_torch(theirs)
    with mt.use_backend(_materialised_backend()):
        assert_matches_torch(lambda x: ours(x), lambda x: theirs(x), rng(0).standard_normal((2, 4, 8)), rtol=1e-9, atol=1e-11)


# 12 ------------------------------------------------------------------------
@task("tiled_attention")
@pytest.mark.parametrize("is_causal", [False, True])
def test_tiled_attention_equals_the_definition(is_causal):
    q, k, v = rng(0).standard_normal((2, 200, 4)), rng(1).standard_normal((2, 300, 4)), rng(2).standard_normal((2, 300, 3))
    mask = rng(3).random((200, 300)) < 0.2
    hidden = mask | (np.triu(np.ones((200, 300), dtype=bool), k=101) if is_causal else False)
    out, (row_max, row_sum) = numpy_backend.attention(q, k, v, mask, None, is_causal)  # 300 keys: several tiles
    lse = row_max + np.log(row_sum)
    expected, _ = _reference_attention(q, k, v, hidden)
    np.testing.assert_allclose(out, expected, atol=1e-10)
    scores = np.where(hidden, -np.inf, q @ np.swapaxes(k, -1, -2) / 2.0)
    np.testing.assert_allclose(lse, np.log(np.exp(scores).sum(axis=-1)), atol=1e-10)
    small = [mt.tensor(a[:, :6], requires_grad=True) for a in (q, k, v)]
    with mt.use_backend("numpy"):
        assert mt.gradcheck(lambda q, k, v: mt.F.scaled_dot_product_attention(q, k, v, is_causal=is_causal), *small)


# 13 ------------------------------------------------------------------------
@task("kv_cache")
def test_kv_cache_generation_equals_full_attention():
    from models.attention import KVCache, MultiHeadAttention

    mt.set_default_dtype(np.float64)
    try:
        mha = MultiHeadAttention(8, 2)
    finally:
        mt.set_default_dtype(np.float32)
    x = mt.tensor(rng(0).standard_normal((1, 5, 8)))
    with mt.use_backend("numpy"), mt.no_grad():
        full = mha(x, is_causal=True).data
        cache = KVCache()
        steps = [mha(x[:, t : t + 1], is_causal=True, cache=cache).data for t in range(5)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-12)
    assert len(cache) == 5
