"""The models against their PyTorch counterparts (copied weights, float64, forward and every
gradient), and the seeds' numbers and checks."""

import numpy as np
import pytest
import torch
from torch import nn as tnn

import minitensor as mt
from models.attention import (
    KVCache, LatentCache, MultiHeadAttention, MultiHeadLatentAttention, causal_mask, padding_mask,
    scaled_dot_product_attention,
)
from models.layernorm import LayerNorm, LayerNormFunction, RMSNorm, layer_norm_composed
from models.positional import alibi_bias, alibi_slopes, rope, sinusoidal, t5_bucket
from models.recurrent import GRU, RNN, RecurrentRegressor
from models.training import train
from models.transformer import GPT, Block, Encoder, EncoderDecoder, ReadoutTransformer, SwiGLU
from demos.tasks import adding_problem
from models.vit import PatchEmbedding
from benchmarks.torch_reference import TorchBlock, TorchGPT

TIGHT = dict(rtol=1e-9, atol=1e-11)


@pytest.fixture
def float64():
    mt.set_default_dtype(np.float64)
    yield
    mt.set_default_dtype(np.float32)


def run_both(ours, theirs, x, ours_kwargs=None, theirs_kwargs=None):
    """Forward both on x (float64), backward the same random gradient; compare outputs and input grads."""
    rng = np.random.default_rng(1)
    x_mt = mt.tensor(x, requires_grad=True)
    x_t = torch.tensor(x, requires_grad=True)
    y = ours(x_mt, **(ours_kwargs or {}))
    y_t = theirs(x_t, **(theirs_kwargs or {}))
    y_t = y_t[0] if isinstance(y_t, tuple) else y_t
    np.testing.assert_allclose(y.data, y_t.detach().numpy(), **TIGHT)
    upstream = rng.standard_normal(y.shape)
    y.backward(upstream)
    y_t.backward(torch.from_numpy(upstream))
    np.testing.assert_allclose(x_mt.grad, x_t.grad.numpy(), **TIGHT)


# ---------------------------------------------------------------------------
# Layer norm
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("fused", [True, False])
def test_layer_norm_matches_torch(backend, fused):
    torch_ln = tnn.LayerNorm(6).double()
    with torch.no_grad():
        torch_ln.weight.normal_()
        torch_ln.bias.normal_()
    ours = LayerNorm.from_torch(torch_ln)
    ours.fused = fused
    with mt.use_backend(backend):
        run_both(ours, torch_ln, np.random.default_rng(0).standard_normal((2, 3, 6)))
        np.testing.assert_allclose(ours.weight.grad, torch_ln.weight.grad.numpy(), **TIGHT)
        np.testing.assert_allclose(ours.bias.grad, torch_ln.bias.grad.numpy(), **TIGHT)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("given", ["bias only", "weight only", "neither", "both"])
