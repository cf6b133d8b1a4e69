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


def test_benchmarks_help_lists_every_benchmark():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "user_models" in result.stdout and "overhead" in result.stdout


def test_user_models_without_pytorch_prints_minitensors_times_only(monkeypatch, capsys):
    """`make demo`'s environment has no PyTorch: the benchmark says so instead of a worker's traceback."""
    import importlib.util

    from benchmarks import common, user_models

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real_find_spec(name, *a))
    sides = []
    monkeypatch.setattr(user_models, "run_worker", lambda module, side: sides.append(side) or {"seconds": 0.01})
    monkeypatch.setattr(common, "machine_peaks", lambda: None)
    monkeypatch.setattr(common, "describe_machine", lambda: "a machine")
    user_models.main(rounds=1)
    out = capsys.readouterr().out
    assert "PyTorch is not installed" in out and "GPT minitensor (numba):    10.0 ms per step" in out
    assert not any(side.endswith("torch") for side in sides)
