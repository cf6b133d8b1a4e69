"""Masks, scaled dot-product attention, multi-head attention (with grouped and multi-query
heads), the KV cache, and multi-head latent attention.

Shapes are batch first: x is (B, T, d). Masks follow the seeds and
torch.nn.MultiheadAttention: in a boolean mask True marks a hidden position;
a float mask is added to the scores.

Built from minitensor's public names only (mt, F, nn): F.attention_mask reads either mask
convention and checks a mask against the scores' shape, once per call, before a layer changes
anything (what it returns goes down to the ops unchecked), and F.attention_scale is the default
1 / sqrt(d_k). The fused kernel is the
backend's (F.scaled_dot_product_attention); the materialised path below, which also returns
the weights, is the definition it is tested against.
"""

import math

import numpy as np

import minitensor as mt
from minitensor import F
from minitensor.nn import Linear, Module, init


def causal_mask(T, S=None):
    """(T, S) boolean causal mask, True where a query may not see a key (True hides). The T
    queries are the last T of the S positions (S = T in training; T = 1 when generating with
    a KV cache); S defaults to T."""
    # BEGIN SOLUTION attention_masks
    # Query i sits at position i + S - T, so it may not see key j > i + (S - T).
    S = T if S is None else S
    return np.triu(np.ones((T, S), dtype=bool), k=S - T + 1)
    # END SOLUTION


def padding_mask(lengths, T):
    """(B, 1, 1, T) boolean, True at the padded positions j >= lengths[b] of each sequence;
    it broadcasts over heads and queries, hiding the padding from every query."""
    lengths = np.asarray(lengths)
    return (np.arange(T)[None, :] >= lengths[:, None])[:, None, None, :]  # (1, T) >= (B, 1) -> (B, T) -> (B, 1, 1, T)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, *,
                                 mask=None, return_weights=False):
    """softmax(q k^T * scale + mask) v over (..., T, d_k) queries and keys, scale = 1/sqrt(d_k).

    The same function as `F.scaled_dot_product_attention` (same arguments, same mask
    rule: `mask=` True hides, PyTorch's `attn_mask` True takes part), plus `return_weights`,
    but is_causal with fewer queries than keys aligns as a KV cache does: the queries are the
    last Tq of the Tk positions (F's, under PyTorch's name, aligns top-left as PyTorch's).
    Without it this is the backend's fused, tiled kernel (no T x T scores held). With
    return_weights=True the scores are materialised, written out op by op, so the weights
    can be returned: (output, weights). The two paths are tested equal. A mask may be an
    array, nested lists or a Tensor.
    """
    scores_shape = F.attention_scores_shape(q, k, v)  # (..., Tq, Tk), once q, k and v are known to fit
    dtype = np.result_type(q.dtype, k.dtype, v.dtype)  # the scores' dtype
    mask = F.attention_mask(mask, scores_shape, "scaled_dot_product_attention", dtype, attn_mask=attn_mask,
                            dropout_p=dropout_p)  # the one check: an array, or None
    return attend(q, k, v, mask, is_causal, scale, return_weights)


def attend(q, k, v, mask, is_causal=False, scale=None, return_weights=False):
    """scaled_dot_product_attention's work, on a mask that F.attention_mask has checked (True hides,
    or a float in the scores' dtype, or None): the layers below check theirs before a cache grows,
    and pass it here as it is."""
    if not return_weights:
        return mt.ops.Attention.apply(q, k, v, mask=mask, scale=scale, is_causal=is_causal)  # fused, tiled
    # BEGIN SOLUTION attention_masks
    hidden = np.zeros((q.shape[-2], k.shape[-2]), dtype=bool)
    if is_causal:
        hidden = causal_mask(q.shape[-2], k.shape[-2])
    scale = F.attention_scale(q.shape[-1]) if scale is None else scale  # 1 / sqrt(d_k)
    scores = (q * scale) @ k.swapaxes(-1, -2)  # (..., Tq, d_k) @ (..., d_k, Tk) -> (..., Tq, Tk); scaled first,
    # as the fused kernels and PyTorch: in float32, q k^T past 3.4e38 would overflow before the scale
    if mask is not None and mask.dtype == np.bool_:
        hidden = hidden | mask
    elif mask is not None:
        scores = scores + mt.tensor(mask)
    hidden = np.broadcast_to(hidden, scores.shape)  # it fits: built from a checked mask and (Tq, Tk)
    weights = mt.ops.Softmax.apply(scores, axis=-1, mask=hidden)  # hidden -> 0; the op takes a checked mask
    return weights @ v, weights
    # END SOLUTION


