"""The mask rule (ops/masks.py: check_mask) runs once per attention call, whatever the route."""

import sys

import numpy as np
import pytest

import minitensor as mt
from minitensor import F
from minitensor.ops import masks
from models.attention import MultiHeadAttention, MultiHeadLatentAttention, scaled_dot_product_attention


@pytest.fixture
def rule_calls(monkeypatch):
    """A list that gets one entry per call of check_mask, wherever a module imported it from."""
    calls, rule = [], masks.check_mask

    def counted(*args, **kwargs):
        calls.append(args[2] if len(args) > 2 else kwargs.get("op"))
        return rule(*args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "check_mask", None) is rule:
            monkeypatch.setattr(module, "check_mask", counted)
    return calls


def _qkv(B=2, H=2, T=5, d=3):
    generator = np.random.default_rng(0)
    return [mt.tensor(generator.standard_normal((B, H, T, d)), requires_grad=True) for _ in range(3)]


PADDING = np.array([False, False, True, False, True])  # (T,): hides keys 2 and 4 from every query


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("is_causal", [False, True])
def test_multihead_attention_checks_its_mask_once(rule_calls, need_weights, is_causal):
    layer = MultiHeadAttention(8, 2)
    x = mt.tensor(np.random.default_rng(1).standard_normal((2, 5, 8)), requires_grad=True)
    result = layer(x, mask=PADDING, need_weights=need_weights, is_causal=is_causal)
    out = result[0] if need_weights else result
    out.sum().backward()
    assert rule_calls == ["MultiHeadAttention"]


def test_multihead_attention_with_a_cache_checks_its_mask_once(rule_calls):
    from models.attention import KVCache

    layer, cache = MultiHeadAttention(8, 2), KVCache()
    x = mt.tensor(np.random.default_rng(1).standard_normal((2, 5, 8)))
    layer(x, mask=PADDING, cache=cache)
    layer(x[:, :1], mask=np.zeros((1, 6), dtype=bool), cache=cache)
    assert rule_calls == ["MultiHeadAttention", "MultiHeadAttention"]


def test_latent_attention_checks_its_mask_once(rule_calls):
    layer = MultiHeadLatentAttention(8, 2, 4)
    layer(mt.tensor(np.random.default_rng(1).standard_normal((2, 5, 8))), mask=PADDING)
    assert rule_calls == ["MultiHeadLatentAttention"]


@pytest.mark.parametrize("return_weights", [False, True])
@pytest.mark.parametrize("convention", ["mask", "attn_mask"])
def test_models_attention_checks_its_mask_once(rule_calls, return_weights, convention):
    q, k, v = _qkv()
    given = PADDING if convention == "mask" else ~PADDING
    result = scaled_dot_product_attention(q, k, v, is_causal=True, return_weights=return_weights,
                                          **{convention: mt.tensor(given)})
    (result[0] if return_weights else result).sum().backward()
    assert rule_calls == ["scaled_dot_product_attention"]


@pytest.mark.parametrize("convention", ["mask", "attn_mask"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_functional_attention_checks_its_mask_once(rule_calls, convention, is_causal):
    q, k, v = _qkv()
    given = PADDING if convention == "mask" else ~PADDING
    F.scaled_dot_product_attention(q[..., :3, :], k, v, is_causal=is_causal, **{convention: given}).sum().backward()
    assert rule_calls == ["scaled_dot_product_attention"]


def test_a_float_bias_is_checked_once(rule_calls):
    q, k, v = _qkv()
    bias = mt.tensor(np.random.default_rng(2).standard_normal((5, 5)), requires_grad=True)
    F.scaled_dot_product_attention(q, k, v, mask=bias).sum().backward()
    assert rule_calls == ["scaled_dot_product_attention"]
    assert bias.grad is not None


def test_softmax_checks_its_mask_once(rule_calls):
    x = mt.tensor(np.random.default_rng(3).standard_normal((4, 5)), requires_grad=True)
    x.softmax(axis=-1, mask=[PADDING.tolist()]).sum().backward()
    assert rule_calls == ["softmax"]


def test_the_paths_agree_after_the_single_check():
    """One check, the same answer: the fused and the materialised path, both conventions."""
    q, k, v = _qkv()
    fused = scaled_dot_product_attention(q, k, v, mask=PADDING, is_causal=True)
    materialised, _ = scaled_dot_product_attention(q, k, v, attn_mask=~PADDING, is_causal=True, return_weights=True)
    functional = F.scaled_dot_product_attention(q, k, v, mask=mt.tensor(PADDING), is_causal=True)
    np.testing.assert_allclose(fused.data, materialised.data, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fused.data, functional.data, rtol=1e-12, atol=1e-12)
