"""A user's training loop, timed against PyTorch eager (issue 12): `python -m benchmarks train`.

- The adding-problem transformer (the seed's model, 56,897 parameters: input projection,
  readout token, learned positions, one pre-norm block of width 64 with 4 heads, final layer
  norm, linear head; batch 64, T = 100 + 1, Adam, clipping at norm 1): the demo's model
  (models.transformer.ReadoutTransformer) and the demo's step (models.training.train_step), per
  training step, on the numba and numpy backends against PyTorch eager with 2 threads; and the
  peak memory of a step against PyTorch's.
- Beside each ratio, issue 25's target and the floor: the step's multiply-adds (counted from
  the shapes; PyTorch's FlopCounterMode printed beside the count) at this machine's peak rate,
  measured on a large square matmul (benchmarks/common.py), as a fraction of PyTorch's step.
- The GRU step of the same demo (hidden 64, default backend) with one busy process beside
  it, against its time on the otherwise idle machine.
- The transformer's step beside a busy process, against its idle time (no target: it
  shows the BLAS threads giving way, see minitensor/backends/blas_threads.py).
- The user-level masked softmax, `x.softmax(axis=-1, mask=m).sum().backward()` on
  (16, 4, 256, 256), numba against the numpy backend.
- The step's matrix products alone (recorded from one numba step, replayed with their
  layouts) on NumPy's BLAS and on PyTorch's: the part of the step's ratio that is the BLAS.

Fairness: PyTorch's OpenMP threads keep spinning after each call and slow whatever runs
next in the same process, so every side runs in a process of its own; the sides take turns,
round after round; each ratio is that of the two sides' median times (the times printed beside it),
with its range over the rounds.
Timings on a shared machine are noisy: rerun on a quiet one before trusting a digit.
"""

import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from . import overhead
from .common import compare_rounds, ratio_and_range, run_worker

BATCH, LENGTH, WIDTH, HEADS = 64, 100, 64, 4
ROUNDS = int(os.environ.get("MINITENSOR_BENCH_ROUNDS", "5"))
STEPS = 15  # timed steps per process (the median of them is the process's time per step)
SOFTMAX_SHAPE = (16, 4, 256, 256)
TARGETS = {"numba": 1.0, "numpy": 1.5, "softmax": 0.5}  # issue 25: each ratio at most this


def step_multiply_adds(attention=True):
    """Multiply-adds of one training step's matrix products, counted from the shapes: the
    forward's, then two products in backward for each (a gradient for each operand), except
    that the input x needs none. Layer norms, GELU, softmax, Adam: no products, not counted.
    attention=False leaves out the scores and the weighted sum (the part PyTorch's
    FlopCounterMode does not see: it has no formula for the fused CPU attention kernel)."""
    tokens = BATCH * (LENGTH + 1)  # the readout token included
    forward = {
        "input projection (2 -> d)": BATCH * LENGTH * 2 * WIDTH,
        "q, k, v and output projections": 4 * tokens * WIDTH * WIDTH,
        "scores q k^T and weights v (every head)": 2 * BATCH * (LENGTH + 1) ** 2 * WIDTH if attention else 0,
        "MLP d -> 4d -> d": 2 * tokens * WIDTH * 4 * WIDTH,
        "head (d -> 1) on the readout token": BATCH * WIDTH,
    }
    return sum(forward.values()) * 3 - forward["input projection (2 -> d)"]


def softmax_bytes():
    """Bytes the masked softmax's forward and backward must move at least: forward reads x and
    writes y; backward reads y and the upstream gradient and writes the input's gradient (float32;
    the (256, 256) mask is small)."""
    return 5 * int(np.prod(SOFTMAX_SHAPE)) * 4


# ---------------------------------------------------------------------------
# the two models: ours as the demo trains it, PyTorch's as a user writes it
# ---------------------------------------------------------------------------