def split_heads(x, heads):
    """(B, T, heads * d_head) -> (B, heads, T, d_head): each head's slice of every token,
    as a sequence of its own (the heads become a batch axis)."""
    # BEGIN SOLUTION multihead_split_merge
    B, T, width = x.shape
    return x.reshape(B, T, heads, width // heads).transpose(1, 2)  # (B, T, heads, d_head) -> (B, heads, T, d_head)
    # END SOLUTION


def merge_heads(x):
    """(B, heads, T, d_head) -> (B, T, heads * d_head): concatenate the heads' outputs per token."""
    # BEGIN SOLUTION multihead_split_merge
    B, heads, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, heads * d_head)  # (B, T, heads, d_head) -> (B, T, heads * d_head)
    # END SOLUTION


class KVCache:
    """The keys and values of the tokens seen so far, for one attention layer.

    When generating, each new token's key and value are appended, so a token's
    attention costs one query against the cache instead of recomputing every key.
    """

    def __init__(self):
        self.k = self.v = None

    def update(self, k, v):
        """Append (B, H_kv, t, d_head) keys and values; return everything cached so far."""
        _check_continues(k, v, self.k, "KVCache.update")
        # BEGIN SOLUTION kv_cache
        if self.k is None:
            self.k, self.v = k.detach(), v.detach()
        else:
            self.k = mt.cat([self.k, k.detach()], axis=-2)  # (B, H_kv, s, d_head) + (B, H_kv, t, d_head) -> s + t
            self.v = mt.cat([self.v, v.detach()], axis=-2)  # the same for the values
        return self.k, self.v
        # END SOLUTION

    def __len__(self):
        return 0 if self.k is None else self.k.shape[-2]

    @property
    def nbytes(self):
        """Bytes the cache holds now."""
        return 0 if self.k is None else self.k.data.nbytes + self.v.data.nbytes

    @staticmethod
    def bytes_per_token(layers, kv_width, bytes_per_number=2):
        """Bytes the cache holds per token, for `layers` layers whose keys and values are each
        `kv_width` numbers wide (the seed: 80 layers of width 8,192 in 16-bit numbers, 2.6 MB)."""
        # BEGIN SOLUTION demo_kv_cache
        return 2 * layers * kv_width * bytes_per_number  # a key and a value per layer
        # END SOLUTION


def _check_continues(k, v, cached, who):
    """New keys and values must have the same shape as each other and match the cache on
    every axis but the token axis (-2); checked before anything is appended."""
    if k.shape != v.shape:
        raise ValueError(f"{who}: keys of shape {k.shape} and values of shape {v.shape} must have the same shape")
    if cached is not None and (k.shape[:-2] != cached.shape[:-2] or k.shape[-1] != cached.shape[-1]):
        raise ValueError(
            f"{who}: new keys of shape {k.shape} do not continue the cached keys of shape {cached.shape} "
            f"(all axes but the token axis -2 must match); use a new cache for another batch or model"
        )


def _check_sizes(who, **sizes):
    """Head counts and widths are positive integers."""
    for name, value in sizes.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{who}: {name} must be a positive integer, got {name}={value!r}")