def test_layer_norm_uses_every_argument_given_as_torch(backend, given):
    """Issue 21, item 4: layer_norm(x, None, bias) dropped the bias (mean 0, bias.grad None)."""
    from models.layernorm import layer_norm

    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((2, 3, 5)), rng.standard_normal(5), 100 + rng.standard_normal(5)]
    use = {"bias only": (False, True), "weight only": (True, False), "neither": (False, False), "both": (True, True)}[given]
    ours = [mt.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    upstream = rng.standard_normal((2, 3, 5))
    with mt.use_backend(backend):
        y = layer_norm(ours[0], *(t if used else None for t, used in zip(ours[1:], use)))
        y.backward(upstream)
    y_t = torch.nn.functional.layer_norm(theirs[0], (5,), *(t if used else None for t, used in zip(theirs[1:], use)))
    y_t.backward(torch.from_numpy(upstream))
    np.testing.assert_allclose(y.data, y_t.detach().numpy(), **TIGHT)
    for mine, reference in zip(ours, theirs):
        assert (mine.grad is None) == (reference.grad is None)
        if mine.grad is not None:
            np.testing.assert_allclose(mine.grad, reference.grad.numpy(), **TIGHT)


def test_layer_norm_without_gain_and_rmsnorm_match_torch():
    run_both(LayerNorm(5, affine=False), tnn.LayerNorm(5, elementwise_affine=False).double(), np.random.randn(3, 5))
    torch_rms = tnn.RMSNorm(5, eps=1e-6).double()
    ours = RMSNorm(5)
    ours.weight.data = np.linspace(0.5, 1.5, 5)
    with torch.no_grad():
        torch_rms.weight.copy_(torch.linspace(0.5, 1.5, 5, dtype=torch.float64))
    run_both(ours, torch_rms, np.random.randn(3, 5))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_hand_derived_layer_norm_backward_passes_gradcheck(backend):
    x, w, b = (mt.tensor(np.random.default_rng(i).standard_normal(s), requires_grad=True) for i, s in enumerate([(3, 7), (7,), (7,)]))
    with mt.use_backend(backend):
        assert mt.gradcheck(lambda x, w, b: LayerNormFunction.apply(x, w, b, eps=1e-5), x, w, b)
        assert mt.gradcheck(lambda x: LayerNormFunction.apply(x, eps=1e-5), x)


def test_fused_and_composed_layer_norm_agree(float64):
    x = mt.tensor(np.random.randn(4, 9), requires_grad=True)
    ln = LayerNorm(9)
    np.testing.assert_allclose(ln(x).data, layer_norm_composed(x, ln.weight, ln.bias).data, **TIGHT)


def test_layer_norm_is_not_the_annotated_transformers_variant():
    x = np.array([[1.0, 2.0, 4.0, 8.0]])
    ours = LayerNorm(4, affine=False)(mt.tensor(x)).data
    unbiased_std_outside = (x - x.mean()) / (x.std(ddof=1) + 1e-5)
    assert not np.allclose(ours, unbiased_std_outside, atol=1e-3)


# ---------------------------------------------------------------------------
# Multi-head attention
# ---------------------------------------------------------------------------


def torch_mha(d=16, heads=4, seed=0):
    torch.manual_seed(seed)
    return tnn.MultiheadAttention(d, heads, batch_first=True).double()


def compare_mha_gradients(ours, theirs):
    w_q, w_k, w_v = theirs.in_proj_weight.grad.numpy().reshape(3, ours.d, ours.d)
    b_q, b_k, b_v = theirs.in_proj_bias.grad.numpy().reshape(3, ours.d)
    for layer, w, b in ((ours.w_q, w_q, b_q), (ours.w_k, w_k, b_k), (ours.w_v, w_v, b_v)):
        np.testing.assert_allclose(layer.weight.grad, w, **TIGHT)
        np.testing.assert_allclose(layer.bias.grad, b, **TIGHT)
    np.testing.assert_allclose(ours.w_o.weight.grad, theirs.out_proj.weight.grad.numpy(), **TIGHT)
    np.testing.assert_allclose(ours.w_o.bias.grad, theirs.out_proj.bias.grad.numpy(), **TIGHT)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("kind", ["none", "causal", "padding"])
def test_multihead_attention_matches_torch(backend, kind):
    theirs = torch_mha()
    ours = MultiHeadAttention.from_torch(theirs)
    x = np.random.default_rng(0).standard_normal((2, 5, 16))
    ours_kwargs, theirs_kwargs = {}, {"need_weights": False}
    if kind == "causal":
        ours_kwargs["mask"] = causal_mask(5)
        theirs_kwargs["attn_mask"] = torch.from_numpy(causal_mask(5))
    elif kind == "padding":
        ours_kwargs["mask"] = padding_mask([5, 3], 5)
        theirs_kwargs["key_padding_mask"] = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    with mt.use_backend(backend):
        run_both(
            lambda x, **k: ours(x, **k),
            lambda x, **k: theirs(x, x, x, **k),
            x,
            ours_kwargs=ours_kwargs,
            theirs_kwargs=theirs_kwargs,
        )
    compare_mha_gradients(ours, theirs)


def test_the_seeds_three_checks_and_parameter_count():
    ours = MultiHeadAttention.from_torch(torch_mha())
    x = np.random.default_rng(0).standard_normal((2, 5, 16))
    y = ours(mt.tensor(x)).data
    perm = np.random.default_rng(1).permutation(5)
    np.testing.assert_allclose(ours(mt.tensor(x[:, perm])).data, y[:, perm], atol=1e-12)  # permutation equivariance
    x2 = x.copy()
    x2[:, 3:] = np.random.default_rng(2).standard_normal((2, 2, 16))
    causal = causal_mask(5)
    np.testing.assert_allclose(ours(mt.tensor(x), mask=causal).data[:, :3], ours(mt.tensor(x2), mask=causal).data[:, :3], atol=1e-12)
    assert MultiHeadAttention(16, 4).num_parameters() == 1088  # the seed's count


def test_need_weights_path_equals_the_fused_path(float64):
    mha = MultiHeadAttention(16, 4)
    x = mt.tensor(np.random.randn(2, 6, 16))
    mask = padding_mask([6, 4], 6)
    fused = mha(x, mask=mask, is_causal=True)
    out, weights = mha(x, mask=mask, is_causal=True, need_weights=True)
    np.testing.assert_allclose(fused.data, out.data, **TIGHT)
    assert weights.shape == (2, 4, 6, 6)
    np.testing.assert_allclose(weights.data.sum(axis=-1), 1.0, **TIGHT)
    assert np.all(weights.data[1, :, :, 4:] == 0) and np.all(np.triu(weights.data[0, 0], 1) == 0)


def test_a_fully_masked_row_gives_zeros_not_nan(float64):
    q = k = v = mt.tensor(np.random.randn(1, 3, 4), requires_grad=True)
    mask = np.zeros((3, 3), dtype=bool)
    mask[1] = True
    for weights_too in (False, True):
        result = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=weights_too)
        out = result[0] if weights_too else result
        assert np.all(out.data[0, 1] == 0) and not np.isnan(out.data).any()
        out.sum().backward()
        assert not np.isnan(q.grad).any()
        q.grad = None