def minitensor_model():
    """The seed's adding-problem transformer as the demo builds it (models.transformer's
    ReadoutTransformer) and one step of the loop the demo trains it with (models.training)."""
    import minitensor as mt
    from models.training import train_step
    from models.transformer import ReadoutTransformer

    mt.manual_seed(0)
    model = ReadoutTransformer(2, WIDTH, HEADS, 1, LENGTH)
    opt = mt.optim.Adam(model.parameters(), lr=3e-3)

    def loss_of(batch):
        x, y = batch
        return mt.F.mse_loss(model(mt.tensor(x)), mt.tensor(y))

    def step(x, y):
        return train_step(model, opt, loss_of, (x, y), max_norm=1.0).item()

    return model, step


def torch_model():
    import torch
    from torch import nn

    torch.set_num_threads(2)

    class AddingTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.project = nn.Linear(2, WIDTH)
            self.readout = nn.Parameter(torch.randn(1, 1, WIDTH) * 0.02)
            self.pos = nn.Embedding(LENGTH + 1, WIDTH)
            self.block = nn.TransformerEncoderLayer(  # the seed's pre-norm block
                WIDTH, HEADS, 4 * WIDTH, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
            )
            self.ln = nn.LayerNorm(WIDTH)
            self.head = nn.Linear(WIDTH, 1)

        def forward(self, x):
            h = torch.cat([self.readout.expand(x.shape[0], 1, WIDTH), self.project(x)], dim=1)
            h = self.block(h + self.pos.weight)
            return self.head(self.ln(h[:, 0]))

    torch.manual_seed(0)
    model = AddingTransformer()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def step(x, y):
        loss = nn.functional.mse_loss(model(torch.from_numpy(x)), torch.from_numpy(y))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    return model, step


def gru_step_fn():
    import minitensor as mt
    from models.recurrent import RecurrentRegressor

    mt.manual_seed(0)
    model = RecurrentRegressor(2, 64, "gru")
    opt = mt.optim.Adam(model.parameters(), lr=3e-3)

    def step(x, y):
        loss = mt.F.mse_loss(model(mt.tensor(x)), mt.tensor(y))
        opt.zero_grad()
        loss.backward()
        mt.optim.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return step


# ---------------------------------------------------------------------------
# one side, in its own process
# ---------------------------------------------------------------------------


def _median_step_seconds(step, batches, steps=STEPS, warmup=3):
    for x, y in batches[:warmup]:
        step(x, y)
    times = []
    for i in range(steps):
        x, y = batches[i % len(batches)]
        start = time.perf_counter()
        step(x, y)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _batches(n=8):
    """n batches shaped as the adding problem's, (B, T, 2) inputs and (B, 1) targets: the time of a
    step does not depend on the values, so they are uniform draws (values and targets in [0, 1]
    and [0, 2], as the task's)."""
    rng = np.random.default_rng(0)
    return [(rng.uniform(0, 1, (BATCH, LENGTH, 2)).astype(np.float32),
             rng.uniform(0, 2, (BATCH, 1)).astype(np.float32)) for _ in range(n)]


def worker(side):
    """Time one side; print one JSON line {"seconds": ..., "peak_mb": ...}."""
    from .common import peak_memory_mb

    if side == "softmax":
        return _softmax_worker()
    if side.startswith("products-"):
        return _products_worker(side.removeprefix("products-"))
    batches = _batches()
    counted = {}
    if side == "torch":
        from torch.utils.flop_counter import FlopCounterMode

        _, step = torch_model()
        with FlopCounterMode(display=False) as flops:  # one step, before the timed ones
            step(*batches[0])
        counted["torch_flops"] = flops.get_total_flops()
    elif side == "gru":
        step = gru_step_fn()
    else:
        import minitensor as mt

        mt.set_backend(side)
        _, step = minitensor_model()
    # Peak memory over the warm-up and the timed steps, above the memory the process held
    # before its first step: both sides' allocators keep what they once took (PyTorch's
    # caching allocator, NumPy's through malloc), so a peak after warm-up would miss it.
    timed = []
    steps = STEPS if side != "gru" else 5
    peak = peak_memory_mb(lambda: timed.append(_median_step_seconds(step, batches, steps=steps)))
    print(json.dumps({"seconds": timed[0], "peak_mb": peak, **counted}))


