"""Models nobody here tuned, timed against PyTorch eager (issue 36): `python -m benchmarks user_models`.

- A GPT as a user writes it from the README's porting table (nanoGPT's model.py, shortened): a fused
  qkv `Linear(C, 3C)` split by slicing, heads by view + transpose, `scaled_dot_product_attention` with
  `is_causal=True`, tied embeddings, GELU MLP, AdamW with two parameter groups, clipping at norm 1;
  4 layers, width 128, 4 heads, context 128, a 65-character vocabulary, batch 16.
- An MLP classifier: 784 -> 256 -> 256 -> 10 with ReLU, cross entropy, Adam, batch 128.

The model code is one text for both libraries (`build_gpt(lib)` with lib = torch or minitensor):
only the public names of each are used, as a user porting from PyTorch would. Each side runs in a
process of its own (PyTorch's OpenMP threads spin after its calls and slow whatever shares their
process), the sides take turns round after round, and each ratio is the median of the per-round
ratios, printed with its range over the rounds.
"""

import importlib.util
import json
import os
import statistics
import sys
import time

import numpy as np

from .common import floor, run_worker

ROUNDS = int(os.environ.get("MINITENSOR_BENCH_ROUNDS", "3"))
STEPS = 10  # timed steps per process; the process's time is their median
GPT = dict(vocab=65, context=128, width=128, heads=4, layers=4, batch=16)
MLP = dict(inputs=784, hidden=256, classes=10, batch=128)
TARGETS = {("gpt", "numba"): 1.2, ("gpt", "numpy"): 2.0, ("mlp", "numba"): 1.2, ("mlp", "numpy"): 1.5}