def test_a_mask_of_the_wrong_shape_names_both_shapes():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"a mask of shape \(4, 4\) does not broadcast to the scores' shape \(1, 2, 3, 3\)"):
        mha(mt.randn(1, 3, 8), mask=np.zeros((4, 4), dtype=bool))


def test_grouped_query_attention_equals_full_heads_with_shared_keys(float64):
    gqa = MultiHeadAttention(16, 4, kv_heads=2)
    full = MultiHeadAttention(16, 4)
    full.w_q, full.w_o = gqa.w_q, gqa.w_o
    dh = 4
    for name in ("w_k", "w_v"):  # each key/value head serves 2 query heads: repeat its rows
        w = getattr(gqa, name).weight.data.reshape(2, dh, 16)
        b = getattr(gqa, name).bias.data.reshape(2, dh)
        getattr(full, name).weight.data = np.repeat(w, 2, axis=0).reshape(16, 16)
        getattr(full, name).bias.data = np.repeat(b, 2, axis=0).reshape(16)
    x = mt.tensor(np.random.randn(2, 5, 16))
    np.testing.assert_allclose(gqa(x, is_causal=True).data, full(x, is_causal=True).data, **TIGHT)
    assert gqa.num_parameters() == 2 * (16 * 16 + 16) + 2 * (16 * 8 + 8)
    assert MultiHeadAttention(16, 4, kv_heads=1).w_k.weight.shape == (4, 16)  # multi-query: one K/V head


def test_llama2_70b_kv_cache_numbers():
    assert KVCache.bytes_per_token(layers=80, kv_width=8192) == 2_621_440  # the seed's 2.6 MB per token
    assert KVCache.bytes_per_token(layers=80, kv_width=8 * 128) == 327_680  # 8 KV heads of 128: 8x less


def test_cross_attention_matches_torch():
    theirs = torch_mha()
    ours = MultiHeadAttention.from_torch(theirs)
    x = np.random.default_rng(0).standard_normal((2, 3, 16))
    memory = np.random.default_rng(1).standard_normal((2, 7, 16))
    y = ours(mt.tensor(x), context=mt.tensor(memory))
    m = torch.from_numpy(memory)
    y_t = theirs(torch.from_numpy(x), m, m, need_weights=False)[0]
    np.testing.assert_allclose(y.data, y_t.detach().numpy(), **TIGHT)


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_kv_cache_gives_the_same_outputs_as_full_causal_attention(float64, kv_heads):
    mha = MultiHeadAttention(16, 4, kv_heads=kv_heads)
    x = mt.tensor(np.random.randn(2, 6, 16))
    full = mha(x, is_causal=True).data
    cache = KVCache()
    first = mha(x[:, :3], is_causal=True, cache=cache).data  # the prompt
    steps = [mha(x[:, t : t + 1], is_causal=True, cache=cache).data for t in range(3, 6)]  # one token at a time
    np.testing.assert_allclose(np.concatenate([first] + steps, axis=1), full, **TIGHT)
    assert len(cache) == 6 and cache.nbytes == 2 * 2 * kv_heads * 6 * 4 * 8


