"""Your tests for Softmax, mt.softmax / x.softmax(axis) (task tests_softmax).

Write test functions (names starting with `test`) that pass on every correct implementation of the op
and fail on buggy ones. While graded they run against several implementations, each in a fresh process,
on seeds 0, 1 and 2: use NumPy, minitensor (mt.gradcheck, your own references), plain asserts,
numpy.testing and pytest.raises / pytest.approx / pytest.mark.parametrize; PyTorch is not there.
Practise: python -m homework practice --op softmax
"""

import numpy as np

import minitensor as mt

# BEGIN SOLUTION tests_softmax


def test_rows_sum_to_one_and_gradients_match_differences():
    for axis in (-1, 0):
        x = mt.tensor(np.random.randn(2, 3), requires_grad=True)
        y = x.softmax(axis=axis)
        np.testing.assert_allclose(y.data.sum(axis=axis), 1.0)
        assert mt.gradcheck(lambda x: x.softmax(axis=axis), x)


def test_float32_stays_float32():
    x = mt.tensor(np.random.randn(2, 5).astype(np.float32))
    assert x.softmax(axis=-1).dtype == np.float32
# END SOLUTION
