"""The graded tests of the demo tasks: each runs the demo of the copy under test as a script in
quick mode (once per demo) and asks for one of its checks; each check is a test with its points.

The demo is the one found through `import demos`, so grading a copy runs the copy's demo. Checks
that time something are left out: a grade must not depend on the load of the grading machine.
"""

import functools
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import pytest

import demos
from demos._record import read_record

# demo task: (demo, the labels of its graded checks, as the demo prints them in quick mode)
DEMO_TASKS = {
    "demo_attention_cost": ("attention_cost", [
        "the weights' count is 2 m k n summed over the layer's products",
        "the attention count is 2 m k n summed over Q K^T and A V",
        "the two counts are equal at T = 6d, as the seed says",
    ]),
    "demo_scaling": ("scaling", [
        "d_k = 16: the seed's numbers within sampling noise",
        "d_k = 64: the seed's numbers within sampling noise",
        "d_k = 256: the seed's numbers within sampling noise",
        "d_k = 1024: the seed's numbers within sampling noise",
        "unscaled, the largest weight grows with d_k",
        "unscaled, the Jacobian norm shrinks with d_k",
    ]),
    "demo_stacking": ("stacking", [
        "two stacked attention layers equal one layer with weights alpha* and value map Wv*",
        "alpha* is still a row-stochastic mixing matrix",
    ]),
    "demo_multihead": ("multihead", [
        "1,088 parameters, as the count by hand says",
    ]),
    "demo_causal_self_attention": ("causal_self_attention", [
        "each row of A sums to 1",
        "the first token attends only to itself",
        "weights above the diagonal are exactly 0",
        "each output is the A-weighted mixture of value rows",
        "the fused, tiled kernel gives the same outputs",
    ]),
    "demo_kv_cache": ("kv_cache", [
        "2.6 MB per token",
        "86 GB at 32,768 tokens",
        "grouped-query with 8 KV heads for 64 query heads: 8x less",
    ]),
}
SECONDS = 240  # one quick demo run; the grader's per-test limit also applies to the first test of a demo
UNSOLVED = re.compile(r"NotImplementedError: (Task \w+: .*)")

# The suite tests the demos themselves in test_demos.py; these run when `grade` runs them.
pytestmark = pytest.mark.skipif(not os.environ.get("MINITENSOR_GRADER_RESULTS"),
                                reason="graded through `python -m minitensor.homework grade`")


@functools.cache
def run_demo(name):
    """(checks {label: passed}, what the demo printed to stderr) of demos/NAME.py in quick mode."""
    script = pathlib.Path(demos.__file__).resolve().parent / f"{name}.py"
    with tempfile.TemporaryDirectory() as scratch:
        record = pathlib.Path(scratch) / "record.jsonl"
        env = dict(os.environ, MINITENSOR_QUICK="1", MINITENSOR_DEMO_RECORD=str(record), MPLBACKEND="Agg")
        env["PYTHONPATH"] = os.pathsep.join([str(script.parent.parent), env.get("PYTHONPATH", "")])
        try:
            run = subprocess.run([sys.executable, str(script)], env=env, cwd=scratch, capture_output=True, text=True, timeout=SECONDS)
            stderr = run.stderr
        except subprocess.TimeoutExpired:
            stderr = f"the demo did not finish within {SECONDS} s"
        return read_record(record)[0], stderr


def _cases():
    for task, (name, labels) in DEMO_TASKS.items():
        for label in labels:
            yield pytest.param(name, label, marks=pytest.mark.task(task), id=f"{name}: {label}")


@pytest.mark.parametrize("name, label", list(_cases()))
def test_demo_check(name, label):
    checks, stderr = run_demo(name)
    if label in checks:
        assert checks[label], f"the demo printed '{label}: False'"
        return
    unsolved = UNSOLVED.findall(stderr)
    if unsolved:  # a task's stub stopped the demo: say which (the grader reports 'blocked by' from this)
        raise NotImplementedError(unsolved[-1])
    last = [line for line in stderr.strip().splitlines() if line.strip()][-1:] or ["(no error message)"]
    pytest.fail(f"demos/{name}.py stopped before printing '{label}': {last[0]}", pytrace=False)