def build_gpt(lib, vocab, context, width, heads, layers):
    """nanoGPT's model in torch (lib=torch) or minitensor (lib=minitensor): the same text."""
    nn, F = lib.nn, lib.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(width, 3 * width)
            self.c_proj = nn.Linear(width, width)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(x).split(width, dim=2)
            q = q.view(B, T, heads, C // heads).transpose(1, 2)
            k = k.view(B, T, heads, C // heads).transpose(1, 2)
            v = v.view(B, T, heads, C // heads).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(width), CausalSelfAttention()
            self.ln_2, self.fc = nn.LayerNorm(width), nn.Linear(width, 4 * width)
            self.proj = nn.Linear(4 * width, width)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.proj(F.gelu(self.fc(self.ln_2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(width)
            self.lm_head = nn.Linear(width, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied

        def forward(self, idx, targets):
            B, T = idx.shape
            x = self.wte(idx) + self.wpe(lib.arange(0, T))
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    return Model()


def build_mlp(lib, inputs, hidden, classes):
    nn = lib.nn
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, classes))


def gpt_multiply_adds():
    """Multiply-adds of one GPT training step's products, from the shapes: per layer the qkv,
    output and MLP projections and the attention's scores and weighted sum (the full T x T, as a
    dense kernel computes them), the tied head; three times over (forward, and a gradient for each
    operand in backward)."""
    tokens = GPT["batch"] * GPT["context"]
    width = GPT["width"]
    per_layer = tokens * width * (3 * width + width + 8 * width) + 2 * GPT["batch"] * GPT["context"] ** 2 * width
    return 3 * (GPT["layers"] * per_layer + tokens * width * GPT["vocab"])


def mlp_multiply_adds():
    sizes = [MLP["inputs"], MLP["hidden"], MLP["hidden"], MLP["classes"]]
    return 3 * MLP["batch"] * sum(a * b for a, b in zip(sizes, sizes[1:]))


MULTIPLY_ADDS = {"gpt": gpt_multiply_adds, "mlp": mlp_multiply_adds}


def _step(lib, model_name):
    """One training step of `model_name` on lib (torch or minitensor), and its batches."""
    rng = np.random.default_rng(0)
    is_torch = lib.__name__ == "torch"
    lib.manual_seed(0)
    if is_torch:
        lib.set_num_threads(2)
    as_tensor = lib.from_numpy if is_torch else lib.tensor
    if model_name == "gpt":
        config = {k: v for k, v in GPT.items() if k != "batch"}
        model = build_gpt(lib, **config)
        decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
        optimizer = lib.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                     {"params": no_decay, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.95))
        shape = (GPT["batch"], GPT["context"])
        batches = [(as_tensor(rng.integers(0, GPT["vocab"], shape)), as_tensor(rng.integers(0, GPT["vocab"], shape)))
                   for _ in range(4)]

        def loss_of(x, y):
            return model(x, y)
    else:
        config = {k: v for k, v in MLP.items() if k != "batch"}
        model = build_mlp(lib, **config)
        optimizer = lib.optim.Adam(model.parameters(), lr=1e-3)
        batches = [(as_tensor(rng.standard_normal((MLP["batch"], MLP["inputs"])).astype(np.float32)),
                    as_tensor(rng.integers(0, MLP["classes"], MLP["batch"]))) for _ in range(4)]
        cross_entropy = lib.nn.functional.cross_entropy

        def loss_of(x, y):
            return cross_entropy(model(x), y)

    clip = lib.nn.utils.clip_grad_norm_ if is_torch else lib.optim.clip_grad_norm_

    def step(x, y):
        loss = loss_of(x, y)
        optimizer.zero_grad()
        loss.backward()
        clip(model.parameters(), 1.0)
        optimizer.step()
        return loss.item()

    return step, batches


def worker(side):
    """side = "<model>-<library>", e.g. "gpt-numba": print {"seconds": median seconds per step}."""
    model_name, library = side.split("-")
    if library == "torch":
        import torch as lib
    else:
        import minitensor as lib

        lib.set_backend(library)
    step, batches = _step(lib, model_name)
    for x, y in batches[:3]:  # warm-up: Numba's kernels load, the allocators settle
        step(x, y)
    times = []
    for i in range(STEPS):
        start = time.perf_counter()
        step(*batches[i % len(batches)])
        times.append(time.perf_counter() - start)
    print(json.dumps({"seconds": statistics.median(times)}))


def main(rounds=ROUNDS):
    from .common import describe_machine, machine_peaks

    print(f"Models as users write them: GPT {GPT}, MLP {MLP}; each side in its own process, {rounds} "
          f"alternating rounds, the median of per-round ratios [range over rounds]")
    print(describe_machine())
    peaks = machine_peaks()
    have_torch = importlib.util.find_spec("torch") is not None
    if not have_torch:
        print("  PyTorch is not installed (the test extra, which `make test` installs): minitensor's times only")
    for model_name in ("gpt", "mlp"):
        sides = ("numba", "numpy", "torch") if have_torch else ("numba", "numpy")
        results = {side: [] for side in sides}
        for _ in range(rounds):
            for side in sides:
                results[side].append(run_worker("user_models", f"{model_name}-{side}")["seconds"])
        if not have_torch:
            for side in sides:
                seconds = statistics.median(results[side])
                print(f"  {model_name.upper()} minitensor ({side}): {seconds * 1e3:7.1f} ms per step")
            continue
        torch_seconds = statistics.median(results["torch"])
        print(f"  {model_name.upper()}: PyTorch eager (2 threads) {torch_seconds * 1e3:.1f} ms per step")
        for side in ("numba", "numpy"):
            ratios = [ours / theirs for ours, theirs in zip(results[side], results["torch"])]
            print(f"    minitensor ({side}): {statistics.median(results[side]) * 1e3:7.1f} ms per step, "
                  f"{statistics.median(ratios):.2f}x PyTorch [{min(ratios):.2f}-{max(ratios):.2f}] "
                  f"(target <= {TARGETS[model_name, side]}x; "
                  f"{floor(MULTIPLY_ADDS[model_name](), torch_seconds, peaks)})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2])
    else:
        main()
