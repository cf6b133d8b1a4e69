"""A two-layer network learns whether a point lies inside the unit circle, with plain
gradient descent: the smallest end-to-end use of minitensor (tensors, a forward pass, a loss,
backward, and a parameter update inside no_grad).

    python examples/two_layer.py        prints the loss and accuracy every 50 of 200 steps
"""

import numpy as np

import minitensor as mt
from minitensor import F


def main(steps=200, learning_rate=0.5, seed=0):
    mt.manual_seed(seed)
    rng = np.random.default_rng(seed)
    # A toy problem: is a point inside the unit circle? (not linearly separable)
    points = rng.uniform(-1.5, 1.5, size=(256, 2)).astype(np.float32)
    labels = (np.sum(points**2, axis=1) < 1.0).astype(np.int64)
    x = mt.tensor(points)

    hidden = 16
    w1 = mt.tensor(mt.randn(hidden, 2).data * np.sqrt(2 / 2), requires_grad=True)
    b1 = mt.zeros(hidden, requires_grad=True)
    w2 = mt.tensor(mt.randn(2, hidden).data * np.sqrt(1 / hidden), requires_grad=True)
    b2 = mt.zeros(2, requires_grad=True)
    parameters = [w1, b1, w2, b2]

    for step in range(steps + 1):
        logits = F.linear(F.linear(x, w1, b1).tanh(), w2, b2)  # (256, 2)
        loss = F.cross_entropy(logits, labels)
        for p in parameters:
            p.grad = None
        loss.backward()
        with mt.no_grad():
            for p in parameters:
                p -= learning_rate * p.grad
        if step % 50 == 0:
            accuracy = (logits.data.argmax(axis=1) == labels).mean()
            print(f"step {step:4d}  loss {loss.item():.4f}  accuracy {accuracy:.1%}")
    return loss.item()


if __name__ == "__main__":
    main()
