"""Write the page that steps through the backward pass of the seeds' pre-norm transformer block
(B=1, T=8, d=16, 4 heads, causal), then open it in any browser:

    python examples/backward_page.py [out.html] [--predict] [--check]
"""

import sys

import numpy as np

import minitensor as mt
from models.transformer import Block


def main(path="block_backward.html", predict=False, check=False):
    mt.manual_seed(0)
    block = Block(16, 4)  # a pre-norm block
    for name, parameter in block.named_parameters():
        parameter.name = name  # the page labels each parameter with it
    x = mt.tensor(np.random.default_rng(0).standard_normal((1, 8, 16)), requires_grad=True, name="x")

    def forward(x):
        out = block(x, is_causal=True)
        out.name = "block(x)"
        loss = (out * out).mean()
        loss.name = "loss"
        return loss

    loss = forward(x)
    return mt.viz.html(loss, path, predict=predict, check=(forward, x) if check else None)


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if not a.startswith("--")]
    written = main(*(arguments[:1] or ["block_backward.html"]), predict="--predict" in sys.argv,
                   check="--check" in sys.argv)
    print(f"wrote {written}: open it in a browser")
