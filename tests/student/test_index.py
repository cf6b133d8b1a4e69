"""Your tests for indexing, t[index], basic and advanced (task tests_index).

Write test functions (names starting with `test`) that pass on every correct implementation of the op
and fail on buggy ones. While graded they run against several implementations, each in a fresh process,
on seeds 0, 1 and 2: use NumPy, minitensor (mt.gradcheck, your own references), plain asserts,
numpy.testing and pytest.raises / pytest.approx / pytest.mark.parametrize; PyTorch is not there.
Practise: python -m homework practice --op index
"""

import numpy as np

import minitensor as mt

# BEGIN SOLUTION tests_index


def test_gradients_of_basic_and_advanced_indices_with_repeats():
    for index in [1, (slice(1, None), slice(None, None, 2)), [0, 2, 0], (np.array([[0, 1], [1, 1]]), 2)]:
        x = mt.tensor(np.random.randn(3, 3), requires_grad=True)
        np.testing.assert_allclose(x[index].data, x.data[index])
        assert mt.gradcheck(lambda x: x[index], x)


def test_float32_stays_float32():
    x = mt.tensor(np.random.randn(3, 4).astype(np.float32))
    assert x[[0, 0]].dtype == np.float32
# END SOLUTION
