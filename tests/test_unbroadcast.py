"""unbroadcast: the one place broadcasting is undone, checked as a property."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from minitensor.autograd import unbroadcast


@given(data=st.data())
def test_unbroadcast_is_the_adjoint_of_broadcasting(data):
    # <broadcast(x), g> == <x, unbroadcast(g)> for every x and g: the definition of an adjoint
    (shape, other), target = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal(shape)
    g = rng.standard_normal(target)
    reduced = unbroadcast(g, shape)
    assert reduced.shape == shape
    np.testing.assert_allclose(np.sum(np.broadcast_to(x, target) * g), np.sum(x * reduced), atol=1e-9)


def test_unbroadcast_example():
    g = np.ones((2, 3, 4))
    np.testing.assert_array_equal(unbroadcast(g, (3, 1)), np.full((3, 1), 8.0))
    assert unbroadcast(g, (2, 3, 4)) is g


def test_unbroadcast_refuses_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"cannot be summed down to shape \(5,\)"):
        unbroadcast(np.ones((2, 3)), (5,))
