"""Graded tests that stay out of the student copy (NOT_IN_STUDENT_COPY): their references
would state a task's answer (a mask's offset, a cache's size formula, a kernel's formula), so a
student's own `grade` runs without them, and the teacher's `grade` and the autograder run them
too. They call the student's code the same way as tests/test_homework_tasks.py, through its
probes, on inputs drawn afresh, and their feedback says where an answer differs, never the
reference itself."""

import numpy as np
import pytest
import torch

from _grading import array_of, assert_close, assert_matches, assert_same_mask, attention
from test_homework_tasks import _counts_once_the_work_is_done  # noqa: F401 (a task whose work test failed: not counted)
from test_homework_tasks import work
from test_homework_tasks import probe_causal_mask, probe_demo, probe_summed_axes, probe_tiled_attention

task = pytest.mark.task


def rng():
    return np.random.default_rng()


def _hidden(queries, keys):
    """The causal rule when the queries are the last `queries` of `keys` positions: query i is
    at position keys - queries + i and may not see a key after it."""
    return np.arange(keys)[None, :] > (keys - queries) + np.arange(queries)[:, None]


def _backward_of(side, function, grad, saved, **attributes):
    """`function`'s own backward (no accelerator) on a node holding `saved`, as the engine calls
    it: saved tensors that need not be any forward's (off the forward's image)."""
    mt = side.module("minitensor")
    node = side.module("minitensor.autograd").Context(function, (True,) * 3)
    node.save_for_backward(*saved)
    for name, value in attributes.items():
        setattr(node, name, value)
    with mt.use_backend("numpy"):
        return function.backward(node, grad)


def probe_softmax_kernel(side, y, dy, axis):
    return {"dx": _backward_of(side, side.module("minitensor.ops.softmax").Softmax, dy, (y,), axis=axis, mask=None)}


def probe_layer_norm_kernel(side, dy, x, weight, mean, rstd):
    grads = _backward_of(side, side.module("minitensor.ops.normalization").LayerNormFunction, dy,
                         (x, weight, mean, rstd))
    dx, dweight, dbias = grads if type(grads) in (list, tuple) and len(grads) == 3 else (grads, None, None)
    return {"dx": dx, "dweight": dweight, "dbias": dbias}


def probe_attention_kernel(side, dout, q, k, v, out, row_max, row_sum, scale):
    grads = _backward_of(side, side.module("minitensor.ops.attention").Attention, dout,
                         (q, k, v, out, (row_max, row_sum)), mask=None, scale=scale, is_causal=False)
    dq, dk, dv = grads if type(grads) in (list, tuple) and len(grads) == 3 else (grads, None, None)
    return {"dq": dq, "dk": dk, "dv": dv}


@task("unbroadcast")
def test_summed_axes_names_exactly_the_axes_broadcasting_added_or_stretched(student):
    generator = rng()
    pairs = [((8, 16, 64), (64,)), ((5,), (5,)), ((2, 7), ())]
    for _ in range(6):
        big = tuple(int(n) for n in generator.integers(1, 5, int(generator.integers(1, 5))))
        pairs.append((big, tuple(1 if generator.random() < 0.4 else n for n in big[int(generator.integers(0, len(big))):])))
    got = student.call(probe_summed_axes, pairs)
    assert type(got) is list and len(got) == len(pairs), f"summed_axes: expected one list per pair, got {got!r}"
    for (big, small), axes in zip(pairs, got):
        added = len(big) - len(small)
        expected = list(range(added)) + [added + i for i, n in enumerate(small) if n == 1 and big[added + i] != 1]
        assert sorted(axes) == expected, (
            f"summed_axes({big}, {small}): yours {axes}; " + ("it names an axis it need not" if set(axes) > set(expected)
                                                               else "an axis is missing or wrong"))


@task("softmax_backward")
@work
def test_the_softmax_kernel_is_its_jacobians_product_for_any_rows(student):
    """softmax_backward(y, dy) on rows that are no softmax's output (positive, not summing to 1):
    the product of the Jacobian written in y, which a backward taken from the engine's autograd
    of a composed softmax (rebuilt from log y), finite differences or a complex step through the
    forward do not give. A work test: failing it, the task earns nothing."""
    generator = rng()
    y = generator.uniform(0.1, 2.0, (int(generator.integers(2, 6)), int(generator.integers(2, 9))))
    dy = generator.standard_normal(y.shape)
    axis = int(generator.integers(-2, 2))
    expected = y * (dy - (dy * y).sum(axis=axis, keepdims=True))
    assert_close("softmax_backward(y, dy) on rows that do not sum to 1", student.call(probe_softmax_kernel, y, dy, axis)
                 .get("dx"), expected, 1e-12, 1e-12, whose="the formula's")