def test_latent_attention_caches_only_the_latent(float64):
    mla = MultiHeadLatentAttention(16, 4, d_latent=6)
    x = mt.tensor(np.random.randn(2, 5, 16))
    full = mla(x, is_causal=True).data
    cache = LatentCache()
    parts = [mla(x[:, :2], is_causal=True, cache=cache).data] + [mla(x[:, t : t + 1], is_causal=True, cache=cache).data for t in range(2, 5)]
    np.testing.assert_allclose(np.concatenate(parts, axis=1), full, **TIGHT)
    assert cache.nbytes == 2 * 5 * 6 * 8  # 6 numbers per token, not 2 x 16


# ---------------------------------------------------------------------------
# Positions
# ---------------------------------------------------------------------------


def test_sinusoidal_table():
    table = sinusoidal(128, 64).data.astype(np.float64)
    t, j = 7, 5
    np.testing.assert_allclose(table[t, 2 * j], np.sin(t / 10000 ** (2 * j / 64)), rtol=1e-6)
    np.testing.assert_allclose(table[t, 2 * j + 1], np.cos(t / 10000 ** (2 * j / 64)), rtol=1e-6)


def test_rope_the_seeds_three_checks():
    d, T = 64, 50
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal(d), rng.standard_normal(d)
    Q = rope(mt.tensor(np.tile(q, (T, 1)))).data
    K = rope(mt.tensor(np.tile(k, (T, 1)))).data
    S = Q @ K.T
    for offset in range(1 - T, T):
        diagonal = np.diagonal(S, offset)
        np.testing.assert_allclose(diagonal, diagonal[0], rtol=1e-9, atol=1e-9)  # depends only on n - m
    np.testing.assert_allclose(np.linalg.norm(Q, axis=1), np.linalg.norm(q), rtol=1e-12)  # norms kept
    assert np.isclose(S[0, 0], q @ k)  # offset 0: unrotated


def test_rope_matches_the_seeds_torch_code_and_has_gradients():
    def rope_torch(x, base=10000.0):
        T, d = x.shape
        omega = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
        angle = torch.arange(T, dtype=x.dtype)[:, None] * omega
        cos, sin = angle.cos(), angle.sin()
        out = torch.empty_like(x)
        out[:, 0::2] = x[:, 0::2] * cos - x[:, 1::2] * sin
        out[:, 1::2] = x[:, 0::2] * sin + x[:, 1::2] * cos
        return out

    run_both(lambda x: rope(x), rope_torch, np.random.default_rng(0).standard_normal((7, 8)))
    x = mt.tensor(np.random.randn(2, 3, 4), requires_grad=True)
    assert mt.gradcheck(lambda x: rope(x, offset=5), x)


def test_alibi_slopes_and_bias():
    np.testing.assert_allclose(alibi_slopes(8), [2.0 ** -(i + 1) for i in range(8)])
    bias = alibi_bias(8, 4)
    assert bias.shape == (8, 4, 4) and bias[0, 3, 0] == -0.5 * 3 and bias[7, 2, 2] == 0
    assert len(alibi_slopes(12)) == 12


def test_t5_buckets():
    offsets = np.array([0, -1, 1, -7, -8, -20, -127, -500, 500])
    buckets = t5_bucket(offsets, bidirectional=True, num_buckets=32, max_distance=128)
    # 16 buckets per direction: 0..7 exact, 8..15 logarithmic up to 128; positive offsets +16
    np.testing.assert_array_equal(buckets[:5], [0, 1, 17, 7, 8])
    assert buckets[5] > 8 and buckets[6] == 15 and buckets[7] == 15 and buckets[8] == 31


