"""A small attention computation to step through with pdb (see the README's
"Stepping through a backward pass"):

    python -m pdb examples/debug_attention.py
"""

import numpy as np

import minitensor as mt

q = mt.tensor(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), requires_grad=True)
k = mt.tensor(np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]), requires_grad=True)
v = mt.tensor(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), requires_grad=True)

scores = q @ k.T / np.sqrt(2)  # (3, 3)
weights = scores.softmax(axis=-1)  # each row sums to 1
out = weights @ v  # (3, 2)
loss = out.sum()
loss.backward()
print("dL/dq =", q.grad.round(4).tolist())
