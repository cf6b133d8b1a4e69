# %% [markdown]
# # Generation and the key-value cache (seed 000, "Generation and the key-value cache"; seed 001, grouped-query and multi-head latent attention).
#
# Prefill and token-by-token sampling with a cache give the same logits; with the cache the cost
# per token grows linearly with the context, without it the whole prefix is recomputed. How many
# numbers does the cache hold per token? The seed's answer for 80 layers of width 8,192 in 16-bit
# numbers: 2.6 MB per token and 86 GB at 32,768 tokens. Multi-query, grouped-query (64 query
# heads, 8 KV heads: 8x less) and latent attention shrink it.

# %%
import time

import numpy as np

import minitensor as mt
from models.attention import KVCache
from models.transformer import GPT

from demos._common import QUICK, Checks, plt, save

GROUPED_KV_HEADS, LATENT, ROPE = 8, 512, 64  # the seed's grouped-query and latent (MLA) set-ups


def cache_sizes(layers, heads, d_head):
    """Bytes the cache holds per token in 16-bit numbers, for `layers` layers of `heads` query
    heads of width d_head, by way of sharing keys and values: {name: bytes}."""
    # BEGIN SOLUTION demo_kv_cache
    return {
        f"multi-head ({heads} KV heads)": KVCache.bytes_per_token(layers, heads * d_head),
        f"grouped-query ({GROUPED_KV_HEADS} KV heads)": KVCache.bytes_per_token(layers, GROUPED_KV_HEADS * d_head),
        "multi-query (1 KV head)": KVCache.bytes_per_token(layers, 1 * d_head),
        f"latent ({LATENT} + {ROPE} numbers, MLA)": layers * (LATENT + ROPE) * 2,
    }
    # END SOLUTION


# %%
checks = Checks()
mt.set_default_dtype(np.float64)
try:
    mt.manual_seed(0)
    model = GPT(vocab=64, context=512, d=64, heads=4, layers=2)
finally:
    mt.set_default_dtype(np.float32)
tokens = np.random.default_rng(0).integers(0, 64, size=(1, 24))

# %% [markdown]
# Prefill vs token by token with a cache: the same logits

# %%
with mt.no_grad():
    prefill = model(tokens).data
    caches = [KVCache() for _ in model.blocks]
    stepwise = np.concatenate([model(tokens[:, t : t + 1], caches).data for t in range(tokens.shape[1])], axis=1)
checks("prefill and token-by-token sampling with a cache give the same logits", np.allclose(prefill, stepwise, atol=1e-10))

# %% [markdown]
# Cost per generated token against the context length

# %%
lengths = [16, 64, 128] if QUICK else [16, 64, 128, 256, 384, 496]
cached_ms, uncached_ms = [], []
REPEATS = 7  # each cost is the best of 7 calls: the least disturbed by whatever else the machine runs


def best_ms(run):
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


with mt.no_grad():
    for n in lengths:
        context = np.random.default_rng(1).integers(0, 64, size=(1, n))
        caches = [KVCache() for _ in model.blocks]
        model(context[:, :-1], caches)

        def next_token_with_cache():
            trimmed = [KVCache() for _ in model.blocks]  # a cache holding n - 1 tokens
            for mine, full in zip(trimmed, caches):
                mine.k, mine.v = full.k, full.v
            model(context[:, -1:], trimmed)

        cached_ms.append(best_ms(next_token_with_cache))
        uncached_ms.append(best_ms(lambda: model(context)))
for n, a, b in zip(lengths, cached_ms, uncached_ms):
    print(f"context {n:4d}: next token {a:6.2f} ms with the cache, {b:7.2f} ms recomputing the prefix (best of {REPEATS})")
checks("at the longest context the cache makes a token cheaper", cached_ms[-1] < uncached_ms[-1])

# %% [markdown]
# Cache sizes (16-bit numbers)

# %%
layers, d, heads, d_head = 80, 8192, 64, 128
per_token = cache_sizes(layers, heads, d_head)
full = per_token["multi-head (64 KV heads)"]
print(f"cache per token, 80 layers of width 8,192: {full / 1e6:.1f} MB; at 32,768 tokens: {full * 32768 / 1e9:.0f} GB")
for name, size in per_token.items():
    print(f"  {name:32}{size / 1e3:9.1f} kB per token, {size * 32768 / 1e9:6.1f} GB at 32,768 tokens ({full / size:.0f}x less)")
checks("2.6 MB per token", round(full / 1e6, 1) == 2.6)
checks("86 GB at 32,768 tokens", round(full * 32768 / 1e9) == 86)
checks("grouped-query with 8 KV heads for 64 query heads: 8x less", full / per_token["grouped-query (8 KV heads)"] == 8)

fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
left.plot(lengths, uncached_ms, "o-", label="recompute the prefix")
left.plot(lengths, cached_ms, "s-", label="with the KV cache")
left.set(xlabel="context length", ylabel=f"ms per generated token (best of {REPEATS})",
         title="cost of one more token (small GPT)")
left.legend()
names = list(per_token)
right.barh(names, [per_token[n] * 32768 / 1e9 for n in names], color=["tab:red", "tab:orange", "tab:green", "tab:blue"])
right.set(xscale="log", xlabel="GB at 32,768 tokens (80 layers, 16-bit)", title="KV cache size")
for i, n in enumerate(names):
    right.text(per_token[n] * 32768 / 1e9, i, f" {per_token[n] * 32768 / 1e9:.1f} GB", va="center", fontsize=8)
right.set_xlim(right=500)
save(fig, "kv_cache")
