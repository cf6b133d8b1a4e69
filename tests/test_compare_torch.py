"""mt.debug.compare against a PyTorch module with the same module paths (tests/compare_torch_blocks.py):
the weights copied by name, each planted bug of tests/compare_blocks.py found at the right module
(and, where the boundary names it, the right op) in float32 and float64, no culprit on the correct
block, and clear errors when the paths or shapes do not match."""

import subprocess
import sys

import numpy as np
import pytest

import minitensor as mt
from compare_blocks import BUGS, blocks

torch = pytest.importorskip("torch")

from compare_torch_blocks import TorchBlock, encoder_layers, torch_block  # noqa: E402 (it imports torch)

DTYPES = [np.float32, np.float64]

# Where each bug is found: (module, forward or backward, the op named at the module's boundary)
EXPECTED = {
    "softmax_backward": ("attn", "backward", "Attention"),  # no op of attn's own code touches its input
    "layer_norm_backward": ("ln2", "backward", "LayerNormFunction"),
    "mask_shift": ("attn", "forward", "Reshape"),  # the op that hands w_o a value departing from torch's
    "merge_heads": ("attn", "forward", "Reshape"),
    "residual": ("", "forward", "Add"),
    "bias_gradient": ("mlp.fc2", "backward", "Add"),
}


def _found(comparison):
    culprit = comparison.culprit
    return None if culprit is None else (culprit.module, culprit.where, culprit.op)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bug", BUGS)
def test_each_planted_bug_is_found_at_its_module(bug, dtype):
    student, _, x = blocks((bug,), dtype)
    comparison = mt.debug.compare(student, torch_block(), x)
    assert _found(comparison) == EXPECTED[bug], str(comparison)
    assert len(comparison.culprits) == 1, str(comparison)  # the modules around it only carry its error
    departing = [r for r in comparison.rows if r.verdict != "agrees"]
    assert all(r.verdict == "inherited" for r in departing if r is not comparison.culprit), str(comparison)
    assert comparison.culprit.worst[3] > 1e-3  # a real departure, not rounding


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_correct_block_is_clean(dtype):
    student, _, x = blocks((), dtype)
    comparison = mt.debug.compare(student, torch_block(), x)
    assert comparison.culprit is None and comparison.first is None, str(comparison)
    assert [r.module for r in comparison.rows] == ["", "ln1", "attn", "attn.w_q", "attn.w_k", "attn.w_v",
                                                   "attn.w_o", "ln2", "mlp", "mlp.fc1", "mlp.fc2"]
    assert str(comparison) == f"compare ({np.dtype(dtype)}): every node agrees with the reference"


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_bug_is_found_the_line_named_with_the_residual_bug(dtype):
    student, _, x = blocks(("residual",), dtype)
    culprit = mt.debug.compare(student, torch_block(), x).culprit
    assert "h = normed + self.attn(normed)" in culprit.made_at  # the Add that hands ln2 a wrong value


@pytest.mark.parametrize("dtype", DTYPES)
def test_against_torchs_transformer_encoder_layer(dtype):
    """The issue's usual case: nn.TransformerEncoderLayer (dropout on: compare runs both in eval mode)."""
    student, reference, x = encoder_layers(dtype)
    clean = mt.debug.compare(student, reference, x)
    assert clean.first is None, str(clean)
    # torch's attention uses out_proj's weights without calling it: self_attn is judged as a whole
    assert [r.module for r in clean.rows] == ["", "norm1", "self_attn", "norm2", "linear1", "linear2"]
    assert reference.training  # the user's module is left as it was
    student, reference, x = encoder_layers(dtype, residual_bug=True)
    comparison = mt.debug.compare(student, reference, x)
    assert _found(comparison) == ("", "forward", "Add"), str(comparison)
    assert "x = (h if self.residual_bug else x) + self.self_attn(h, h, h)" in comparison.culprit.made_at
    assert len(comparison.culprits) == 1