# ---------------------------------------------------------------------------
# The block and GPT, against the seed's PyTorch code
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_block_matches_the_seeds_torch_block(backend):
    torch.manual_seed(0)
    theirs = TorchBlock(16, 4).double()
    ours = Block.from_torch(theirs)
    mask = causal_mask(6)
    with mt.use_backend(backend):
        run_both(
            lambda x: ours(x, mask=mask),
            lambda x: theirs(x, torch.from_numpy(mask)),
            np.random.default_rng(0).standard_normal((2, 6, 16)),
        )
    np.testing.assert_allclose(ours.mlp.fc1.weight.grad, theirs.mlp[0].weight.grad.numpy(), **TIGHT)
    np.testing.assert_allclose(ours.ln1.weight.grad, theirs.ln1.weight.grad.numpy(), **TIGHT)
    compare_mha_gradients(ours.attn, theirs.attn)


def load_torch_gpt(ours, theirs):
    state = {}
    for name, value in theirs.state_dict().items():
        array = value.numpy()
        for torch_name, seed_name in ((".self_attn.", ".attn."), (".norm1.", ".ln1."), (".norm2.", ".ln2."),
                                      (".linear1.", ".mlp.0."), (".linear2.", ".mlp.2.")):
            name = name.replace(torch_name, seed_name)  # TorchBlock is PyTorch's encoder layer: the seed's names
        if name.endswith("attn.in_proj_weight"):
            prefix = name[: -len("in_proj_weight")]
            for part, chunk in zip("qkv", np.split(array, 3)):
                state[f"{prefix}w_{part}.weight"] = chunk
        elif name.endswith("attn.in_proj_bias"):
            prefix = name[: -len("in_proj_bias")]
            for part, chunk in zip("qkv", np.split(array, 3)):
                state[f"{prefix}w_{part}.bias"] = chunk
        else:
            name = name.replace("attn.out_proj", "attn.w_o").replace("mlp.0", "mlp.fc1").replace("mlp.2", "mlp.fc2")
            state[name] = array
    ours.load_state_dict(state)


def test_gpt_matches_the_seeds_torch_gpt(float64):
    torch.manual_seed(0)
    theirs = TorchGPT(50, 16, 32, 4, 2).double()
    ours = GPT(50, 16, 32, 4, 2)
    load_torch_gpt(ours, theirs)
    idx = np.random.default_rng(0).integers(0, 50, size=(2, 10))
    logits = ours(idx)
    logits_t = theirs(torch.from_numpy(idx))
    np.testing.assert_allclose(logits.data, logits_t.detach().numpy(), rtol=1e-9, atol=1e-10)
    targets = np.random.default_rng(1).integers(0, 50, size=(2, 10))
    mt.F.cross_entropy(logits.reshape(-1, 50), targets.reshape(-1)).backward()
    torch.nn.functional.cross_entropy(logits_t.reshape(-1, 50), torch.from_numpy(targets).reshape(-1)).backward()
    np.testing.assert_allclose(ours.tok.weight.grad, theirs.tok.weight.grad.numpy(), rtol=1e-8, atol=1e-12)  # tied: both uses
    np.testing.assert_allclose(ours.blocks[1].attn.w_o.weight.grad, theirs.blocks[1].attn.out_proj.weight.grad.numpy(), rtol=1e-8, atol=1e-12)


def test_gpt2_small_has_the_seeds_parameter_count():
    V, C, d, L = 50257, 1024, 768, 12
    model = GPT(V, C, d, heads=12, layers=L)
    n = model.num_parameters()
    assert n == 124_439_808 == L * (12 * d * d + 13 * d) + (V + C + 2) * d
    assert round(L * (12 * d * d + 13 * d) / n, 2) == 0.68
    with mt.no_grad():
        assert model(np.random.default_rng(0).integers(0, V, size=(1, 8))).shape == (1, 8, 50257)


def test_gpt_errors_name_the_number_and_the_limit():
    model = GPT(20, 8, 16, 2, 1)
    with pytest.raises(IndexError, match=r"token index 20 is outside the vocabulary of 20 tokens"):
        model(np.array([[1, 20]]))
    with pytest.raises(ValueError, match=r"a sequence of 9 tokens is longer than the context of 8"):
        model(np.zeros((1, 9), dtype=np.int64))


