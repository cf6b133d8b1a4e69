"""The feedback of a failed model task names the first node of the student's graph that departs
(tests/_graph_feedback.py), and states no value of the reference's.

The six bugs are planted on the student's side only: a student whose calls run with the bug patched
in (the teacher's side, in the same process, runs without it), so every graded test of the task runs
as under `grade`, its answers through the worker's wire format. One bug is then planted in a real
graded copy and graded in worker processes."""

import io
import re

import numpy as np
import pytest

import _graph_feedback
import models.attention
import models.transformer
import test_homework_tasks as graded
import homework
from minitensor import ops
from homework.student import InProcessStudent


def _softmax_without_subtraction(ctx, grad):
    (y,) = ctx.saved_tensors
    return y * grad


def _layer_norm_without_mean(ctx, grad):
    x, weight, mean, rstd = ctx.saved_tensors
    x_hat = (x - mean) * rstd
    rows = tuple(range(grad.ndim - 1))
    return grad * weight * rstd, (grad * x_hat).sum(axis=rows), grad.sum(axis=rows)


def _bias_averaged(ctx, grad):
    bias_shape = ctx.input_shapes[1]
    added = tuple(range(grad.ndim - len(bias_shape)))
    return grad, (grad.mean(axis=added) if added else grad)


def _shifted_causal_mask(T, S=None):
    S = T if S is None else S
    return np.triu(np.ones((T, S), dtype=bool), k=S - T + 2)


def _merged_in_the_wrong_order(x):
    B, heads, T, d_head = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, heads * d_head)


def _cache_that_forgets(self, k, v):
    self.k, self.v = k.detach(), v.detach()
    return self.k, self.v


def _residual_after_the_norm(self, x, mask=None, is_causal=False, cache=None, context=None):
    normed = self.ln1(x)
    x = normed + self.attn(normed, mask=mask, is_causal=is_causal, cache=cache)
    return x + self.mlp(self.ln2(x))


PLANTED = {  # bug: (where, name, replacement)
    "softmax_backward": (ops.Softmax, "backward", staticmethod(_softmax_without_subtraction)),
    "layer_norm_backward": (ops.LayerNormFunction, "backward", staticmethod(_layer_norm_without_mean)),
    "bias_gradient": (ops.Add, "backward", staticmethod(_bias_averaged)),
    "mask_shift": (models.attention, "causal_mask", _shifted_causal_mask),
    "merge_heads": (models.attention, "merge_heads", _merged_in_the_wrong_order),
    "residual": (models.transformer.Block, "forward", _residual_after_the_norm),
    "kv_cache": (models.attention.KVCache, "update", _cache_that_forgets),  # the seventh: a task of its own
}
EXPECTED = {  # bug: (graded test, the feedback's node)
    "softmax_backward": ("test_pre_norm_block_matches_pytorchs", "Softmax in attn: the culprit, its backward"),
    "layer_norm_backward": ("test_pre_norm_block_matches_pytorchs",
                            "LayerNormFunction in ln2: the culprit, its backward"),
    "bias_gradient": ("test_pre_norm_block_matches_pytorchs", "Add in mlp.fc2: the culprit, its backward"),
    "mask_shift": ("test_masked_attention_matches_torch",
                   "Softmax (in the model's own forward): the culprit, its forward"),
    "merge_heads": ("test_multihead_attention_matches_torch", "Transpose (in the model's own forward): the culprit, its forward"),
    "residual": ("test_pre_norm_block_matches_pytorchs",
                 "Add (in the model's own forward): the culprit, it reads an input that differs"),
    "kv_cache": ("test_kv_cache_generation_equals_full_attention",
                 "MatMul (in the model's own forward): the culprit, it reads an input that differs"),
}


class PlantedStudent(InProcessStudent):
    """This repository's code with one bug patched in while the student's side runs."""

    def __init__(self, bug):
        super().__init__()
        self.bug = bug

    def call(self, probe, *args, **kwargs):
        where, name, replacement = PLANTED[self.bug]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(where, name, replacement)
            return super().call(probe, *args, **kwargs)


def _decimal_numbers(text):
    return re.findall(r"\d+\.\d+|\d+e[-+]?\d+", text)


