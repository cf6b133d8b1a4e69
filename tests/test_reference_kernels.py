"""The fused ops' own code against the definitions they implement, each under its own name.

test_backends.py holds every accelerator against the ops' own code, so a broken op (a wrong
softmax backward, or tiled attention that mishandles a later tile) fails there as a Numba
failure and blames the wrong kernel. Here the op's code meets the composed definition: the
engine differentiating exp, sum, division and matmul, which no accelerator stands in for. Attention runs over more than one tile of keys (KEY_TILE), where the online
softmax has to rescale what it summed so far."""

import numpy as np
import pytest

import minitensor as mt
import op_code as reference  # the ops' own code on arrays
from minitensor.ops.attention import KEY_TILE
from models.attention import causal_mask


def composed_softmax(x, axis, hidden=None):
    """exp(x - max) / sum exp(x - max) from primitives; hidden entries get weight 0.
    The max is a constant shift (detached): it changes no value and no gradient."""
    shift = x.data.max(axis=axis, keepdims=True)
    e = (x - shift).exp()
    if hidden is not None:
        e = e * mt.tensor((~hidden).astype(x.dtype))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape, axis", [((4, 7), -1), ((3, 5, 4), 1), ((2, 3, 6), 0)])
def test_reference_softmax_backward_is_the_vector_jacobian_product_of_softmax(shape, axis):
    rng = np.random.default_rng(0)
    x_array, dy = rng.standard_normal(shape), rng.standard_normal(shape)
    x = mt.tensor(x_array, requires_grad=True)
    y = composed_softmax(x, axis)
    y.backward(dy)
    np.testing.assert_allclose(reference.softmax(x_array, axis), y.data, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(reference.softmax_backward(y.data, dy, axis), x.grad, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("shape, axis", [((4, 7), -1), ((3, 5, 4), 1)])
def test_reference_log_softmax_backward_is_the_vector_jacobian_product_of_log_softmax(shape, axis):
    rng = np.random.default_rng(1)
    x_array, dy = rng.standard_normal(shape), rng.standard_normal(shape)
    x = mt.tensor(x_array, requires_grad=True)
    y = composed_softmax(x, axis).log()
    y.backward(dy)
    np.testing.assert_allclose(reference.log_softmax(x_array, axis), y.data, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(reference.log_softmax_backward(y.data, dy, axis), x.grad, rtol=1e-10, atol=1e-12)


def materialised_attention(q, k, v, hidden, bias):
    """softmax(q k^T / sqrt(d) + bias) v with every score held at once, from primitives."""
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1]) + bias  # (..., Tq, Tk)
    return composed_softmax(scores, -1, hidden) @ v


TK = 2 * KEY_TILE + 37  # three tiles of keys, the last one partial


@pytest.mark.parametrize("tq, mask_kind, is_causal", [
    (TK, None, True),       # training: every query, causal
    (TK, "bool", False),    # a boolean mask hiding scattered keys in every tile
    (50, "float", False),   # an additive float mask (ALiBi, relative biases)
    (50, "bool", True),     # fewer queries than keys: the last 50 positions, causal
    (1, None, True),        # generating with a cache: one query sees every key
])
def test_reference_tiled_attention_equals_materialised_attention(tq, mask_kind, is_causal):
    rng = np.random.default_rng(2)
    d, dv = 8, 5
    # larger scores in later tiles, so the running max moves and the rescale matters
    q = rng.standard_normal((2, 3, tq, d))
    k = rng.standard_normal((2, 3, TK, d)) * np.linspace(0.5, 2.0, TK)[:, None]
    v = rng.standard_normal((2, 3, TK, dv))
    dout = rng.standard_normal((2, 3, tq, dv))
    hidden = np.zeros((tq, TK), dtype=bool)
    bias = np.zeros((tq, TK))
    mask = None
    if mask_kind == "bool":
        mask = rng.random((tq, TK)) < 0.3
        mask[:, -1] = False  # no row fully hidden: the composed softmax would divide 0 by 0
        hidden |= mask
    elif mask_kind == "float":
        mask = bias = rng.standard_normal((tq, TK))
    if is_causal:
        hidden |= causal_mask(tq, TK)

    qt, kt, vt = (mt.tensor(a, requires_grad=True) for a in (q, k, v))
    expected = materialised_attention(qt, kt, vt, hidden, mt.tensor(bias))
    expected.backward(dout)

    out, stats = reference.attention(q, k, v, mask, None, is_causal)
    np.testing.assert_allclose(out, expected.data, rtol=1e-10, atol=1e-12)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d) + bias
    visible_scores = np.where(hidden, -np.inf, scores)
    row_max_expected = visible_scores.max(axis=-1)
    row_sum_expected = np.exp(visible_scores - row_max_expected[..., None]).sum(axis=-1)
    row_max, row_sum = stats  # each query's max score and sum of exp(score - max), over all tiles
    np.testing.assert_allclose(row_max, row_max_expected, rtol=1e-12)
    np.testing.assert_allclose(row_sum, row_sum_expected, rtol=1e-12)

    grads = reference.attention_backward(q, k, v, out, stats, dout, mask, None, is_causal)
    for name, ours, composed in zip("qkv", grads, (qt.grad, kt.grad, vt.grad)):
        np.testing.assert_allclose(ours, composed, rtol=1e-9, atol=1e-11, err_msg=f"d{name}")
