"""Your tests for MatMul, y = a @ b: 2-D, batched, and with 1-D operands (task tests_matmul).

Write test functions (names starting with `test`) that pass on every correct implementation of the op
and fail on buggy ones. While graded they run against several implementations, each in a fresh process,
on seeds 0, 1 and 2: use NumPy, minitensor (mt.gradcheck, your own references), plain asserts,
numpy.testing and pytest.raises / pytest.approx / pytest.mark.parametrize; PyTorch is not there.
Practise: python -m homework practice --op matmul
"""

import numpy as np

import minitensor as mt

# BEGIN SOLUTION tests_matmul


def test_gradients_of_products_of_many_shapes():
    for shape_a, shape_b in [((2, 3), (3, 2)), ((2, 2, 3), (3, 2)), ((3,), (3, 2))]:
        a = mt.tensor(np.random.randn(*shape_a), requires_grad=True)
        b = mt.tensor(np.random.randn(*shape_b), requires_grad=True)
        np.testing.assert_allclose((a @ b).data, a.data @ b.data, rtol=1e-6, atol=1e-9)
        assert mt.gradcheck(lambda a, b: a @ b, a, b)


def test_float32_stays_float32():
    a = mt.tensor(np.random.randn(2, 3).astype(np.float32))
    b = mt.tensor(np.random.randn(3, 4).astype(np.float32))
    assert (a @ b).dtype == np.float32
# END SOLUTION