class MultiHeadAttention(Module):
    """MultiHeadAttention(d, heads, kv_heads=None, bias=True): nn.MultiheadAttention's
    math, batch first, with grouped-query (kv_heads < heads) and multi-query (kv_heads = 1)
    attention, cross-attention (context=), a KV cache and an optional QK-norm.
    """

    # BEGIN SOLUTION demo_multihead
    # Parameters: 4 d^2 + 4 d with full heads (1,088 for d = 16).
    # END SOLUTION

    def __init__(self, d, heads, kv_heads=None, bias=True, qk_norm=False):
        super().__init__()
        kv_heads = heads if kv_heads is None else kv_heads
        _check_sizes("MultiHeadAttention", d=d, heads=heads, kv_heads=kv_heads)
        if d % heads:
            raise ValueError(f"MultiHeadAttention: d = {d} is not divisible by heads = {heads}")
        if heads % kv_heads:
            raise ValueError(f"MultiHeadAttention: heads = {heads} is not a multiple of kv_heads = {kv_heads}")
        self.d, self.heads, self.kv_heads, self.d_head = d, heads, kv_heads, d // heads
        self.w_q = Linear(d, d, bias=bias)
        self.w_k = Linear(d, kv_heads * self.d_head, bias=bias)
        self.w_v = Linear(d, kv_heads * self.d_head, bias=bias)
        self.w_o = Linear(d, d, bias=bias)
        self._init_like_torch()
        self.qk_norm = qk_norm
        if qk_norm:
            from .layernorm import LayerNorm

            self.q_norm, self.k_norm = LayerNorm(self.d_head), LayerNorm(self.d_head)

    def _init_like_torch(self):
        """nn.MultiheadAttention's initialisation: Xavier-uniform on the stacked (3d, d) input
        projection, zero biases; the output projection keeps Linear's default weight."""
        bound = math.sqrt(6.0 / (self.d + 3 * self.d))
        for layer in (self.w_q, self.w_k, self.w_v):
            init.uniform_(layer.weight, -bound, bound)
        for layer in (self.w_q, self.w_k, self.w_v, self.w_o):
            if layer.bias is not None:
                init.zeros_(layer.bias)

    def forward(self, x, mask=None, context=None, cache=None, need_weights=False, is_causal=False):
        """x (B, T, d) -> (B, T, d); with need_weights, also the (B, heads, T, S) weights."""
        if x.ndim != 3 or x.shape[-1] != self.d:
            raise ValueError(f"MultiHeadAttention(d={self.d}): expected input (batch, T, {self.d}), got {x.shape}")
        B, T, _ = x.shape
        source = x if context is None else context  # cross-attention: keys and values from context
        S = source.shape[1] + (0 if cache is None else len(cache))  # keys seen: the cached ones, then these
        H, G, dh = self.heads, self.heads // self.kv_heads, self.d_head
        # Checked before the cache grows (a failed call must leave it as it was), against the
        # (B, H, T, S) scores the caller has in mind, so that an error names those shapes.
        mask = F.attention_mask(mask, (B, H, T, S), "MultiHeadAttention", x.dtype)

        q = split_heads(self.w_q(x), H)  # (B, H, T, dh)
        k = split_heads(self.w_k(source), self.kv_heads)  # (B, Hkv, S_new, dh)
        v = split_heads(self.w_v(source), self.kv_heads)  # (B, Hkv, S_new, dh)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, Hkv, S, dh)
        # Grouped heads: G query heads share one key/value head. Give the queries a group
        # axis, (B, Hkv, G, T, dh), and the keys a size-1 one, (B, Hkv, 1, S, dh): they broadcast.
        # A per-head or per-batch mask has its heads split the same way.
        q = q.reshape(B, self.kv_heads, G, T, dh)  # (B, H, T, dh) -> (B, Hkv, G, T, dh)
        k, v = k.unsqueeze(2), v.unsqueeze(2)  # (B, Hkv, S, dh) -> (B, Hkv, 1, S, dh)
        if mask is not None and mask.ndim >= 3:
            mask = np.broadcast_to(mask, (B, H, T, S)).reshape(B, self.kv_heads, G, T, S)  # -> (B, Hkv, G, T, S)
        result = attend(q, k, v, mask, is_causal=is_causal, return_weights=need_weights)  # the mask: checked above
        out, weights = result if need_weights else (result, None)
        out = merge_heads(out.reshape(B, H, T, dh))  # (B, Hkv, G, T, dh) -> (B, H, T, dh) -> (B, T, d)
        out = self.w_o(out)
        if need_weights:
            return out, weights.reshape(B, H, T, S)  # (B, Hkv, G, T, S) -> (B, H, T, S)
        return out

    @classmethod
    def from_torch(cls, module):
        """Copy an nn.MultiheadAttention (batch_first or not; same math either way)."""
        d, heads = module.embed_dim, module.num_heads
        ours = cls(d, heads, bias=module.in_proj_bias is not None)
        w_q, w_k, w_v = np.split(module.in_proj_weight.detach().numpy(), 3)
        ours.w_q.weight.data, ours.w_k.weight.data, ours.w_v.weight.data = w_q.copy(), w_k.copy(), w_v.copy()
        ours.w_o.weight.data = module.out_proj.weight.detach().numpy().copy()
        if module.in_proj_bias is not None:
            b_q, b_k, b_v = np.split(module.in_proj_bias.detach().numpy(), 3)
            ours.w_q.bias.data, ours.w_k.bias.data, ours.w_v.bias.data = b_q.copy(), b_k.copy(), b_v.copy()
            ours.w_o.bias.data = module.out_proj.bias.detach().numpy().copy()
        return ours

    def extra_repr(self):
        return f"d={self.d}, heads={self.heads}, kv_heads={self.kv_heads}"


