"""The transformer: MLP, SwiGLU, the block (pre- and post-norm), GPT, an encoder, an
encoder-decoder, and a readout-token transformer for sequence regression.
"""

# BEGIN SOLUTION pre_norm_block
# The pre-norm block is the seeds' two lines:
#     H = X + MHA(LN(X)),    X' = H + MLP(LN(H)).
# END SOLUTION

import numpy as np

import minitensor as mt
from minitensor import F
from minitensor.nn import Dropout, Embedding, Linear, Module, ModuleList, Parameter

from .attention import KVCache, MultiHeadAttention
from .layernorm import LayerNorm


class MLP(Module):
    """MLP(z) = W2 gelu(W1 z + b1) + b2, hidden width 4d by default, applied per position."""

    def __init__(self, d, hidden=None, approximate="none"):
        super().__init__()
        hidden = 4 * d if hidden is None else hidden
        self.fc1, self.fc2 = Linear(d, hidden), Linear(hidden, d)
        self.approximate = approximate

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), self.approximate))


class SwiGLU(Module):
    """SwiGLU(z) = W2 (silu(W1 z) * W3 z), no biases; hidden about 8d/3 keeps the parameter
    count of a 4d MLP (rounded up to a multiple of 8)."""

    def __init__(self, d, hidden=None):
        super().__init__()
        hidden = hidden or 8 * ((8 * d // 3 + 7) // 8)
        self.w1, self.w3 = Linear(d, hidden, bias=False), Linear(d, hidden, bias=False)
        self.w2 = Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(Module):
    """Block(d, heads, mlp_ratio=4, pre_norm=True): a transformer block.

    pre_norm=True:  the seed's pre-norm block (used today; the homework task pre_norm_block)
    pre_norm=False: x = LN1(x + MHA(x));  x = LN2(x + MLP(x))      (the original, post-norm)
    Options: kv_heads (grouped-query attention), qk_norm, dropout, swiglu.
    """

    # BEGIN SOLUTION pre_norm_block
    # pre_norm=True:  x = x + MHA(LN1(x));  x = x + MLP(LN2(x))
    # END SOLUTION

    def __init__(self, d, heads, mlp_ratio=4, pre_norm=True, kv_heads=None, qk_norm=False, dropout=0.0, swiglu=False):
        super().__init__()
        self.pre_norm = pre_norm
        self.ln1, self.ln2 = LayerNorm(d), LayerNorm(d)
        self.attn = MultiHeadAttention(d, heads, kv_heads=kv_heads, qk_norm=qk_norm)
        self.mlp = SwiGLU(d) if swiglu else MLP(d, mlp_ratio * d)
        self.drop = Dropout(dropout)

    def forward(self, x, mask=None, is_causal=False, cache=None, context=None):
        if self.pre_norm:
            # BEGIN SOLUTION pre_norm_block
            x = x + self.drop(self.attn(self.ln1(x), mask=mask, is_causal=is_causal, cache=cache))  # H = X + MHA(LN(X))
            return x + self.drop(self.mlp(self.ln2(x)))  # X' = H + MLP(LN(H))
            # END SOLUTION
        x = self.ln1(x + self.drop(self.attn(x, mask=mask, is_causal=is_causal, cache=cache)))
        return self.ln2(x + self.drop(self.mlp(x)))

    @classmethod
    def from_torch(cls, block):
        """Copy the seed's PyTorch Block (ln1, ln2, attn = nn.MultiheadAttention,
        mlp = Sequential(Linear, GELU, Linear))."""
        d, heads = block.attn.embed_dim, block.attn.num_heads
        ours = cls(d, heads, mlp_ratio=block.mlp[0].out_features // d)
        ours.ln1, ours.ln2 = LayerNorm.from_torch(block.ln1), LayerNorm.from_torch(block.ln2)
        ours.attn = MultiHeadAttention.from_torch(block.attn)
        _copy_linear(ours.mlp.fc1, block.mlp[0])
        _copy_linear(ours.mlp.fc2, block.mlp[2])
        return ours


def _copy_linear(ours, theirs):
    ours.weight = Parameter(theirs.weight.detach().numpy().copy())
    if theirs.bias is not None:
        ours.bias = Parameter(theirs.bias.detach().numpy().copy())


def token_ids(idx, who):
    """Token indices (a Tensor, an array or lists) as a (batch, T) integer array, or an
    error that says what was given and how to add the batch axis."""
    ids = idx.data if isinstance(idx, mt.Tensor) else np.asarray(idx)
    if ids.ndim != 2:
        hint = "; for one sequence add a batch axis: idx[None]" if ids.ndim == 1 else ""
        raise ValueError(f"{who}: expected token ids of shape (batch, T), got shape {ids.shape}{hint}")
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{who}: token ids must be integers, got dtype {ids.dtype}")
    return ids


class GPT(Module):
    """GPT(vocab, context, d, heads, layers): a decoder-only transformer with learned positions
    and the output layer tied to the token embedding (so it is counted once). The GPT-2 small
    shape, GPT(50257, 1024, 768, 12, 12), has 124,439,808 parameters = L(12d^2 + 13d) + (V + C + 2)d.
    """

    def __init__(self, vocab, context, d, heads, layers, mlp_ratio=4, kv_heads=None, dropout=0.0):
        super().__init__()
        self.vocab, self.context = vocab, context
        self.tok, self.pos = Embedding(vocab, d), Embedding(context, d)
        self.drop = Dropout(dropout)
        self.blocks = ModuleList(Block(d, heads, mlp_ratio, kv_heads=kv_heads, dropout=dropout) for _ in range(layers))
        self.ln = LayerNorm(d)
        self.head = Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # weight tying: one Parameter, two uses

    def forward(self, idx, caches=None):
        """idx (B, T) token indices -> (B, T, vocab) logits. With caches (one KVCache per
        block), idx holds only the new tokens and attends to everything cached.

        As in nanoGPT and Hugging Face, the batch axis is required: a 1-D idx raises and
        asks for idx[None] (one sequence as a batch of one), rather than guessing."""
        idx = token_ids(idx, "GPT")
        start = len(caches[0]) if caches else 0
        T = idx.shape[1]
        if start + T > self.context:
            raise ValueError(f"GPT: a sequence of {start + T} tokens is longer than the context of {self.context}")
        if idx.size and (idx.min() < 0 or idx.max() >= self.vocab):
            bad = idx[(idx < 0) | (idx >= self.vocab)].flat[0]
            raise IndexError(f"GPT: token index {bad} is outside the vocabulary of {self.vocab} tokens")
        x = self.drop(self.tok(idx) + self.pos(np.arange(start, start + T)))  # (B, T, d)
        for i, block in enumerate(self.blocks):
            x = block(x, is_causal=True, cache=None if caches is None else caches[i])
        return self.head(self.ln(x))  # (B, T, vocab)

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, use_cache=True):
        """Append max_new_tokens sampled tokens to idx (B, T); temperature 0 is greedy.
        Sampling draws from mt.manual_seed's generator. With use_cache each step feeds one
        token and reuses the cached keys and values; without, it recomputes the (cropped)
        sequence. Both give the same tokens."""
        from minitensor.random import generator

        tokens = token_ids(idx, "GPT.generate")
        if use_cache and tokens.shape[1] + max_new_tokens > self.context:
            raise ValueError(
                f"GPT.generate: {tokens.shape[1]} + {max_new_tokens} tokens exceed the context of "
                f"{self.context}; use_cache=False crops the sequence instead"
            )
        with mt.no_grad():
            caches = [KVCache() for _ in self.blocks] if use_cache else None
            new_input = tokens
            for _ in range(max_new_tokens):
                if use_cache:
                    logits = self(new_input, caches)
                else:
                    logits = self(tokens[:, -self.context :])  # (B, t) -> (B, min(t, context))
                last = logits.data[:, -1, :].astype(np.float64)  # (B, t, vocab) -> (B, vocab)
                if temperature == 0:
                    chosen = last.argmax(axis=-1)
                else:
                    last = last / temperature
                    if top_k is not None:
                        kth = np.sort(last, axis=-1)[:, -min(top_k, last.shape[-1])][:, None]  # -> (B, 1)
                        last = np.where(last < kth, -np.inf, last)
                    probabilities = np.exp(last - last.max(axis=-1, keepdims=True))
                    probabilities /= probabilities.sum(axis=-1, keepdims=True)
                    chosen = np.array([generator().choice(len(p), p=p) for p in probabilities])
                tokens = np.concatenate([tokens, chosen[:, None]], axis=1)  # (B, t) and (B, 1) -> (B, t + 1)
                new_input = chosen[:, None]  # (B,) -> (B, 1)
        return tokens


class Encoder(Module):
    """A stack of unmasked (bidirectional) pre-norm blocks and a final layer norm."""

    def __init__(self, d, heads, layers, mlp_ratio=4):
        super().__init__()
        self.blocks = ModuleList(Block(d, heads, mlp_ratio) for _ in range(layers))
        self.ln = LayerNorm(d)

    def forward(self, x, mask=None):
        for block in self.blocks:
            x = block(x, mask=mask)
        return self.ln(x)


class DecoderBlock(Module):
    """Three sublayers: causal self-attention, cross-attention to the encoder's states, MLP."""

    def __init__(self, d, heads, mlp_ratio=4):
        super().__init__()
        self.ln1, self.ln2, self.ln3 = LayerNorm(d), LayerNorm(d), LayerNorm(d)
        self.self_attn = MultiHeadAttention(d, heads)
        self.cross_attn = MultiHeadAttention(d, heads)
        self.mlp = MLP(d, mlp_ratio * d)

    def forward(self, x, memory, memory_mask=None):
        """Pre-norm, as Block: causal self-attention, then cross-attention (queries from x, keys and
        values from memory, memory_mask hiding its padding), then the MLP."""
        # BEGIN SOLUTION pre_norm_block
        x = x + self.self_attn(self.ln1(x), is_causal=True)
        x = x + self.cross_attn(self.ln2(x), context=memory, mask=memory_mask)  # queries from x, keys from memory
        return x + self.mlp(self.ln3(x))
        # END SOLUTION


class EncoderDecoder(Module):
    """The original transformer's shape (pre-norm): encode the source without a mask,
    decode the target causally with cross-attention to the encoded source."""

    def __init__(self, source_vocab, target_vocab, context, d, heads, layers):
        super().__init__()
        self.context = context
        self.source_tok, self.target_tok = Embedding(source_vocab, d), Embedding(target_vocab, d)
        self.pos = Embedding(context, d)
        self.encoder = Encoder(d, heads, layers)
        self.decoder = ModuleList(DecoderBlock(d, heads) for _ in range(layers))
        self.ln = LayerNorm(d)
        self.head = Linear(d, target_vocab)

    def forward(self, source, target, source_mask=None):
        source, target = token_ids(source, "EncoderDecoder (source)"), token_ids(target, "EncoderDecoder (target)")
        for name, seq in (("source", source), ("target", target)):
            if seq.shape[1] > self.context:
                raise ValueError(
                    f"EncoderDecoder: the {name} has {seq.shape[1]} tokens, more than the context of {self.context}"
                )
        memory = self.encoder(self.source_tok(source) + self.pos(np.arange(source.shape[1])), mask=source_mask)
        x = self.target_tok(target) + self.pos(np.arange(target.shape[1]))
        for block in self.decoder:
            x = block(x, memory, memory_mask=source_mask)
        return self.head(self.ln(x))


class ReadoutTransformer(Module):
    """Sequence regression with a learned readout token (as ViT's class token).

    The input (B, T, input_size) is projected to width d, the readout token is
    prepended, learned positions are added (T + 1 of them), the blocks run
    unmasked, and the readout token's final state, layer-normed, goes through a
    linear head. The seed's adding-problem model is ReadoutTransformer(2, 64, 4, 1, 100):
    56,897 parameters.
    """

    def __init__(self, input_size, d, heads, layers, length, outputs=1):
        super().__init__()
        self.project = Linear(input_size, d)
        self.readout = Parameter(np.zeros((1, 1, d), dtype=mt.get_default_dtype()))
        mt.nn.init.normal_(self.readout, std=0.02)
        self.pos = Embedding(length + 1, d)
        self.blocks = ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = LayerNorm(d)
        self.head = Linear(d, outputs)

    def forward(self, x, return_attention=False):
        B, T, _ = x.shape
        h = mt.cat([self.readout.expand(B, 1, self.readout.shape[-1]), self.project(x)], axis=1)  # (B, 1+T, d)
        h = h + self.pos(np.arange(T + 1))
        weights = None
        for block in self.blocks:
            if return_attention:  # the readout token's attention in the last block, for the figure
                _, weights = block.attn(block.ln1(h), need_weights=True)
            h = block(h)
        y = self.head(self.ln(h[:, 0]))  # h[:, 0]: (B, T+1, d) -> (B, d), the readout token; y (B, outputs)
        return (y, weights) if return_attention else y
