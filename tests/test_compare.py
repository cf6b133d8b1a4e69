"""mt.debug.compare: six bugs planted in a pre-norm block (tests/compare_blocks.py), each named as
the first culprit, op and module, in float32 and float64, on the numpy and numba backends, and no
culprit on the correct block; the judging on plain records (the grader's way); the report's words."""

import os
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitensor as mt
from compare_blocks import BUGS, EXPECTED, StudentBlock, blocks
from minitensor.debug.compare_graphs import difference, judge
from minitensor.debug.compare_record import plain, record
from minitensor.debug.compare_report import Comparison

BACKENDS = ["numpy", "numba"]
DTYPES = [np.float32, np.float64]


def _found(comparison):
    culprit = comparison.culprit
    return None if culprit is None else (culprit.op, culprit.module, culprit.where.split()[0])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bug", BUGS)
def test_each_planted_bug_is_named_first_with_its_module(bug, dtype, backend):
    student, reference, x = blocks((bug,), dtype)
    with mt.use_backend(backend):
        comparison = mt.debug.compare(student, reference, x)
    assert _found(comparison) == EXPECTED[bug], str(comparison)
    assert comparison.first is comparison.culprit
    assert len(comparison.culprits) == 1, str(comparison)  # every other departing node only inherited it
    assert "compare_blocks.py" in comparison.culprit.made_at  # the student's line
    departing = [r for r in comparison.rows if r.verdict in ("culprit", "inherited")]
    assert all(r.verdict == "inherited" for r in departing if r is not comparison.culprit)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_correct_block_has_no_culprit(dtype, backend):
    student, reference, x = blocks((), dtype)
    with mt.use_backend(backend):
        comparison = mt.debug.compare(student, reference, x)
    assert comparison.culprit is None and comparison.first is None, str(comparison)
    assert all(r.verdict == "agrees" for r in comparison.rows)
    assert str(comparison) == f"compare ({np.dtype(dtype)}): every node agrees with the reference"


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), T=st.integers(2, 6), bug=st.sampled_from(BUGS + (None,)))
def test_any_seed_and_length_name_the_same_culprit(seed, T, bug):
    mt.manual_seed(seed)
    student, reference = StudentBlock(8, 2, (bug,) if bug else ()), StudentBlock(8, 2)
    x = np.random.default_rng(seed).standard_normal((2, T, 8)).astype(np.float32)
    comparison = mt.debug.compare(student, reference, x, seed=seed)
    assert _found(comparison) == (EXPECTED[bug] if bug else None), str(comparison)


def test_two_bugs_are_two_culprits_each_judged_on_its_own():
    student, reference, x = blocks(("mask_shift", "bias_gradient"), np.float64)
    comparison = mt.debug.compare(student, reference, x)
    found = [(r.op, r.module, r.where) for r in comparison.culprits]
    assert found == [("Softmax", "attn", "forward"), ("Add", "mlp.fc2", "backward")], str(comparison)


@pytest.mark.parametrize("bug", BUGS)
def test_plain_records_name_the_same_culprit(bug):
    """The grader's way: records sent as plain arrays, no op run again."""
    student, reference, x = blocks((bug,), np.float64)
    theirs, _, upstream, _ = record(student, [x])
    reference.load_state_dict(student.state_dict())
    ours, _, _, _ = record(reference, [x], upstream)
    rows = judge(plain(theirs), plain(ours), rerun=False)
    comparison = Comparison(rows)
    assert _found(comparison) == EXPECTED[bug]
    # Without re-running an op, a node whose gradient departs is the culprit only when the
    # gradient it received agrees: every node upstream of the bug merely inherits it.
    assert len(comparison.culprits) == 1, str(comparison)
    departing = [r for r in comparison.rows if r.verdict in ("culprit", "inherited")]
    assert all(r.verdict == "inherited" for r in departing if r is not comparison.culprit), str(comparison)