def _softmax_worker():
    import minitensor as mt

    rng = np.random.default_rng(0)
    x = rng.standard_normal(SOFTMAX_SHAPE).astype(np.float32)
    mask = np.triu(np.ones((256, 256), dtype=bool), k=1)  # a causal mask, broadcast over (16, 4)
    result = {}
    for backend in ("numba", "numpy"):
        with mt.use_backend(backend):
            def run():
                t = mt.tensor(x, requires_grad=True)
                t.softmax(axis=-1, mask=mask).sum().backward()

            result[backend] = _median_step_seconds(lambda x_, y_: run(), [(None, None)], steps=7, warmup=2)
    print(json.dumps(result))


def _step_products():
    """The matrix products of one numba training step of the model above, as (a, b) pairs
    kept with their memory layouts (a transposed operand stays transposed)."""
    import minitensor as mt
    from minitensor.backends import blas_threads

    mt.set_backend("numba")
    _, step = minitensor_model()
    batches = _batches(2)
    step(*batches[0])  # compiles
    recorded, product = [], blas_threads.product

    def recording(matmul, a, b):
        recorded.append((a.copy(order="K"), b.copy(order="K")))
        return product(matmul, a, b)

    blas_threads.product = recording
    try:
        step(*batches[1])
    finally:
        blas_threads.product = product
    return recorded


