"""Your tests for layer norm over the last axis, mt.nn.functional.layer_norm (task tests_layer_norm).

Write test functions (names starting with `test`) that pass on every correct implementation of the op
and fail on buggy ones. While graded they run against several implementations, each in a fresh process,
on seeds 0, 1 and 2: use NumPy, minitensor (mt.gradcheck, your own references), plain asserts,
numpy.testing and pytest.raises / pytest.approx / pytest.mark.parametrize; PyTorch is not there.
Practise: python -m homework practice --op layer_norm
"""

import numpy as np

import minitensor as mt
from minitensor.nn.functional import layer_norm

# BEGIN SOLUTION tests_layer_norm


def test_gradients_with_and_without_weight_and_bias():
    x = mt.tensor(np.random.randn(2, 4), requires_grad=True)
    weight = mt.tensor(np.random.randn(4), requires_grad=True)
    bias = mt.tensor(np.random.randn(4), requires_grad=True)
    assert mt.gradcheck(lambda x, w, b: layer_norm(x, (4,), w, b), x, weight, bias)
    assert mt.gradcheck(lambda x: layer_norm(x, (4,)), x)


def test_each_row_is_normalised():
    x = np.random.randn(4, 6) * 3 + 1
    y = layer_norm(mt.tensor(x), (6,)).data
    np.testing.assert_allclose(y.mean(axis=-1), 0, atol=1e-9)
    np.testing.assert_allclose(y.var(axis=-1), 1, rtol=1e-3)


def test_float32_stays_float32():
    x = mt.tensor(np.random.randn(2, 5).astype(np.float32))
    assert layer_norm(x, (5,)).dtype == np.float32
# END SOLUTION
