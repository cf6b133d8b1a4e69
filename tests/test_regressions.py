"""Tests for bugs the rest of the suite let through: each one-line bug below was introduced
on purpose and survived every other test (issue 13, §5). Each test here fails on its bug.

- clip_grad_norm_ that scales gradients up when their norm is below max_norm;
- rope that ignores offset= (what a KV cache needs);
- GPT.generate(top_k=k) that keeps k - 1 tokens (or k + 1);
- a reduction's backward that forgets to put the reduced axes back: it goes unnoticed
  whenever the shortened gradient still broadcasts against the input, e.g. a middle axis
  of a (3, 3, 3) array."""

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor import optim
from minitensor.testing import assert_matches_torch
from models.attention import KVCache, scaled_dot_product_attention
from models.positional import rope
from models.transformer import GPT
from test_ops import REDUCTIONS


@pytest.fixture
def float64():
    mt.set_default_dtype(np.float64)
    yield
    mt.set_default_dtype(np.float32)


# ---------------------------------------------------------------------------
# clip_grad_norm_ against torch.nn.utils.clip_grad_norm_
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("max_norm, gradient_scale", [(100.0, 1.0), (0.5, 1.0), (1.0, 0.0)],
                         ids=["below the threshold", "above the threshold", "zero gradients"])
def test_clip_grad_norm_matches_torch(max_norm, gradient_scale):
    rng = np.random.default_rng(0)
    grads = [gradient_scale * rng.standard_normal(shape) for shape in [(3, 4), (4,), (2, 2, 2)]]
    ours = [mt.tensor(np.zeros_like(g), requires_grad=True) for g in grads]
    theirs = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for p, t, g in zip(ours, theirs, grads):
        p.grad, t.grad = g.copy(), torch.from_numpy(g.copy())

    our_total = optim.clip_grad_norm_(ours, max_norm)
    their_total = torch.nn.utils.clip_grad_norm_(theirs, max_norm)

    np.testing.assert_allclose(our_total, their_total.item(), rtol=1e-12)
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-12, atol=0)
    if max_norm > our_total:  # below the threshold (zero gradients too) nothing changes
        for p, g in zip(ours, grads):
            np.testing.assert_array_equal(p.grad, g)


# ---------------------------------------------------------------------------
# RoPE's offset: the positions of tokens appended after a cache
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 5])
def test_rope_with_offset_equals_the_tail_of_the_full_sequence(float64, k):
    x = mt.tensor(np.random.default_rng(0).standard_normal((2, 3, 8, 6)))  # (B, H, T, d)
    tail = rope(x[..., k:, :], offset=k)
    np.testing.assert_allclose(tail.data, rope(x).data[..., k:, :], rtol=1e-12, atol=1e-12)


def test_rope_one_token_at_a_time_with_a_cache_equals_the_full_causal_pass(float64):
    """Generation: token t's query and key are rotated to position t (offset=t), its key
    and value appended to the cache, and it attends to every cached token. That must give
    what attention over the whole sequence, causally masked, gives at row t."""
    rng = np.random.default_rng(1)
    q, k, v = (mt.tensor(rng.standard_normal((2, 3, 7, 4))) for _ in range(3))  # (B, H, T, d_head)
    full = scaled_dot_product_attention(rope(q), rope(k), v, is_causal=True)

    cache = KVCache()
    rows = []
    for t in range(q.shape[-2]):
        step = slice(t, t + 1)
        keys, values = cache.update(rope(k[..., step, :], offset=t), v[..., step, :])
        rows.append(scaled_dot_product_attention(rope(q[..., step, :], offset=t), keys, values).data)
    np.testing.assert_allclose(np.concatenate(rows, axis=-2), full.data, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------
# GPT.generate's top-k sampling
# ---------------------------------------------------------------------------


@pytest.fixture
def gpt(float64):
    mt.manual_seed(0)
    return GPT(30, 24, 16, 2, 2)


@pytest.mark.parametrize("use_cache", [True, False])
def test_top_1_sampling_is_greedy(gpt, use_cache):
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    greedy = gpt.generate(prompt, 8, temperature=0, use_cache=use_cache)
    mt.manual_seed(3)
    top_1 = gpt.generate(prompt, 8, temperature=1.0, top_k=1, use_cache=use_cache)
    np.testing.assert_array_equal(top_1, greedy)


@pytest.mark.parametrize("top_k", [2, 3])
def test_top_k_sampling_draws_from_exactly_the_k_largest_logits(gpt, top_k):
    """400 draws of the next token after one prompt, at a temperature that makes the kept
    tokens nearly equally likely: every one of the k largest logits must come up (so none
    is dropped), and nothing else (so none is added)."""
    prompt = np.tile([[1, 2, 3]], (400, 1))
    with mt.no_grad():
        logits = gpt(prompt[:1]).data[0, -1]  # (vocab,)
    top = set(np.argsort(logits)[-top_k:].tolist())
    mt.manual_seed(5)
    drawn = gpt.generate(prompt, 1, temperature=50.0, top_k=top_k)[:, -1]
    assert set(drawn.tolist()) == top


def test_every_token_sampled_with_top_k_is_among_the_k_largest_logits(gpt):
    mt.manual_seed(11)
    tokens = gpt.generate(np.array([[1, 2, 3], [7, 8, 9]]), 10, temperature=2.0, top_k=3)
    with mt.no_grad():
        logits = gpt(tokens[:, :-1]).data  # position t predicts token t + 1
    for row in range(tokens.shape[0]):
        for t in range(3, tokens.shape[1]):
            top = np.argsort(logits[row, t - 1])[-3:]
            assert tokens[row, t] in top, f"row {row}, token {t}: {tokens[row, t]} is not in the top 3 {top}"


# ---------------------------------------------------------------------------
# Every reduction over a middle, a last and a tuple of axes, against PyTorch
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape, axis", [
    ((3, 3, 3), 1),          # a middle axis: the shortened gradient (3, 3) still broadcasts, wrongly
    ((2, 3, 4), 1),
    ((3, 3, 3), -1),         # the last axis
    ((2, 3, 4), 2),
    ((3, 3, 3), (0, 2)),     # a tuple of axes: what is left, (3,), broadcasts to the last axis
    ((2, 3, 4, 3), (1, 3)),
])
@pytest.mark.parametrize("name", ["sum", "mean", "var", "max", "min"])
def test_reduction_examples_match_torch(name, shape, axis, keepdims):
    _, mt_fn, torch_fn = REDUCTIONS[name]
    x = np.random.default_rng(0).standard_normal(shape)  # distinct values: no ties for max and min
    assert_matches_torch(lambda t: mt_fn(t, axis, keepdims), lambda t: torch_fn(t, axis, keepdims), x,
                         rtol=1e-12, atol=1e-12)
