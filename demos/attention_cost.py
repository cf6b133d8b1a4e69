"""Where a transformer layer spends its forward operations (seed 000, "A complete model and its
size" and the cost discussion around it).

Per layer and sequence, the projections and the MLP cost 24 T d^2 operations (4 d x d
projections: 8 T d^2; an MLP of width 4d: 16 T d^2), the attention scores and the weighted sum
4 T^2 d. They are equal at T = 6d: below that the weights dominate, above it attention does.
We time both parts with minitensor as T grows (d = 64, so the formula's crossover is T = 384)
and compare with the formula.
"""

# %%
import numpy as np

import minitensor as mt
from benchmarks.common import best_seconds

from ._common import Checks, plt, result, save

D = 64


def main(quick=False):
    checks = Checks()
    rng = np.random.default_rng(0)
    weights = {name: mt.tensor(rng.standard_normal(shape).astype(np.float32) / 8)
               for name, shape in [("q", (D, D)), ("k", (D, D)), ("v", (D, D)), ("o", (D, D)), ("fc1", (D, 4 * D)), ("fc2", (4 * D, D))]}
    lengths = [64, 128, 256, 512, 1024] if quick else [32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072]
    weight_ms, attention_ms = [], []
    with mt.no_grad(), mt.use_backend("numpy"):
        for T in lengths:
            x = mt.tensor(rng.standard_normal((T, D)).astype(np.float32))
            q, k, v = x @ weights["q"], x @ weights["k"], x @ weights["v"]

            def projections_and_mlp():  # 24 T d^2
                for name in ("q", "k", "v", "o"):
                    x @ weights[name]
                (x @ weights["fc1"]) @ weights["fc2"]

            def scores_and_sum():  # 4 T^2 d (the softmax between them is not counted)
                (q @ k.T) @ v

            weight_ms.append(best_seconds(projections_and_mlp) * 1e3)
            attention_ms.append(best_seconds(scores_and_sum) * 1e3)
    print(f"{'T':>6}{'24Td^2 part':>14}{'4T^2d part':>14}{'measured ratio':>16}{'formula ratio T/6d':>20}")
    for T, a, b in zip(lengths, weight_ms, attention_ms):
        print(f"{T:>6}{a:>12.3f}ms{b:>12.3f}ms{b / a:>16.2f}{T / (6 * D):>20.2f}")
    crossing = next((T for T, a, b in zip(lengths, weight_ms, attention_ms) if b > a), None)
    print(f"formula crossover: T = 6d = {6 * D}; measured: attention first costs more at T = {crossing}")
    checks("the formula's two parts are equal at T = 6d", 24 * (6 * D) * D**2 == 4 * (6 * D) ** 2 * D)
    ratios = np.array(attention_ms) / np.array(weight_ms)
    checks("attention's share grows with T (as T / 6d)", ratios[-1] > 4 * ratios[0])
    if not quick:
        checks("the measured crossover is near T = 6d (within a factor of 2)", crossing is not None and 3 * D <= crossing <= 12 * D)

    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    ax.plot(lengths, weight_ms, "o-", label="projections + MLP (24 T d^2)")
    ax.plot(lengths, attention_ms, "s-", label="scores + weighted sum (4 T^2 d)")
    lengths_a = np.array(lengths, dtype=float)
    rate = (24 * lengths_a * D**2 / np.array(weight_ms)).max()  # the best measured operations per ms
    ax.plot(lengths, 24 * lengths_a * D**2 / rate, "--", color="tab:blue", alpha=0.5, label="formula at that rate")
    ax.plot(lengths, 4 * lengths_a**2 * D / rate, "--", color="tab:orange", alpha=0.5)
    ax.axvline(6 * D, color="gray", ls=":", label="T = 6d")
    ax.set(xscale="log", yscale="log", xlabel="sequence length T", ylabel="ms (forward, one layer, d = 64)", title="forward cost: weights vs attention")
    ax.legend(fontsize=8)
    return result(checks, save(fig, "attention_cost"))


if __name__ == "__main__":
    main()