def test_the_upstream_gradient_is_random_seeded_and_not_all_ones():
    student, _, x = blocks((), np.float32)
    _, _, first, _ = record(student, [x], seed=3)
    _, _, again, _ = record(student, [x], seed=3)
    _, _, other, _ = record(student, [x], seed=4)
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    assert np.unique(first).size == first.size  # no two equal elements, so never all ones


def test_the_reference_gets_the_models_weights_by_name():
    student, reference, x = blocks(("residual",), np.float32)
    assert not np.array_equal(student.ln1.weight.data, reference.ln1.weight.data)  # drawn separately
    mt.debug.compare(student, reference, x)
    assert np.array_equal(student.ln1.weight.data, reference.ln1.weight.data)


def test_the_report_names_the_node_the_line_and_the_worst_element():
    student, reference, x = blocks(("softmax_backward",), np.float32)
    text = str(mt.debug.compare(student, reference, x))
    first = text.splitlines()[0]
    assert first.startswith("compare (float32): the first node that departs is Softmax in attn: the culprit")
    assert "its backward departs on the reference's inputs and upstream gradient" in first
    assert "made at: tests/compare_blocks.py" in text and "softmax.apply(scores" in text
    assert "shapes:  (2, 2, 5, 5) -> (2, 2, 5, 5)" in text
    assert "worst element of its gradient to input 0 [" in text and "yours" in text and "reference" in text
    assert "Softmax            attn           culprit" in text  # the table, culprit first


def test_a_wrong_input_is_named_with_where_it_came_from():
    student, reference, x = blocks(("residual",), np.float32)
    text = str(mt.debug.compare(student, reference, x))
    assert ("it reads the wrong input: its input 0 comes from node 0 (LayerNormFunction in ln1, which agrees), "
            "and differs from the reference's input 0") in text


def test_outputs_of_different_shapes_are_refused_with_both_shapes():
    student = StudentBlock(8, 2)
    with pytest.raises(ValueError, match=r"compare: the model's output has shape \(2, 5, 8\), the reference's "
                                         r"\(2, 5, 16\)"):
        mt.debug.compare(student, lambda x: mt.cat([x, x], axis=-1), np.zeros((2, 5, 8), np.float32))


def test_ops_composed_differently_align_by_op_and_an_unmatched_node_can_be_the_culprit():
    x = np.random.default_rng(0).standard_normal((3, 4))
    same = mt.debug.compare(lambda t: (t * 2).tanh(), lambda t: (t + t).tanh(), x)
    assert [(r.op, r.verdict) for r in same.rows] == [("Mul", "no counterpart"), ("Tanh", "agrees")]
    assert same.culprit is None
    wrong = mt.debug.compare(lambda t: (t * 3).tanh(), lambda t: (t + t).tanh(), x)
    assert [(r.op, r.verdict) for r in wrong.rows] == [("Mul", "culprit"), ("Tanh", "inherited")], str(wrong)
    assert "the culprit, the reference has no node like it" in str(wrong)


def test_a_model_that_returns_no_tensor_is_refused():
    with pytest.raises(TypeError, match="compare: the model returned tuple; it must return one Tensor"):
        mt.debug.compare(lambda t: (t, t), lambda t: t, np.zeros(3))


def test_difference_uses_the_float64_noise_and_the_dtypes_rounding():
    reference = np.array([1.0, 2.0], np.float32)
    assert difference(reference + np.float32(1e-6), reference) is None  # within 64 units of rounding
    worst = difference(reference + np.array([0, 1e-3], np.float32), reference)
    assert worst[0] == (1,) and worst[3] == pytest.approx(1e-3, rel=1e-3)
    assert difference(reference + np.float32(1e-3), reference, noise=1e-3) is None  # the reference's own error
    assert difference(np.array([np.nan]), np.array([1.0])) is not None
    assert difference(np.array([np.nan]), np.array([np.nan])) is None