def _leaked(text, arrays):
    """The numbers of the text that are values of `arrays` as a report prints them (3, 4 or 6
    significant digits, or repr); an integer of the text (an index, a shape, a percentage) is not
    taken for a value that rounds to it."""
    numbers = set(re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", text))
    leaked = []
    for array in arrays:
        for value in np.asarray(array, dtype=np.float64).ravel():
            if np.isfinite(value) and value != round(value):
                printed = {f"{value:.3g}", f"{value:.4g}", f"{value:.6g}", repr(value)}
                leaked += [p for p in printed if ("." in p or "e" in p) and p in numbers]
    return leaked


@pytest.mark.parametrize("bug", PLANTED)
def test_a_planted_bug_gets_feedback_that_names_the_node_and_leaks_no_reference_value(bug, monkeypatch):
    test_name, node = EXPECTED[bug]
    references = []
    judged = _graph_feedback.judge

    def keeping_the_reference(theirs, ours, **options):  # the teacher's graph: every value of it
        for r in ours:
            references.extend(a for a in [r["output"], *r["inputs"], r["grad_output"], *(r["grad_inputs"] or [])]
                              if a is not None)
        return judged(theirs, ours, **options)

    expected_values = graded.assert_matches
    monkeypatch.setattr(graded, "rng", lambda: np.random.default_rng(0))  # 3 heads: one head merges in any order
    monkeypatch.setattr(_graph_feedback, "judge", keeping_the_reference)
    monkeypatch.setattr(graded, "assert_matches", lambda answer, expected, *tolerances: (
        references.extend(expected.values()), expected_values(answer, expected, *tolerances)))
    with pytest.raises(AssertionError) as failure:
        getattr(graded, test_name)(PlantedStudent(bug))
    text = str(failure.value)
    assert f"The first node of your graph that departs from the reference graph: the first node that departs is {node}" \
        in text, text
    assert re.search(r"departs by \d+% in norm; worst element \[|yours has shape \(", text), text
    assert references and not _leaked(text, references), _leaked(text, references)
    assert not _decimal_numbers(text), text


def test_a_correct_model_gets_no_graph_feedback():
    assert _graph_feedback.graph_feedback(InProcessStudent(), graded.probe_graph, "block", 4, 2,
                                          _block_weights(4), [np.ones((1, 3, 4))], np.ones((1, 3, 4))) is None


def _block_weights(d):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = graded._torch_block(d, 2)
    for parameter in theirs.parameters():
        parameter.data = torch.randn_like(parameter) * 0.3
    return graded._block_weights(theirs)


def test_when_the_graphs_cannot_be_compared_the_tests_own_message_stays():
    class Failing(InProcessStudent):
        def call(self, probe, *args, **kwargs):
            raise RuntimeError("the student's side raised")

    with pytest.raises(AssertionError, match="^out: the original message$"):
        with _graph_feedback.names_the_node(Failing(), graded.probe_graph, "block", 4, 2, {}, [], None):
            raise AssertionError("out: the original message")


def test_a_graded_copy_with_the_residual_after_the_norm_is_told_which_node(tmp_path, worker_python):
    copy = homework.strip(tmp_path / "student", keep=homework.TASK_NAMES)
    path = copy / "models" / "transformer.py"
    text = path.read_text()
    solved = "x = x + self.drop(self.attn(self.ln1(x), mask=mask, is_causal=is_causal, cache=cache))"
    assert solved in text
    path.write_text(text.replace(solved, "normed = self.ln1(x)\n            x = normed + self.drop(self.attn("
                                         "normed, mask=mask, is_causal=is_causal, cache=cache))"))
    ok, rows = homework.grade(copy, task="pre_norm_block", stream=(stream := io.StringIO()), verbose=True,
                               python=worker_python)
    table = stream.getvalue()
    assert not ok and rows[0].status == "failed", table
    assert ("the first node that departs is Add (in the model's own forward): the culprit, it reads an input "
            "that differs from the reference node's") in table, table
    assert "it reads the wrong input: its input 0 comes from node 0 (LayerNormFunction in ln1, which agrees)" in table
    assert "made at: models/transformer.py" in table
    assert not _decimal_numbers(table.split("The first node of your graph")[1]), table


def test_a_grader_without_the_teachers_minitensor_keeps_the_tests_own_message(monkeypatch):
    monkeypatch.setattr(_graph_feedback, "judge", None)  # as in the Gradescope bundle's grader
    with pytest.raises(AssertionError, match="^out: the original message$"):
        with _graph_feedback.names_the_node(PlantedStudent("residual"), graded.probe_graph, "block", 4, 2, {}, [],
                                            None):
            raise AssertionError("out: the original message")
