"""A pre-norm transformer block, forward + backward, four ways, on the same weights:

- minitensor on the numba backend (models.transformer.Block),
- minitensor on the numpy backend,
- a hand-written NumPy forward and backward of the same block (no engine: what the
  engine's bookkeeping costs is the difference),
- PyTorch eager, the seed's Block with nn.MultiheadAttention.

B=8, T=256, d=256, 4 heads, causal, float32, 2 threads for PyTorch.

Each side is timed in a process of its own (PyTorch's OpenMP threads spin after its calls and
slow whatever runs next in the same process); the sides take turns, round after round, and
each ratio is that of the median times, with its range over the rounds. MINITENSOR_BENCH_ROUNDS
sets the rounds (3). Beside the ratios: issue 25's target and the floor, the block's multiply-adds
at this machine's peak rate (benchmarks/common.py) as a fraction of PyTorch's time.
"""

import json
import math
import os
import statistics
import sys

import numpy as np

import minitensor as mt

from .common import best_seconds, compare_rounds, describe_machine, ratio, ratio_and_range, run_worker
from .common import op_code as ref

SIDES = ("minitensor (numba)", "minitensor (numpy)", "hand-written NumPy", "PyTorch eager")
ROUNDS = int(os.environ.get("MINITENSOR_BENCH_ROUNDS", "3"))

B, T, D, HEADS = 8, 256, 256, 4
TARGET = 0.8  # issue 25: minitensor (numba) at most this times PyTorch's time


def block_multiply_adds(attention=True):
    """Multiply-adds of the block's matrix products, forward and backward, from the shapes: the
    four d x d projections, the scores q k^T and the weighted sum over every (query, key) pair
    (dense: a causal kernel may skip up to half of these two), the MLP d -> 4d -> d; backward
    computes two products for each (a gradient for each operand: x requires grad here).
    attention=False leaves out the scores and the weighted sum (PyTorch's FlopCounterMode has no
    formula for its fused CPU attention kernel, so that is what it counts)."""
    forward = 4 * B * T * D * D + (2 * B * T * T * D if attention else 0) + 2 * B * T * D * 4 * D
    return 3 * forward


def make_models():
    import torch

    from models.transformer import Block

    from .torch_reference import TorchBlock

    torch.manual_seed(0)
    theirs = TorchBlock(D, HEADS)
    ours = Block.from_torch(theirs)
    return ours, theirs


def handwritten(ours, x, dout):
    """Forward and backward of the block in plain NumPy, every gradient by hand."""
    p = {name: t.data for name, t in ours.named_parameters()}
    H, dh = HEADS, D // HEADS
    scale = 1 / math.sqrt(dh)
    causal = np.triu(np.ones((T, T), dtype=bool), k=1)

    def heads(z):
        return z.reshape(B, T, H, dh).transpose(0, 2, 1, 3)  # (B, H, T, dh)

    def merge(z):
        return z.transpose(0, 2, 1, 3).reshape(B, T, D)

    # forward
    a, mu1, r1 = ref.layer_norm(x, p["ln1.weight"], p["ln1.bias"], 1e-5)
    q = heads(a @ p["attn.w_q.weight"].T + p["attn.w_q.bias"])
    k = heads(a @ p["attn.w_k.weight"].T + p["attn.w_k.bias"])
    v = heads(a @ p["attn.w_v.weight"].T + p["attn.w_v.bias"])
    probs = ref.softmax(q @ k.transpose(0, 1, 3, 2) * scale, -1, causal)  # (B, H, T, T)
    o = merge(probs @ v)
    h = x + o @ p["attn.w_o.weight"].T + p["attn.w_o.bias"]
    c, mu2, r2 = ref.layer_norm(h, p["ln2.weight"], p["ln2.bias"], 1e-5)
    f1 = c @ p["mlp.fc1.weight"].T + p["mlp.fc1.bias"]
    g = ref.gelu(f1, "none")
    out = h + g @ p["mlp.fc2.weight"].T + p["mlp.fc2.bias"]

    # backward
    grads = {}

    def linear_back(dy, inp, name):
        grads[name + ".weight"] = dy.reshape(-1, dy.shape[-1]).T @ inp.reshape(-1, inp.shape[-1])
        grads[name + ".bias"] = dy.sum(axis=(0, 1))
        return dy @ p[name + ".weight"]

    dh_ = dout.copy()
    dg = linear_back(dout, g, "mlp.fc2")
    dc = linear_back(ref.gelu_backward(f1, dg, "none"), c, "mlp.fc1")
    dh_norm, grads["ln2.weight"], grads["ln2.bias"] = ref.layer_norm_backward(dc, h, p["ln2.weight"], mu2, r2)
    dh_ += dh_norm
    do = heads(linear_back(dh_, o, "attn.w_o"))
    dprobs = do @ v.transpose(0, 1, 3, 2)
    dv = probs.transpose(0, 1, 3, 2) @ do
    dscores = ref.softmax_backward(probs, dprobs, -1) * scale
    dq, dk = dscores @ k, dscores.transpose(0, 1, 3, 2) @ q
    da = sum(linear_back(merge(dz), a, f"attn.w_{n}") for dz, n in ((dq, "q"), (dk, "k"), (dv, "v")))
    dx_norm, grads["ln1.weight"], grads["ln1.bias"] = ref.layer_norm_backward(da, x, p["ln1.weight"], mu1, r1)
    return out, dh_ + dx_norm, grads