@pytest.mark.parametrize("temperature, top_k", [(0, None), (0.8, 5)])
def test_generate_with_and_without_the_cache_gives_the_same_tokens(float64, temperature, top_k):
    mt.manual_seed(0)
    model = GPT(30, 24, 16, 2, 2)
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    mt.manual_seed(7)
    cached = model.generate(prompt, 10, temperature=temperature, top_k=top_k, use_cache=True)
    mt.manual_seed(7)
    uncached = model.generate(prompt, 10, temperature=temperature, top_k=top_k, use_cache=False)
    assert cached.shape == (2, 13)
    np.testing.assert_array_equal(cached, uncached)
    np.testing.assert_array_equal(cached[:, :3], prompt)


def test_post_norm_block_and_swiglu_are_differentiable(float64):
    block = Block(8, 2, pre_norm=False, swiglu=True, qk_norm=True)
    x = mt.tensor(np.random.randn(1, 3, 8), requires_grad=True)
    assert mt.gradcheck(lambda x: block(x, is_causal=True), x, leaves="all")  # the input and every weight
    assert SwiGLU(48).w1.weight.shape == (128, 48)  # 8d/3


def test_encoder_is_bidirectional_and_the_decoder_causal(float64):
    enc = Encoder(8, 2, 1)
    x = np.random.randn(1, 4, 8)
    x2 = x.copy()
    x2[:, 3] += np.random.randn(8)  # (not a constant: layer norm would remove it)
    assert not np.allclose(enc(mt.tensor(x)).data[:, 0], enc(mt.tensor(x2)).data[:, 0])  # token 0 sees token 3
    model = EncoderDecoder(10, 12, 8, 8, 2, 1)
    source = np.array([[1, 2, 3, 4]])
    target = np.array([[5, 6, 7]])
    changed = np.array([[5, 6, 9]])
    out, out2 = model(source, target).data, model(source, changed).data
    assert out.shape == (1, 3, 12)
    np.testing.assert_allclose(out[:, :2], out2[:, :2], **TIGHT)  # target positions 0-1 ignore token 2
    assert not np.allclose(out[:, 2], out2[:, 2])


# ---------------------------------------------------------------------------
# Recurrent baselines, ViT patches, the adding problem
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["gru", "rnn"])
def test_recurrent_networks_match_torch(kind):
    torch.manual_seed(0)
    theirs = (tnn.GRU if kind == "gru" else tnn.RNN)(3, 5, batch_first=True).double()
    ours = (GRU if kind == "gru" else RNN).from_torch(theirs)
    run_both(lambda x: ours(x)[0], lambda x: theirs(x)[0], np.random.default_rng(0).standard_normal((2, 4, 3)))
    for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
        np.testing.assert_allclose(getattr(ours, name).grad, getattr(theirs, name).grad.numpy(), **TIGHT)


def test_patch_embedding_equals_a_strided_conv():
    torch.manual_seed(0)
    conv = tnn.Conv2d(3, 8, kernel_size=4, stride=4).double()
    ours = PatchEmbedding.from_torch(conv)
    images = np.random.default_rng(0).standard_normal((2, 3, 8, 12))
    y = ours(mt.tensor(images)).data
    y_t = conv(torch.from_numpy(images)).flatten(2).transpose(1, 2).detach().numpy()  # (B, N, d)
    np.testing.assert_allclose(y, y_t, **TIGHT)
    assert PatchEmbedding(16, 3, 192).num_parameters() == 147_648


def test_adding_problem_parameter_counts():
    assert ReadoutTransformer(2, 64, 4, 1, 100).num_parameters() == 56_897
    assert RecurrentRegressor(2, 64, "gru").num_parameters() == 13_121


def test_adding_problem_transformer_learns_within_a_few_hundred_steps():
    mt.manual_seed(0)
    rng = np.random.default_rng(0)
    model = ReadoutTransformer(2, 64, 4, 1, 100)
    with mt.use_backend("numba"):
        train(model, lambda batch: mt.F.mse_loss(model(mt.tensor(batch[0])), mt.tensor(batch[1])),
              lambda: adding_problem(64, 100, rng), steps=300)
        x, y = adding_problem(500, 100, rng)
        with mt.no_grad():
            error = mt.F.mse_loss(model(mt.tensor(x)), mt.tensor(y)).item()
    assert error < 0.01, f"test MSE {error:.4f} after 300 steps"
