"""Initialisations, in place on a Parameter's array, drawn from the generator mt.manual_seed seeds."""

import math

import numpy as np

from ..random import generator
from ..views import increment_version


def _fill(tensor, values):
    tensor.data[...] = values.astype(tensor.dtype)
    increment_version(tensor)
    return tensor


def uniform_(tensor, low=0.0, high=1.0):
    return _fill(tensor, generator().uniform(low, high, size=tensor.shape))


def normal_(tensor, mean=0.0, std=1.0):
    return _fill(tensor, generator().normal(mean, std, size=tensor.shape))


def zeros_(tensor):
    return _fill(tensor, np.zeros(tensor.shape))


def ones_(tensor):
    return _fill(tensor, np.ones(tensor.shape))


def _fans(tensor):
    """(fan_in, fan_out) of a weight shaped (out, in, *kernel), as PyTorch computes them."""
    if tensor.ndim < 2:
        raise ValueError(f"fan in and fan out need at least 2 axes, got shape {tensor.shape}")
    receptive = int(np.prod(tensor.shape[2:])) if tensor.ndim > 2 else 1
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def xavier_uniform_(tensor, gain=1.0):
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def kaiming_uniform_(tensor, a=0.0):
    """U(-b, b), b = gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + a**2)) (leaky-ReLU slope a).
    With a = sqrt(5), PyTorch's Linear default, this is U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    fan_in, _ = _fans(tensor)
    gain = math.sqrt(2.0 / (1 + a * a))
    bound = gain * math.sqrt(3.0 / fan_in) if fan_in else 0.0
    return uniform_(tensor, -bound, bound)