@task("layer_norm_backward")
@work
def test_the_layer_norm_kernel_uses_the_statistics_it_is_given(student):
    """layer_norm_backward with a mean and an rstd that are not x's (no eps makes them so): it must
    compute with the statistics forward saved, as a backward taken from a composed layer norm,
    finite differences or a complex step through the forward (which recompute them from x) do not.
    A work test: failing it, the task earns nothing."""
    generator = rng()
    rows, d = (int(n) for n in generator.integers(2, 9, 2))
    x, weight, dy = generator.standard_normal((rows, d)) * 2, generator.standard_normal(d), generator.standard_normal((rows, d))
    mean = x.mean(axis=-1, keepdims=True) + generator.uniform(-1.0, 1.0, (rows, 1))
    rstd = generator.uniform(0.2, 3.0, (rows, 1))
    x_hat, g = (x - mean) * rstd, dy * weight
    expected = {"dx": rstd * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True)),
                "dweight": (dy * x_hat).sum(0), "dbias": dy.sum(0)}
    assert_matches(student.call(probe_layer_norm_kernel, dy, x, weight, mean, rstd), expected, 1e-10, 1e-12,
                   whose="the formula's")


@task("attention_masks")
@pytest.mark.parametrize("case", range(3))
def test_the_causal_mask_of_fewer_queries_than_keys(student, case):
    generator = rng()
    S = int(generator.integers(2, 12))
    T = int(generator.integers(1, S))
    mask = array_of(student.call(probe_causal_mask, T, S), "mask", shape=(T, S), dtype=bool)
    assert_same_mask(f"causal_mask({T}, {S})", mask, _hidden(T, S))


@task("tiled_attention")
def test_tiled_causal_attention_of_fewer_queries_than_keys(student):
    generator = rng()
    keys = int(generator.integers(260, 400))
    queries = int(generator.integers(1, keys))
    q, k, v = generator.standard_normal((2, queries, 4)), generator.standard_normal((2, keys, 4)), generator.standard_normal((2, keys, 3))
    mask = generator.random((queries, keys)) < 0.2
    mask[:, 0] = False  # every query sees a key
    hidden = mask | _hidden(queries, keys)
    answer = student.call(probe_tiled_attention, q, k, v, mask, True)
    assert_close("out", answer.get("out"), attention(q, k, v, hidden)[0], 1e-9, 1e-10)
    scores = (torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) / 2.0).masked_fill(torch.from_numpy(hidden), float("-inf"))
    row_max, row_sum = array_of(answer, "row_max", (2, queries)), array_of(answer, "row_sum", (2, queries))
    assert_close("row_max + log(row_sum)", row_max + np.log(row_sum), torch.logsumexp(scores, dim=-1).numpy(), 1e-9, 1e-10)


@task("demo_kv_cache")
def test_cache_sizes_of_any_model(student):
    generator = rng()
    for _ in range(3):
        layers, groups, d_head = int(generator.integers(1, 100)), int(generator.integers(1, 9)), int(generator.integers(8, 257))
        heads = 8 * groups
        sizes = student.call(probe_demo, "kv_cache", "cache_sizes", layers, heads, d_head)
        per_layer = {f"multi-head ({heads} KV heads)": heads * d_head, "grouped-query (8 KV heads)": 8 * d_head,
                     "multi-query (1 KV head)": d_head}
        expected = {name: 2 * 2 * layers * width for name, width in per_layer.items()}  # a key and a value, 2 bytes
        expected["latent (512 + 64 numbers, MLA)"] = 2 * layers * (512 + 64)
        where = f"cache_sizes({layers}, {heads}, {d_head})"
        assert type(sizes) is dict and list(sizes) == list(expected), f"{where}: expected the keys {list(expected)}"
        wrong = [name for name in expected if sizes[name] != expected[name]]
        assert not wrong, f"{where}: wrong for {', '.join(wrong)} (yours {[sizes[name] for name in wrong]})"


@task("tiled_attention")
@work
def test_the_attention_backward_uses_the_statistics_it_is_given(student):
    """Attention's backward on saved statistics of another input: each row's m and l moved (so its
    weights P' = exp(S - m') / l' are c_i times the true ones) and the saved output P' V to match.
    The formulas (dV = P'^T dout, dS = P' * (dP - D), D_i = dout_i . out_i = sum_j P'_ij dP_ij)
    give one answer from these; finite differences, a complex step or re-running attention on
    q, k and v give the true gradient instead. A work test: failing it, the task earns nothing."""
    generator = rng()
    queries, keys, d = int(generator.integers(2, 9)), int(generator.integers(130, 300)), int(generator.integers(2, 6))
    q, k = generator.standard_normal((2, queries, d)), generator.standard_normal((2, keys, d))
    v, dout = generator.standard_normal((2, keys, 3)), generator.standard_normal((2, queries, 3))
    scale = 1 / np.sqrt(d)
    scores = q @ k.swapaxes(-1, -2) * scale
    row_max = scores.max(axis=-1) + generator.uniform(-2.0, 2.0, (2, queries))
    row_sum = np.exp(scores - row_max[..., None]).sum(axis=-1) * generator.uniform(0.5, 2.0, (2, queries))
    weights = np.exp(scores - row_max[..., None]) / row_sum[..., None]  # rows that do not sum to 1
    out = weights @ v
    dP = dout @ v.swapaxes(-1, -2)
    dS = weights * (dP - (dout * out).sum(axis=-1, keepdims=True))
    expected = {"dq": scale * dS @ k, "dk": scale * dS.swapaxes(-1, -2) @ q, "dv": weights.swapaxes(-1, -2) @ dout}
    answer = student.call(probe_attention_kernel, dout, q, k, v, out, row_max, row_sum, scale)
    assert_matches(answer, expected, 1e-9, 1e-11, whose="the formula's")
