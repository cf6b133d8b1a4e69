"""Position information: sinusoidal and learned encodings, RoPE, ALiBi and T5's relative bias."""

import math

import numpy as np

import minitensor as mt
from minitensor.nn import Embedding, Module


def sinusoidal(T, d, base=10000.0):
    """(T, d) encodings of Vaswani et al.: PE[t, 2j] = sin(t w_j), PE[t, 2j+1] = cos(t w_j),
    w_j = base**(-2j/d). A constant Tensor (nothing to learn)."""
    if d % 2:
        raise ValueError(f"sinusoidal: d must be even, got {d}")
    omega = base ** (-np.arange(0, d, 2) / d)  # (d/2,) frequencies
    angle = np.arange(T)[:, None] * omega[None, :]  # (T, 1) * (1, d/2) -> (T, d/2)
    table = np.empty((T, d))
    table[:, 0::2], table[:, 1::2] = np.sin(angle), np.cos(angle)  # (T, d/2) each, into the even and odd columns
    return mt.tensor(table.astype(mt.get_default_dtype()))


class LearnedPositions(Module):
    """A learned vector per position, added to the token embeddings (GPT-2, ViT)."""

    def __init__(self, context, d):
        super().__init__()
        self.context = context
        self.table = Embedding(context, d)

    def forward(self, T, start=0):
        """(T, d): the vectors of positions start .. start + T - 1 (start > 0 after a KV cache)."""
        if T < 0 or start < 0:
            raise ValueError(f"LearnedPositions: T and start must be >= 0, got T={T}, start={start}")
        if start + T > self.context:
            raise ValueError(
                f"LearnedPositions: positions up to {start + T} asked for, but the context is {self.context}"
            )
        return self.table(np.arange(start, start + T))  # (T, d)


def rope(x, base=10000.0, offset=0):
    """Rotate coordinate pairs (2j, 2j+1) of the row for position t by the angle t * w_j.

    x: (..., T, d) queries or keys; position t of row t is offset + t (offset > 0
    when a KV cache already holds `offset` tokens). Since rotations compose, the
    score (R_m q) . (R_n k) = q . R_(n-m) k depends on the offset n - m only.
    """
    T, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"rope: the last axis must be even, got {d}")
    omega = base ** (-np.arange(0, d, 2) / d)  # (d/2,)
    angle = np.arange(offset, offset + T)[:, None] * omega  # (T, 1) * (d/2,) -> (T, d/2)
    cos, sin = mt.tensor(np.cos(angle).astype(x.dtype)), mt.tensor(np.sin(angle).astype(x.dtype))
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each
    rotated = mt.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)  # (..., T, d/2, 2)
    return rotated.reshape(x.shape)  # (..., T, d/2, 2) -> (..., T, d): interleaved back, (2j, 2j+1)


def alibi_slopes(heads):
    """ALiBi's per-head slopes m_h = 2**(-8 h / heads), h = 1..heads (for a power of two;
    otherwise the closest power of two's slopes, then every other of the next, as the paper)."""
    def powers(n):
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(heads).is_integer():
        return np.array(powers(heads))
    closest = 2 ** math.floor(math.log2(heads))
    return np.array(powers(closest) + powers(2 * closest)[0::2][: heads - closest])


def alibi_bias(heads, T, S=None):
    """(heads, T, S) float bias -m_h |i - j| added to the scores: a penalty growing with distance."""
    S = T if S is None else S
    distance = np.abs(np.arange(T)[:, None] + (S - T) - np.arange(S)[None, :])  # (T, 1) - (1, S) -> (T, S)
    return (-alibi_slopes(heads)[:, None, None] * distance).astype(mt.get_default_dtype())  # -> (heads, T, S)


def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """T5's bucket of each offset j - i: exact buckets for small offsets, logarithmic ones up
    to max_distance, one bucket beyond; with bidirectional, half the buckets for each sign.

    Per sign, with n buckets and e = n // 2 exact ones, a distance r >= e goes to bucket
    min(n - 1, e + floor(log(r / e) / log(max_distance / e) * (n - e))) (Raffel et al., 2020)."""
    _check_t5_buckets(bidirectional, num_buckets, max_distance)
    relative_position = np.asarray(relative_position)
    bucket = np.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (relative_position > 0) * num_buckets
        distance = np.abs(relative_position)
    else:
        distance = np.maximum(-relative_position, 0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    with np.errstate(divide="ignore"):
        log_bucket = max_exact + (
            np.log(np.maximum(distance, 1) / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
        ).astype(np.int64)
    log_bucket = np.minimum(log_bucket, num_buckets - 1)
    return bucket + np.where(is_small, distance, log_bucket)


def _check_t5_buckets(bidirectional, num_buckets, max_distance):
    """Each sign needs an exact bucket (e >= 1) and a log range that grows (max_distance > e):
    max_distance <= e would divide by log(max_distance / e) <= 0 and give negative buckets."""
    per_sign = num_buckets // 2 if bidirectional else num_buckets
    if per_sign < 2:
        raise ValueError(
            f"t5_bucket: num_buckets={num_buckets} is too few; it needs at least "
            f"{4 if bidirectional else 2} ({'2 per sign, ' if bidirectional else ''}one exact and one logarithmic)"
        )
    if max_distance <= per_sign // 2:
        raise ValueError(
            f"t5_bucket: max_distance={max_distance} must exceed the {per_sign // 2} exact distances "
            f"of num_buckets={num_buckets}"
        )


class T5RelativeBias(Module):
    """A learned scalar per head and per bucket of offsets, added to the scores: (heads, T, S)."""

    def __init__(self, heads, num_buckets=32, max_distance=128, bidirectional=True):
        super().__init__()
        _check_t5_buckets(bidirectional, num_buckets, max_distance)
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.table = Embedding(num_buckets, heads)

    def forward(self, T, S=None):
        """(heads, T, S) bias of T queries, the last T of S positions (S > T after a KV cache),
        over S keys: entry (h, i, j) is the table's value for head h at bucket(j - (i + S - T))."""
        S = T if S is None else S
        if not 0 <= T <= S:
            raise ValueError(
                f"T5RelativeBias: the queries must be the last T of the S keys (0 <= T <= S), got T={T}, S={S}"
            )
        offsets = np.arange(S)[None, :] - (np.arange(T)[:, None] + S - T)  # (1, S) - (T, 1) -> (T, S): j - i
        buckets = t5_bucket(offsets, self.bidirectional, self.num_buckets, self.max_distance)
        return self.table(buckets).permute(2, 0, 1)  # (T, S, heads) -> (heads, T, S)