def _inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    dout = rng.standard_normal((B, T, D)).astype(np.float32)
    return x, dout


def worker(side):
    """Time one side's forward + backward (best of 7); print {"seconds": ...}."""
    import torch

    # minitensor's sides use PyTorch only to make the shared weights: with one thread it
    # starts no OpenMP threads to spin beside our kernels.
    torch.set_num_threads(2 if side == "PyTorch eager" else 1)
    ours, theirs = make_models()
    x, dout = _inputs()
    counted = {}
    if side == "PyTorch eager":
        tx = torch.from_numpy(x).requires_grad_()
        tdout, tmask = torch.from_numpy(dout), torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)

        def step():
            theirs.zero_grad()
            tx.grad = None
            theirs(tx, tmask).backward(tdout)

        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as flops:  # one step, before the timed ones
            step()
        counted = {"torch_flops": flops.get_total_flops()}
    elif side == "hand-written NumPy":
        def step():
            handwritten(ours, x, dout)
    else:
        mt.set_backend(side.split("(")[1].rstrip(")"))

        def step():
            xt = mt.tensor(x, requires_grad=True)
            ours.zero_grad()
            ours(xt, is_causal=True).backward(dout)
    print(json.dumps({"seconds": best_seconds(step, repeats=7, warmup=2), **counted}))


def _agree():
    """minitensor (numba) and the hand-written block give the same output and dx (float32)."""
    import torch

    torch.set_num_threads(1)
    ours, _ = make_models()
    x, dout = _inputs()
    with mt.use_backend("numba"):
        xt = mt.tensor(x, requires_grad=True)
        y = ours(xt, is_causal=True)
        y.backward(dout)
    out, dx, _ = handwritten(ours, x, dout)
    return np.allclose(y.data, out, atol=1e-3) and np.allclose(xt.grad, dx, atol=1e-3)


def main(rounds=ROUNDS):
    from .common import describe_peaks, floor, machine_peaks

    peaks = machine_peaks()
    runs, torch_flops = {side: [] for side in SIDES}, []
    for _ in range(rounds):
        for side in SIDES:
            result = run_worker("block", side)
            runs[side].append(result["seconds"])
            torch_flops += [result["torch_flops"]] if "torch_flops" in result else []
    base = runs["PyTorch eager"]

    print(f"Pre-norm block forward + backward, B={B} T={T} d={D} heads={HEADS}, causal, float32; "
          f"each side in its own process, {rounds} alternating rounds; ratios of the median times, with their range")
    print(describe_machine())
    print(describe_peaks(peaks))
    print(f"  the block's products: {block_multiply_adds():,} multiply-adds counted from the shapes (without "
          f"the attention's: {block_multiply_adds(attention=False):,}; PyTorch's FlopCounterMode, which does not "
          f"see its fused CPU attention kernel: {statistics.median(torch_flops) / 2:,.0f}); "
          f"{floor(block_multiply_adds(), statistics.median(base), peaks)} of PyTorch's time")
    for side in SIDES:
        compared = compare_rounds(runs[side], base)
        target = f" (target <= {TARGET}x)" if side == "minitensor (numba)" else ""
        print(f"  {side:24}{compared['ours'] * 1e3:8.1f} ms   {ratio_and_range(compared)} of PyTorch{target}")
    engine_cost = ratio(statistics.median(runs["minitensor (numba)"]), statistics.median(runs["hand-written NumPy"]))
    print(f"  minitensor (numba) / hand-written NumPy: {engine_cost}")
    print(f"  minitensor and the hand-written block agree: {_agree()}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2])
    else:
        main()
