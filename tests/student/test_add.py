"""Your tests for Add, y = a + b with broadcasting (task tests_add).

Write test functions (names starting with `test`) that pass on every correct implementation of the op
and fail on buggy ones. While graded they run against several implementations, each in a fresh process,
on seeds 0, 1 and 2: use NumPy, minitensor (mt.gradcheck, your own references), plain asserts,
numpy.testing and pytest.raises / pytest.approx / pytest.mark.parametrize; PyTorch is not there.
Practise against the public buggy implementations: python -m homework practice --op add
"""

import numpy as np

import minitensor as mt

# BEGIN SOLUTION tests_add


def test_values_and_gradients_when_shapes_broadcast():
    for shape_a, shape_b in [((2, 3), (3,)), ((2, 1), (1, 3))]:
        a = mt.tensor(np.random.randn(*shape_a), requires_grad=True)
        b = mt.tensor(np.random.randn(*shape_b), requires_grad=True)
        np.testing.assert_allclose((a + b).data, a.data + b.data)
        assert mt.gradcheck(lambda a, b: a + b, a, b)


def test_float32_stays_float32():
    a = mt.tensor(np.random.randn(2, 3).astype(np.float32), requires_grad=True)
    b = mt.tensor(np.random.randn(3).astype(np.float32), requires_grad=True)
    y = a + b
    assert y.dtype == np.float32, "float32 in, float32 out"
    y.backward(np.ones((2, 3), np.float32))
    assert a.grad.dtype == np.float32 and b.grad.dtype == np.float32


def test_each_backward_uses_its_own_upstream_gradient():
    for call in range(2):  # each backward pass must use its own upstream gradient
        a = mt.tensor(np.random.randn(2, 3), requires_grad=True)
        b = mt.tensor(np.random.randn(2, 3), requires_grad=True)
        dy = np.random.randn(2, 3)
        (a + b).backward(dy)
        np.testing.assert_allclose(a.grad, dy)
        np.testing.assert_allclose(b.grad, dy)
# END SOLUTION