def test_the_weights_are_copied_by_name_from_the_torch_module():
    student, _, x = blocks((), np.float32)
    reference = torch_block()
    mt.debug.compare(student, reference, x)
    assert np.array_equal(student.mlp.fc2.bias.data, reference.mlp.fc2.bias.detach().numpy())
    assert student.attn.w_q.weight.dtype == np.float32


def test_without_copying_the_report_names_the_weights_that_differ():
    student, _, x = blocks((), np.float64)
    reference = torch_block()
    student.load_state_dict({name: p.detach().numpy().astype(np.float64) for name, p in reference.named_parameters()})
    student.ln1.weight.data = student.ln1.weight.data + 0.5
    comparison = mt.debug.compare(student, reference, x, copy_weights=False)
    assert comparison.differing_weights == ["ln1.weight"]
    assert "weights that differ from the PyTorch module's (not copied, copy_weights=False): ln1.weight" in str(comparison)
    assert _found(comparison) == ("ln1", "forward", "LayerNormFunction"), str(comparison)


def test_the_report_names_the_culprits_line_and_worst_element():
    student, _, x = blocks(("bias_gradient",), np.float64)
    text = str(mt.debug.compare(student, torch_block(), x))
    assert text.startswith("compare (float64): the first node that departs is Add in mlp.fc2: the culprit")
    assert "compare_blocks.py" in text and "return self.add.apply(x @ self.weight.T, self.bias)" in text
    assert "worst element of its gradient to bias" in text
    assert "mlp            inherited       its gradient to fc2.bias" in text
    assert "the gradient reaching its output" not in text  # nothing before fc2 departs: the bias gradient is a leaf's


def test_modules_that_backward_reaches_after_the_culprit_inherit_its_gradient():
    student, _, x = blocks(("layer_norm_backward",), np.float64)
    comparison = mt.debug.compare(student, torch_block(), x)
    rows = {r.module: r for r in comparison.rows}
    assert rows["ln2"].verdict == "culprit"
    for path in ("attn", "attn.w_o", "ln1"):  # before ln2 in forward, so after it in backward
        assert (rows[path].verdict, rows[path].quantity) == ("inherited", "the gradient reaching its output")
    assert rows["mlp"].verdict == rows["mlp.fc2"].verdict == "agrees"  # after ln2 in forward: untouched


def test_paths_that_do_not_match_are_refused_naming_them():
    student, _, x = blocks((), np.float32)
    reference = torch_block()
    reference.mlp.fc3 = reference.mlp.fc2  # a path the student's block lacks
    del reference.mlp.fc2
    before = student.mlp.fc2.weight.data.copy()
    with pytest.raises(ValueError, match=r"same parameter paths; only in the model: mlp\.fc2\.bias, mlp\.fc2\.weight; "
                                         r"only in the PyTorch module: mlp\.fc3\.bias, mlp\.fc3\.weight"):
        mt.debug.compare(student, reference, x)
    assert np.array_equal(student.mlp.fc2.weight.data, before)  # refused before anything was copied


def test_shapes_that_do_not_match_are_refused_naming_them():
    student, _, x = blocks((), np.float32)
    reference = TorchBlock(8, 2)
    reference.mlp.fc2 = torch.nn.Linear(32, 4)
    with pytest.raises(ValueError, match=r"mlp\.fc2\.bias \(8,\) vs \(4,\)"):
        mt.debug.compare(student, reference, x)


def test_a_function_model_is_refused_against_a_torch_module():
    with pytest.raises(TypeError, match="must be a minitensor Module, got function"):
        mt.debug.compare(lambda x: x, torch_block(), np.zeros((2, 5, 8), np.float32))


def test_torch_is_imported_only_for_a_torch_reference():
    code = ("import sys, numpy as np, minitensor as mt; from minitensor import nn; "
            "net = nn.Linear(3, 2); x = np.ones((2, 3), np.float32); "
            "mt.debug.compare(net, nn.Linear(3, 2), x); print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