class MultiHeadLatentAttention(Module):
    """Multi-head latent attention (the second seed; DeepSeek-V2): keys and values are
    not cached; only the compressed latent c = W_DKV h (d_latent numbers per token) is,
    and keys and values are expanded from it: k = W_UK c, v = W_UV c.
    """

    def __init__(self, d, heads, d_latent, bias=False):
        super().__init__()
        _check_sizes("MultiHeadLatentAttention", d=d, heads=heads, d_latent=d_latent)
        if d % heads:
            raise ValueError(f"MultiHeadLatentAttention: d = {d} is not divisible by heads = {heads}")
        self.d, self.heads, self.d_head, self.d_latent = d, heads, d // heads, d_latent
        self.w_q = Linear(d, d, bias=bias)
        self.w_dkv = Linear(d, d_latent, bias=bias)  # down: h -> c
        self.w_uk = Linear(d_latent, d, bias=bias)  # up: c -> keys of every head
        self.w_uv = Linear(d_latent, d, bias=bias)  # up: c -> values of every head
        self.w_o = Linear(d, d, bias=bias)

    def forward(self, x, mask=None, cache=None, is_causal=False):
        if x.ndim != 3 or x.shape[-1] != self.d:
            raise ValueError(
                f"MultiHeadLatentAttention(d={self.d}): expected input (batch, T, {self.d}), got {x.shape}"
            )
        B, T, _ = x.shape
        H = self.heads
        S = T + (0 if cache is None else len(cache))  # keys seen: the cached ones, then these
        # checked before the cache grows: a failed call must leave it as it was
        mask = F.attention_mask(mask, (B, H, T, S), "MultiHeadLatentAttention", x.dtype)
        c = self.w_dkv(x)  # (B, T, d_latent): all that is cached
        if cache is not None:
            c = cache.update(c)  # (B, S, d_latent)
        q = split_heads(self.w_q(x), H)  # (B, H, T, dh)
        k = split_heads(self.w_uk(c), H)  # (B, H, S, dh): keys expanded from the latents
        v = split_heads(self.w_uv(c), H)
        out = attend(q, k, v, mask, is_causal=is_causal)  # the mask: checked above
        return self.w_o(merge_heads(out))


class LatentCache:
    """The cache of multi-head latent attention: the latents c of the tokens so far."""

    def __init__(self):
        self.c = None

    def update(self, c):
        """Append (B, t, d_latent) latents; return every latent cached so far."""
        if self.c is not None and (c.shape[0] != self.c.shape[0] or c.shape[2:] != self.c.shape[2:]):
            raise ValueError(
                f"LatentCache.update: new latents of shape {c.shape} do not continue the cached ones of "
                f"shape {self.c.shape} (all axes but the token axis 1 must match)"
            )
        # BEGIN SOLUTION kv_cache
        self.c = c.detach() if self.c is None else mt.cat([self.c, c.detach()], axis=1)  # (B, s + t, d_latent)
        return self.c
        # END SOLUTION

    def __len__(self):
        return 0 if self.c is None else self.c.shape[1]

    @property
    def nbytes(self):
        return 0 if self.c is None else self.c.data.nbytes
