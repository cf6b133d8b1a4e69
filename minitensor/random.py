"""The random numbers minitensor draws (randn, rand, dropout), from one seedable generator."""

import numpy as np

_generator = np.random.default_rng()


def manual_seed(seed):
    """Seed mt.randn, mt.rand and dropout, so a run can be repeated exactly."""
    global _generator
    _generator = np.random.default_rng(seed)


def generator():
    """The current np.random.Generator (changes when manual_seed is called)."""
    return _generator
