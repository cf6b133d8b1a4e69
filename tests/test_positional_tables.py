"""Learned positions against an nn.Embedding of positions in PyTorch, and T5's relative bias
against the bucket formula of the T5 paper written in torch (issue 13, section 2)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import minitensor as mt
from models.positional import LearnedPositions, T5RelativeBias, t5_bucket


@pytest.fixture
def float64():
    mt.set_default_dtype(np.float64)
    yield
    mt.set_default_dtype(np.float32)


def copy_of_table(table):
    """An nn.Embedding holding the same weights as our Embedding `table`."""
    theirs = torch.nn.Embedding(*table.weight.shape).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(table.weight.data))
    return theirs


@pytest.mark.parametrize("T, start", [(5, 0), (3, 4), (1, 6), (0, 2)])
def test_learned_positions_match_an_embedding_of_positions(float64, T, start):
    ours = LearnedPositions(context=7, d=4)
    theirs = copy_of_table(ours.table)
    out = ours(T, start=start)
    expected = theirs(torch.arange(start, start + T))
    np.testing.assert_array_equal(out.data, expected.detach().numpy())
    upstream = np.random.default_rng(T).standard_normal((T, 4))
    out.backward(upstream)
    expected.backward(torch.tensor(upstream))
    np.testing.assert_array_equal(ours.table.weight.grad, theirs.weight.grad.numpy())


@pytest.mark.parametrize(
    "T, start, message",
    [
        (5, 3, r"positions up to 8 asked for, but the context is 7"),
        (-1, 0, r"T and start must be >= 0, got T=-1, start=0"),
        (2, -1, r"T and start must be >= 0, got T=2, start=-1"),
    ],
)
def test_learned_positions_outside_the_context_are_refused(T, start, message):
    with pytest.raises(ValueError, match=rf"LearnedPositions: {message}"):
        LearnedPositions(context=7, d=4)(T, start=start)


def t5_bucket_in_torch(relative_position, bidirectional, num_buckets, max_distance):
    """The T5 paper's buckets as T5 computes them (float32 logarithm, truncated): per sign,
    n buckets, e = n // 2 exact ones for distances below e, then
    min(n - 1, e + trunc(log(r / e) / log(max_distance / e) * (n - e)))."""
    r = torch.as_tensor(relative_position, dtype=torch.long)
    n = num_buckets // 2 if bidirectional else num_buckets
    sign_offset = (r > 0).long() * n if bidirectional else torch.zeros_like(r)
    distance = r.abs() if bidirectional else torch.clamp(-r, min=0)
    e = n // 2
    logarithmic = e + (torch.log(distance.float() / e) / math.log(max_distance / e) * (n - e)).long()
    logarithmic = torch.clamp(logarithmic, max=n - 1)
    return (sign_offset + torch.where(distance < e, distance, logarithmic)).numpy()


@given(
    bidirectional=st.booleans(),
    per_sign=st.integers(2, 64),
    extra_distance=st.integers(1, 600),
)
def test_t5_buckets_follow_the_papers_formula(bidirectional, per_sign, extra_distance):
    num_buckets = 2 * per_sign if bidirectional else per_sign
    max_distance = per_sign // 2 + extra_distance
    offsets = np.arange(-2 * max_distance - 3, 2 * max_distance + 4)
    ours = t5_bucket(offsets, bidirectional, num_buckets, max_distance)
    np.testing.assert_array_equal(ours, t5_bucket_in_torch(offsets, bidirectional, num_buckets, max_distance))
    assert ours.min() >= 0 and ours.max() < num_buckets


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(num_buckets=3), r"num_buckets=3 is too few; it needs at least 4"),
        (dict(num_buckets=1, bidirectional=False), r"num_buckets=1 is too few; it needs at least 2"),
        (dict(num_buckets=32, max_distance=8), r"max_distance=8 must exceed the 8 exact distances of num_buckets=32"),
    ],
)
def test_t5_settings_that_give_no_logarithmic_range_are_refused(settings, message):
    with pytest.raises(ValueError, match=rf"t5_bucket: {message}"):
        t5_bucket(np.arange(-5, 5), **settings)
    with pytest.raises(ValueError, match=message):
        T5RelativeBias(heads=2, **settings)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("T, S", [(6, 6), (1, 40), (3, 9)])
def test_t5_relative_bias_matches_a_torch_table_of_buckets(float64, bidirectional, T, S):
    """A query i among the last T of S positions sits at S - T + i; its bias for key j is the
    table's row for bucket(j - (S - T + i)), one column per head."""
    ours = T5RelativeBias(heads=3, num_buckets=16, max_distance=20, bidirectional=bidirectional)
    theirs = copy_of_table(ours.table)
    out = ours(T, S)
    query_positions = torch.arange(S - T, S)[:, None]
    relative = torch.arange(S)[None, :] - query_positions  # (T, S): j - i
    buckets = torch.tensor(t5_bucket_in_torch(relative, bidirectional, 16, 20))
    expected = theirs(buckets).permute(2, 0, 1)  # (heads, T, S)
    np.testing.assert_array_equal(out.data, expected.detach().numpy())
    upstream = np.random.default_rng(S).standard_normal((3, T, S))
    out.backward(upstream)
    expected.backward(torch.tensor(upstream))
    np.testing.assert_allclose(ours.table.weight.grad, theirs.weight.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_t5_relative_bias_refuses_more_queries_than_keys():
    with pytest.raises(
        ValueError,
        match=r"T5RelativeBias: the queries must be the last T of the S keys \(0 <= T <= S\), got T=5, S=3",
    ):
        T5RelativeBias(heads=2)(5, 3)