def test_a_difference_far_beyond_the_references_noise_is_found():
    """The noise margin is 8 times the reference's own float64 error (NOISE_MARGIN), plus 64 units
    of rounding times the largest magnitude (negligible in float64 here: 3e-14)."""
    worst = difference(np.array([1.0, 2.5]), np.array([1.0, 2.0]), noise=1e-3)
    assert worst is not None and worst[0] == (1,) and worst[3] == 0.5
    assert worst[4] == pytest.approx(8e-3, rel=1e-9)  # the tolerance it was held to
    assert difference(np.array([1.0, 2.009]), np.array([1.0, 2.0]), noise=1e-3) is not None  # 9 x the noise
    assert difference(np.array([1.0, 2.007]), np.array([1.0, 2.0]), noise=1e-3) is None  # 7 x the noise


def test_the_repro_script_runs_the_culprit_alone_and_shows_it_departs(tmp_path):
    import subprocess
    import sys

    student, reference, x = blocks(("softmax_backward",), np.float64)
    script = mt.debug.compare(student, reference, x).repro(tmp_path / "repro.py")
    lines = script.read_text().splitlines()
    assert len(lines) <= 15 and lines[3] == "from compare_blocks import Softmax as Op"
    tests = str(pathlib.Path(__file__).resolve().parent)
    root = str(pathlib.Path(__file__).resolve().parent.parent)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": os.pathsep.join([tests, root]), "PATH": os.environ.get("PATH", "")})
    assert run.returncode == 0, run.stderr
    forward, backward = run.stdout.splitlines()
    assert forward == "forward: largest |yours - reference| 0.0"  # its forward is right ...
    assert float(backward.split()[-1]) > 0.1  # ... its backward departs, alone


def test_a_repro_needs_a_culprit():
    student, reference, x = blocks((), np.float32)
    with pytest.raises(ValueError, match="compare: no culprit with a counterpart in the reference to reproduce"):
        mt.debug.compare(student, reference, x).repro("never.py")


def test_a_pytorch_reference_of_other_paths_is_refused_naming_them():
    """A PyTorch module is a reference (tests/test_compare_torch.py), but only one with the model's paths."""
    torch = pytest.importorskip("torch")
    student, _, x = blocks((), np.float32)
    with pytest.raises(ValueError, match=r"compare: the model and the PyTorch module \(Linear\) must have the same "
                                         r"parameter paths; only in the model: attn\.w_k\.bias, .* only in the PyTorch "
                                         r"module: bias, weight"):
        mt.debug.compare(student, torch.nn.Linear(8, 8), x)


def test_a_wrong_backward_in_an_op_class_of_the_students_own_naming_is_the_culprit():
    """A blind review: a Softmax subclass named BadSoftmax with a wrong backward has no counterpart in
    the reference; compare named an innocent Transpose (inherited) and no culprit at all."""
    from minitensor.ops.softmax import Softmax

    class BadSoftmax(Softmax):
        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return y * grad  # wrong on purpose

    class Net(mt.nn.Module):
        def __init__(self, bad=False):
            super().__init__()
            self.fc1, self.ln, self.fc2 = mt.nn.Linear(4, 8), mt.nn.LayerNorm(8), mt.nn.Linear(8, 3)
            self.bad = bad

        def forward(self, x):
            h = mt.nn.functional.gelu(self.ln(self.fc1(x)))
            return (BadSoftmax if self.bad else Softmax).apply(self.fc2(h), axis=-1) * 2.0

    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for backend in ("numpy", "numba"):
        with mt.use_backend(backend):
            result = mt.debug.compare(Net(bad=True), Net(), x)
            assert [row.op for row in result.culprits] == ["BadSoftmax"], str(result)
            assert "gradient it passes back departs" in str(result).splitlines()[0]
            assert mt.debug.compare(Net(), Net(), x).culprit is None
