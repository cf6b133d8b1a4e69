"""A benchmark line that prints two times and a ratio adds up: the ratio is the first time over
the second (`make bench` printed "10.80 us, PyTorch 13.13 us: 1.46x", a median of per-round
ratios beside the medians of the times), and the spread over the rounds is printed beside it."""

import re

from benchmarks import overhead
from benchmarks.common import compare_rounds, ratio_and_range

# Per-round seconds as a noisy machine gives them: one slow round on each side, in different rounds.
OURS = [10.8e-6, 10.8e-6, 20.0e-6]
THEIRS = [13.13e-6, 5.0e-6, 5.0e-6]


def test_the_ratio_is_that_of_the_medians_and_the_range_spans_the_rounds():
    compared = compare_rounds(OURS, THEIRS)
    assert compared["ours"] == 10.8e-6 and compared["theirs"] == 5.0e-6
    assert compared["ratio"] == 10.8e-6 / 5.0e-6
    assert compared["low"] == 10.8e-6 / 13.13e-6 and compared["high"] == 20.0e-6 / 5.0e-6
    assert ratio_and_range(compared) == "2.16x (rounds 0.82x to 4.00x)"


def test_the_overhead_line_adds_up(monkeypatch):
    label = overhead.ROWS[0][0]
    rounds = {"minitensor": iter(OURS), "engine-alone": iter(OURS), "torch": iter(THEIRS)}
    monkeypatch.setattr(overhead, "_have_torch", lambda: True)
    monkeypatch.setattr(overhead, "run_worker", lambda module, side: {row: 1.0 for row, _ in overhead.ROWS}
                        | {label: next(rounds[side])})
    line = overhead.mix_line(overhead.measure(rounds=3))
    ours, theirs, ratio = re.search(r"([\d.]+) us per op, PyTorch ([\d.]+) us: ([\d.]+)x", line).groups()
    assert abs(float(ours) / float(theirs) - float(ratio)) < 0.01, line
    assert "(rounds 0.82x to 4.00x)" in line
