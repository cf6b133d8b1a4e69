"""Data for the training demos: the adding problem and digit-sequence reversal."""

import numpy as np


def adding_problem(batch, length, rng):
    """Values uniform in [0, 1] with two marked positions; the target is the sum of the two
    marked values. Predicting the mean (1.0) scores an MSE of Var(u1 + u2) = 1/6: the plateau."""
    values = rng.uniform(0, 1, size=(batch, length))
    markers = np.zeros((batch, length))
    rows = np.arange(batch)[:, None]
    marked = np.argsort(rng.random((batch, length)), axis=1)[:, :2]  # two distinct positions per row
    markers[rows, marked] = 1.0
    x = np.stack([values, markers], axis=-1).astype(np.float32)
    return x, (values * markers).sum(axis=1, keepdims=True).astype(np.float32)


def digit_sequences(batch, length, rng, vocab=10):
    """Random digit sequences (1..vocab-1; 0 is the start token) and their reversals."""
    source = rng.integers(1, vocab, size=(batch, length))
    return source, source[:, ::-1].copy()