def _products_worker(blas):
    """Time the step's products alone, one after another as in the step: through NumPy's BLAS
    (with minitensor's thread choice) or through PyTorch's (2 threads). Prints {"seconds", "count"}.
    The products are recorded in a process of their own, so no Numba threads share PyTorch's."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "products.npz")
        subprocess.run([sys.executable, "-m", "benchmarks.train", "--record-products", path], check=True)
        with np.load(path) as saved:  # (np.save keeps a transposed operand's Fortran order)
            pairs = [(saved[f"a{i}"], saved[f"b{i}"]) for i in range(len(saved.files) // 2)]
    if blas == "torch":
        import torch

        torch.set_num_threads(2)
        pairs = [(torch.from_numpy(a), torch.from_numpy(b)) for a, b in pairs]

        def run():
            for a, b in pairs:
                torch.matmul(a, b)
    else:
        from minitensor.backends import blas_threads

        def run():
            for a, b in pairs:
                blas_threads.product(np.matmul, a, b)

    seconds = _median_step_seconds(lambda x_, y_: run(), [(None, None)], steps=10, warmup=3)
    print(json.dumps({"seconds": seconds, "count": len(pairs)}))


def _record_products(path):
    """Save the products of one numba step to `path` (.npz): a0, b0, a1, b1, ..."""
    pairs = _step_products()
    np.savez(path, **{f"{name}{i}": operand for i, pair in enumerate(pairs) for name, operand in zip("ab", pair)})


def _run_worker(side, env=None):
    return run_worker("train", side, env)


def _busy_process():
    """A process that keeps one core busy (what a student's laptop always has beside it)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def _idle_and_beside_a_busy_process(side, rounds):
    """Seconds per step of `side` on the idle machine and beside a busy process, taking
    turns; returns (idle, busy), the seconds of each round."""
    idle, busy = [], []
    for _ in range(max(3, rounds // 2)):
        idle.append(_run_worker(side)["seconds"])
        neighbour = _busy_process()
        try:
            busy.append(_run_worker(side)["seconds"])
        finally:
            neighbour.kill()
            neighbour.wait()
    return idle, busy


# ---------------------------------------------------------------------------
# the runner
# ---------------------------------------------------------------------------


def main(rounds=ROUNDS):
    from .common import bandwidth_floor, describe_machine, describe_peaks, floor, machine_peaks

    print(f"Adding-problem training step: batch {BATCH}, T = {LENGTH} + 1, d = {WIDTH}, {HEADS} heads; "
          f"each side in its own process, {rounds} alternating rounds; ratios of the median times, with their range")
    print(describe_machine())
    peaks = machine_peaks()
    print(describe_peaks(peaks))
    results = {side: [] for side in ("numba", "numpy", "torch")}
    for _ in range(rounds):
        for side in results:
            results[side].append(_run_worker(side))
    per_step = {side: statistics.median(r["seconds"] for r in runs) for side, runs in results.items()}
    multiply_adds = step_multiply_adds()
    torch_multiply_adds = statistics.median(r["torch_flops"] for r in results["torch"]) / 2
    print(f"  the step's products: {multiply_adds:,} multiply-adds counted from the shapes; without the "
          f"attention's {step_multiply_adds(attention=False):,}, where PyTorch's FlopCounterMode counts "
          f"{torch_multiply_adds:,.0f} (it does not see its fused CPU attention kernel)")
    for side in ("numba", "numpy"):
        compared = compare_rounds([r["seconds"] for r in results[side]], [r["seconds"] for r in results["torch"]])
        memory = (statistics.median(r["peak_mb"] for r in results[side])
                  / max(statistics.median(r["peak_mb"] for r in results["torch"]), 1e-9))
        print(f"  minitensor ({side}): {per_step[side] * 1e3:7.1f} ms per step, {ratio_and_range(compared)} "
              f"PyTorch eager (target <= {TARGETS[side]}x; {floor(multiply_adds, per_step['torch'], peaks)}); "
              f"peak memory "
              f"{statistics.median(r['peak_mb'] for r in results[side]):.1f} MB, {memory:.2f}x PyTorch's")
    print(f"  PyTorch eager (2 threads): {per_step['torch'] * 1e3:7.1f} ms per step, peak memory "
          f"{statistics.median(r['peak_mb'] for r in results['torch']):.1f} MB; the floor alone: "
          f"{2 * multiply_adds / (peaks['peak'] * 1e9) * 1e3:.1f} ms")

    idle, busy = _idle_and_beside_a_busy_process("gru", rounds)
    print(f"GRU training step (hidden 64, batch {BATCH}, T = {LENGTH}, default backend): idle "
          f"{statistics.median(idle) * 1e3:.1f} ms, with one busy process beside it "
          f"{statistics.median(busy) * 1e3:.1f} ms: {ratio_and_range(compare_rounds(busy, idle))}")

    # No target here: that the transformer's larger products, which use two BLAS threads on an
    # idle machine, fall back to one beside a busy process instead of stalling.
    idle, busy = _idle_and_beside_a_busy_process("numba", rounds)
    print(f"The transformer's step (numba) with one busy process beside it: {statistics.median(busy) * 1e3:.1f} ms, "
          f"{ratio_and_range(compare_rounds(busy, idle))} its idle time ({statistics.median(idle) * 1e3:.1f} ms)")

    # What the products alone cost on each side's BLAS: a floor under the step's ratio that
    # no change to minitensor's own code moves.
    products = [(_run_worker("products-numpy"), _run_worker("products-torch")) for _ in range(max(3, rounds // 2))]
    compared = compare_rounds([n["seconds"] for n, _ in products], [t["seconds"] for _, t in products])
    print(f"The step's {products[0][0]['count']} matrix products alone, one after another: NumPy's BLAS "
          f"{compared['ours'] * 1e3:.1f} ms, PyTorch's {compared['theirs'] * 1e3:.1f} ms: {ratio_and_range(compared)}")

    softmax = [_run_worker("softmax") for _ in range(max(3, rounds // 2))]
    compared = compare_rounds([r["numba"] for r in softmax], [r["numpy"] for r in softmax])
    numpy_softmax = compared["theirs"]
    print(f"User-level masked softmax forward + backward, {SOFTMAX_SHAPE} float32: numba "
          f"{compared['ours'] * 1e3:.1f} ms, numpy "
          f"{numpy_softmax * 1e3:.1f} ms: {ratio_and_range(compared)} "
          f"the numpy backend (target <= {TARGETS['softmax']}x; "
          f"{bandwidth_floor(softmax_bytes(), numpy_softmax, peaks)})")
    print(overhead.mix_line(overhead.measure()))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2])
    elif sys.argv[1:2] == ["--record-products"]:
        _record_products(sys.argv[2])
    else:
        main()
