"""Your tests for the causal mask, models.attention.causal_mask(T, S=None) (task tests_causal_mask).

Write test functions (names starting with `test`) that pass on every correct implementation of the op
and fail on buggy ones. While graded they run against several implementations, each in a fresh process,
on seeds 0, 1 and 2: use NumPy, minitensor and models, plain asserts, numpy.testing and pytest.raises /
pytest.approx / pytest.mark.parametrize; PyTorch is not there.
Practise: python -m homework practice --op causal_mask
"""

from models.attention import causal_mask

# BEGIN SOLUTION tests_causal_mask


def test_each_query_sees_itself_and_the_keys_before_it():
    for T, S in [(1, 1), (4, 4), (2, 5), (1, 3), (3, None)]:
        mask = causal_mask(T, S)
        keys = T if S is None else S
        assert mask.shape == (T, keys) and mask.dtype == bool
        for i in range(T):
            position = i + keys - T
            for j in range(keys):
                assert mask[i, j] == (j > position), (T, S, i, j)
# END SOLUTION
