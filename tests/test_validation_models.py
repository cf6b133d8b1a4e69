"""Models refuse bad sizes and inputs with their own errors, and a refused call leaves a
KV cache as it was (issue 15, sections 5 and 6)."""

import numpy as np
import pytest

import minitensor as mt
from models.attention import KVCache, LatentCache, MultiHeadAttention, MultiHeadLatentAttention, causal_mask
from models.transformer import GPT, EncoderDecoder


@pytest.fixture
def float64():
    mt.set_default_dtype(np.float64)
    yield
    mt.set_default_dtype(np.float32)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: MultiHeadAttention(8, 0), r"MultiHeadAttention: heads must be a positive integer, got heads=0"),
        (lambda: MultiHeadAttention(8, -2), r"heads must be a positive integer, got heads=-2"),
        (lambda: MultiHeadAttention(0, 2), r"d must be a positive integer, got d=0"),
        (lambda: MultiHeadAttention(8.0, 2), r"d must be a positive integer, got d=8.0"),
        (lambda: MultiHeadAttention(8, 4, kv_heads=0), r"kv_heads must be a positive integer, got kv_heads=0"),
        (lambda: MultiHeadAttention(8, 3), r"d = 8 is not divisible by heads = 3"),
        (lambda: MultiHeadAttention(8, 4, kv_heads=3), r"heads = 4 is not a multiple of kv_heads = 3"),
        (lambda: MultiHeadLatentAttention(8, 0, 4), r"MultiHeadLatentAttention: heads must be a positive integer"),
        (
            lambda: MultiHeadLatentAttention(8, 2, 0),
            r"MultiHeadLatentAttention: d_latent must be a positive integer, got d_latent=0",
        ),
    ],
)
def test_attention_sizes_are_checked_with_a_clear_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_numpy_integer_size_is_accepted():
    assert MultiHeadAttention(np.int64(8), np.int64(2)).d_head == 4


def fill_cache(module, x, cache):
    module(x[:, :3], is_causal=True, cache=cache)
    return len(cache)


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_a_bad_mask_with_a_kv_cache_raises_before_the_cache_grows(float64, kv_heads):
    mha = MultiHeadAttention(16, 4, kv_heads=kv_heads)
    x = mt.tensor(np.random.default_rng(0).standard_normal((2, 5, 16)))
    cache = KVCache()
    assert fill_cache(mha, x, cache) == 3
    keys_before = cache.k.data.copy()
    wrong = np.zeros((1, 3), dtype=bool)  # the keys are 3 cached + 1 new = 4
    with pytest.raises(
        ValueError,
        match=r"MultiHeadAttention: a mask of shape \(1, 3\) does not broadcast to the scores' shape \(2, 4, 1, 4\)",
    ):
        mha(x[:, 3:4], mask=wrong, cache=cache)
    assert len(cache) == 3
    np.testing.assert_array_equal(cache.k.data, keys_before)
    # the same cache then carries on exactly as full causal attention
    right = causal_mask(2, 5)[None, None]  # (1, 1, 2, 5): queries 3 and 4 of 5 keys
    out = mha(x[:, 3:5], mask=right, cache=cache)
    np.testing.assert_allclose(out.data, mha(x, is_causal=True).data[:, 3:5], rtol=1e-9, atol=1e-11)


def test_a_bad_mask_with_a_latent_cache_raises_before_the_cache_grows(float64):
    mla = MultiHeadLatentAttention(16, 4, d_latent=6)
    x = mt.tensor(np.random.default_rng(1).standard_normal((2, 5, 16)))
    cache = LatentCache()
    assert fill_cache(mla, x, cache) == 3
    with pytest.raises(
        ValueError,
        match=r"MultiHeadLatentAttention: a mask of shape \(1, 3\) does not broadcast to the scores' shape \(2, 4, 1, "
              r"4\)",
    ):
        mla(x[:, 3:4], mask=np.zeros((1, 3), dtype=bool), cache=cache)
    assert len(cache) == 3


def test_latent_attention_checks_its_input_shape():
    with pytest.raises(ValueError, match=r"MultiHeadLatentAttention\(d=16\): expected input \(batch, T, 16\), got \(5, 16\)"):
        MultiHeadLatentAttention(16, 4, d_latent=6)(mt.zeros(5, 16))


def test_keys_of_another_batch_do_not_continue_a_cache():
    cache = KVCache()
    cache.update(mt.zeros(2, 4, 3, 8), mt.zeros(2, 4, 3, 8))
    with pytest.raises(
        ValueError,
        match=r"KVCache.update: new keys of shape \(1, 4, 1, 8\) do not continue the cached keys of shape \(2, 4, 3, "
              r"8\)",
    ):
        cache.update(mt.zeros(1, 4, 1, 8), mt.zeros(1, 4, 1, 8))
    with pytest.raises(
        ValueError,
        match=r"KVCache.update: keys of shape \(2, 4, 1, 8\) and values of shape \(2, 4, 2, 8\) must have the same "
              r"shape",
    ):
        cache.update(mt.zeros(2, 4, 1, 8), mt.zeros(2, 4, 2, 8))
    assert len(cache) == 3
    latents = LatentCache()
    latents.update(mt.zeros(2, 3, 6))
    with pytest.raises(
        ValueError,
        match=r"LatentCache.update: new latents of shape \(2, 1, 5\) do not continue the cached ones of shape \(2, 3, "
              r"6\)",
    ):
        latents.update(mt.zeros(2, 1, 5))
    assert len(latents) == 3


def small_gpt():
    return GPT(vocab=11, context=8, d=8, heads=2, layers=1)


def test_gpt_given_one_sequence_without_a_batch_axis_says_how_to_add_it():
    model = small_gpt()
    with pytest.raises(
        ValueError,
        match=r"GPT: expected token ids of shape \(batch, T\), got shape \(5,\); for one sequence add a batch axis: "
              r"idx\[None\]",
    ):
        model(np.arange(5))
    with pytest.raises(ValueError, match=r"GPT.generate: expected token ids of shape \(batch, T\), got shape \(3,\)"):
        model.generate(np.arange(3), 2)
    assert model(np.arange(5)[None]).shape == (1, 5, 11)  # the suggested fix works


@pytest.mark.parametrize(
    "idx, error, message",
    [
        (np.zeros((1, 2, 3), dtype=np.int64), ValueError,
         r"GPT: expected token ids of shape \(batch, T\), got shape \(1, 2, 3\)$"),
        (np.zeros((1, 3)), TypeError, r"GPT: token ids must be integers, got dtype float64"),
        (np.int64(4), ValueError, r"got shape \(\)"),
    ],
)
def test_gpt_refuses_token_ids_of_another_shape_or_dtype(idx, error, message):
    with pytest.raises(error, match=message):
        small_gpt()(idx)


def test_encoder_decoder_checks_both_sequences():
    model = EncoderDecoder(source_vocab=7, target_vocab=9, context=6, d=8, heads=2, layers=1)
    with pytest.raises(
        ValueError,
        match=r"EncoderDecoder \(target\): expected token ids of shape \(batch, T\), got shape \(4,\)",
    ):
        model(np.zeros((1, 3), dtype=np.int64), np.zeros(4, dtype=np.int64))
