"""The debugging tools, tested the way a person uses them, on an attention block."""

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from wrong_ops import WrongSoftmax

import minitensor as mt
from models.transformer import Block

ROOT = pathlib.Path(__file__).resolve().parent.parent


def small_block_loss():
    mt.manual_seed(0)
    block = Block(8, 2)
    block.to(np.float64)
    x = mt.tensor(np.random.default_rng(0).standard_normal((2, 4, 8)), requires_grad=True)
    return block, x


def test_backward_steps_leave_the_same_gradients():
    block, x = small_block_loss()
    block(x, is_causal=True).sum().backward()
    expected = {name: p.grad.copy() for name, p in block.named_parameters()}
    expected_x = x.grad.copy()
    block.zero_grad()
    x.grad = None
    loss = block(x, is_causal=True).sum()
    steps = list(mt.debug.backward_steps(loss))
    assert steps[0].op == "Sum" and steps[0].index == 0
    assert [s.index for s in steps] == list(range(len(steps)))
    assert any(s.op == "Attention" for s in steps) and any(s.op == "LayerNormFunction" for s in steps)
    attention = next(s for s in steps if s.op == "Attention")
    assert len(attention.saved) == 5 and len(attention.grad_inputs) == 3
    for name, p in block.named_parameters():
        np.testing.assert_array_equal(p.grad, expected[name], err_msg=name)
    np.testing.assert_array_equal(x.grad, expected_x)


def test_backward_steps_can_stop_early():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    steps = mt.debug.backward_steps((x.exp() * 3).sum())
    first = next(steps)
    assert first.op == "Sum" and x.grad is None  # nothing reached the leaf yet


def test_creation_sites_are_recorded_without_asking():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()  # the line the node should name
    assert mt.debug.created_at(y).endswith("y = x.exp()  # the line the node should name")
    assert "test_debug.py:" in mt.debug.created_at(y.grad_fn)
    with mt.no_grad():
        assert mt.debug.created_at(x * 2) is None  # no node, nothing to record


def test_trace_prints_a_line_per_node_and_every_broadcast_reduction(capsys):
    x = mt.tensor(np.ones((8, 16, 64)), requires_grad=True)
    bias = mt.tensor(np.ones(64), requires_grad=True)
    with mt.debug.trace():
        y = x + bias
        y.name = "shifted"
        y.sum().backward()
    out = capsys.readouterr().out
    assert "0 Sum" in out and "1 Add 'shifted'" in out and "y = x + bias" in out
    assert "input 1: summed axes (0, 1): (8, 16, 64) -> (64,)" in out


def test_break_on_stops_once_per_matching_node(monkeypatch):
    stops = []

    def fake_breakpoint(*args, **kwargs):  # what pdb would show: the caller's named locals
        frame = sys._getframe(1)
        stops.append({name: frame.f_locals[name] for name in ("op", "grad", "saved", "node", "made_at")})

    monkeypatch.setattr(sys, "breakpointhook", fake_breakpoint)
    block, x = small_block_loss()
    with mt.debug.break_on(op="LayerNormFunction"):
        block(x).sum().backward()
    assert len(stops) == 2  # ln1 and ln2, each once
    assert all(s["op"] == "LayerNormFunction" and s["grad"].shape == (2, 4, 8) for s in stops)
    assert all(len(s["saved"]) == 4 for s in stops)
    stops.clear()
    scores = mt.tensor(np.random.randn(3, 3), requires_grad=True)
    weights = scores.softmax()
    weights.name = "weights"
    with mt.debug.break_on(label="weights"):
        (weights * 2).sum().backward()
    assert [s["op"] for s in stops] == ["Softmax"]


def test_break_on_nan_and_grad_norm(monkeypatch):
    stops = []
    monkeypatch.setattr(sys, "breakpointhook", lambda *a, **k: stops.append(sys._getframe(1).f_locals["op"]))
    x = mt.tensor([0.0, 1.0], requires_grad=True)
    with mt.debug.break_on(nan=True), np.errstate(divide="ignore", invalid="ignore"):
        x.sqrt().sqrt().sum().backward()  # the outer sqrt's backward divides by 0: inf flows into the inner one
    assert stops == ["Sqrt", "Sqrt"]  # the outer one produces the inf, the inner one receives it
    stops.clear()
    with mt.debug.break_on(grad_norm_above=5.0):
        ((x * 10) ** 2).sum().backward()  # Pow produces 2 * 10x = [0, 20] (norm 20 > 5), which Mul receives
    assert stops == ["Pow", "Mul"]


def test_detect_anomaly_names_log_and_not_the_sum_after_it():
    x = mt.tensor([1.0, -1.0, 2.0], requires_grad=True)
    with pytest.raises(mt.debug.AnomalyError) as info:
        with mt.debug.detect_anomaly(), np.errstate(invalid="ignore"):
            y = x.log()
            y.sum().backward()
    message = str(info.value)
    assert message.startswith("detect_anomaly: Log's forward produced nan (1 of 3 values)")
    assert "shape (3,)" in message and "y = x.log()" in message and "Sum" not in message


def test_detect_anomaly_in_backward_names_the_op_that_made_the_first_inf():
    x = mt.tensor([0.0, 4.0], requires_grad=True)
    with pytest.raises(mt.debug.AnomalyError, match=r"Sqrt.backward produced inf .* input 0"):
        with mt.debug.detect_anomaly(), np.errstate(divide="ignore"):
            (x.sqrt() * 3).sum().backward()


def test_find_wrong_op_names_the_wrong_function_inside_a_block():
    block, x = small_block_loss()

    def fn(x):
        h = block(x, is_causal=True)
        return WrongSoftmax.apply(h).sum(axis=-1)

    with pytest.raises(mt.GradcheckError, match=r"mt.debug.find_wrong_op"):
        mt.gradcheck(fn, x)
    wrong = mt.debug.find_wrong_op(fn, x)
    assert wrong.op == "WrongSoftmax"
    assert "return WrongSoftmax.apply(h).sum(axis=-1)" in wrong.created_at
    assert "find_wrong_op" not in wrong.report  # the advice to call find_wrong_op is gradcheck's, not its own
    assert "worst element" in wrong.report and "analytic" in wrong.report
    assert mt.debug.find_wrong_op(lambda x: block(x, is_causal=True).sum(axis=-1), x) is None


def test_viz_text_dot_and_draw():
    w = mt.tensor(np.ones((3, 2)), requires_grad=True, name="w")
    x = mt.tensor(np.ones((4, 3)))
    h = (x @ w).relu()
    loss = (h * h).sum()
    loss.backward()
    tree = mt.viz.text(loss)
    assert tree.splitlines()[0] == "#1 Sum -> ()"
    assert "(#3, see above)" in tree and "leaf 'w' (3, 2) |grad|" in tree  # h is used twice
    dot = mt.viz.to_dot(loss)
    assert dot.startswith("digraph minitensor {") and dot.count("->") >= 4 and "shape=box" in dot
    figure = mt.viz.draw(loss)
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert any(t.startswith("MatMul") for t in texts) and any(t.startswith("leaf 'w'") for t in texts)


def _readme_block(starts_with):
    readme = (ROOT / "README.md").read_text()
    blocks = [body for lang, body in re.findall(r"^```(\w*)\n(.*?)^```$", readme, flags=re.S | re.M) if not lang]
    return next(b for b in blocks if b.startswith(starts_with))


def _pdb(script, commands, under_pdb=True):
    """Run script (under pdb, or as it is when it calls breakpoint() itself), typing commands."""
    result = subprocess.run([sys.executable] + (["-m", "pdb"] if under_pdb else []) + [script],
                            input="\n".join(commands) + "\n", capture_output=True, text=True, cwd=ROOT, timeout=120)
    # the prompt and what a command prints share a line; a path on this machine reads as the README's
    # (and pdb's `l` puts a tab after each line number: shown as the spaces it stands for)
    return result.stdout.replace("(Pdb) ", "\n").replace(str(ROOT), "/path/to/minitensor").expandtabs()


def _in_order(expected, lines):
    """Each expected line, in order, among lines."""
    at = 0
    for line in expected:
        while at < len(lines) and lines[at].rstrip() != line.rstrip():
            at += 1
        assert at < len(lines), f"not printed (in this order): {line!r}"
        at += 1


def test_the_readme_pdb_session():
    """Replay the README's session, read from the README: its commands, and every line it shows
    printed in that order, line numbers included, so the transcript cannot drift from the file."""
    if (ROOT / ".minitensor-student").exists():
        pytest.skip("a student copy: its README is README.student.md, which has no pdb session")
    block = _readme_block("$ python -m pdb examples/debug_attention.py").splitlines()
    commands = [line[len("(Pdb) "):] for line in block if line.startswith("(Pdb) ")]
    shown = [line for line in block[1:] if not line.startswith("(Pdb) ")]
    assert commands[:3] == ["until 11", "break mt.ops.Softmax.backward", "continue"] and "p ctx" in commands
    out = _pdb("examples/debug_attention.py", commands + ["quit"]).splitlines()
    _in_order(shown, out)
    lines = (ROOT / "minitensor" / "ops" / "softmax.py").read_text().splitlines()
    stop = next(i for i, line in enumerate(lines, 1) if "(y,) = ctx.saved_tensors" in line)
    assert f"softmax.py({stop})backward()" in "\n".join(shown)  # (and so printed by pdb, above)


BREAK_ON = """import numpy as np
import minitensor as mt
q = mt.tensor(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), requires_grad=True)
k = mt.tensor(np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]), requires_grad=True)
weights = (q @ k.T / np.sqrt(2)).softmax(axis=-1)
with mt.debug.break_on(op="Softmax"):
    (weights * 3).sum().backward()
"""


def test_the_readme_says_how_to_reach_p_y_from_break_on(tmp_path):
    """README: `step` twice enters the op's backward at its first line, `next` runs it, then `p y`."""
    readme = (ROOT / "README.md").read_text()
    if (ROOT / ".minitensor-student").exists():
        pytest.skip("a student copy: its README is README.student.md")
    assert "Type `step` twice to enter the op's\nown `backward`, at its first line; `next` runs that line" in readme
    script = tmp_path / "break_on.py"
    script.write_text(BREAK_ON)
    out = _pdb(str(script), ["p reason", "p sorted(saved)", "p module", "step", "step", "next", "p y.shape", "continue"], under_pdb=False)
    lines = out.splitlines()
    _in_order(["-> grad_inputs = node.function.backward(node, grad)", "None", "['y']", "None", "--Call--",
               "-> (y,) = ctx.saved_tensors", "(3, 3)"], lines)
