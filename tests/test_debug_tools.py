"""The debugging tools on the mistakes a student makes: each case of issue 14, as a student meets it."""

import io
import sys

import numpy as np
import pytest
from wrong_ops import ScaleWithWrongWeightGrad

from minitensor.gradcheck import UncheckedLeavesWarning

import minitensor as mt
from minitensor import autograd
from models.attention import causal_mask
from models.transformer import Block


def causal_scores(T=4, d=8, seed=0):
    rng = np.random.default_rng(seed)
    q = mt.tensor(rng.standard_normal((T, d)), requires_grad=True)
    k = mt.tensor(rng.standard_normal((T, d)), requires_grad=True)
    return q, k, (q @ k.T) / np.sqrt(d)


# -- 1. anomaly mode on the chapter's attention ------------------------------------------


def test_detect_anomaly_passes_the_textbook_causal_mask():
    q, k, scores = causal_scores()
    with mt.debug.detect_anomaly():
        q, k, scores = causal_scores()
        weights = scores.masked_fill(causal_mask(4), float("-inf")).softmax(axis=-1)
        (weights * weights).sum().backward()
    assert np.isfinite(q.grad).all() and np.isfinite(k.grad).all()


def test_detect_anomaly_still_catches_the_nan_after_the_mask():
    """The entropy of masked attention weights: log(0) = -inf is allowed, 0 * -inf = NaN is not."""
    with pytest.raises(mt.debug.AnomalyError, match=r"Mul's forward produced nan \(6 of 16 values\)"):
        with mt.debug.detect_anomaly(), np.errstate(divide="ignore", invalid="ignore"):
            _, _, scores = causal_scores()
            weights = scores.masked_fill(causal_mask(4), float("-inf")).softmax(axis=-1)
            entropy = -(weights * weights.log()).sum()  # the NaN is made here
            entropy.backward()


def test_detect_anomaly_around_backward_alone_names_the_forward_op():
    x = mt.tensor([1.0, -1.0, 2.0], requires_grad=True)
    with np.errstate(invalid="ignore"):
        y = x.log()  # the NaN is made here, outside the tool
    z = y.exp()
    with pytest.raises(mt.debug.AnomalyError) as info:
        with mt.debug.detect_anomaly(), np.errstate(invalid="ignore"):
            z.sum().backward()
    message = str(info.value)
    assert "ran outside detect_anomaly" in message
    assert "its input came from Log" in message and "y = x.log()  # the NaN is made here" in message
    assert "with mt.debug.detect_anomaly():" in message  # how to wrap the forward


# -- 2. where each node was made, without asking -----------------------------------------


def test_backward_steps_show_where_each_node_was_made_without_a_tool_around_the_forward():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 3).exp()  # made with no tool active
    steps = list(mt.debug.backward_steps(y.sum()))
    assert all("test_debug_tools.py:" in step.created_at for step in steps)
    assert steps[1].created_at.endswith("y = (x * 3).exp()  # made with no tool active")


def test_a_node_made_inside_the_library_shows_the_lines_that_led_there():
    mt.manual_seed(0)
    block = Block(8, 2)
    x = mt.randn(1, 3, 8)
    out = block(x)  # the user's line
    norms = [node for node in autograd.topological_order(out.grad_fn) if node.name == "LayerNormFunction"]
    sites = [mt.debug.created_at(node) for node in norms]
    assert len(sites) == 2 and sites[0] != sites[1]  # ln2 and ln1 told apart
    for site in sites:  # the layer norm is minitensor's own (mt.nn.LayerNorm): the model's line comes first
        assert site.startswith("models/transformer.py:")
        assert site.endswith("out = block(x)  # the user's line")
    attention = next(node for node in autograd.topological_order(out.grad_fn) if node.name == "Attention")
    site = mt.debug.created_at(attention)  # made inside models/: the library's lines, then the user's
    assert site.startswith("models/attention.py:") and "models/transformer.py:" in site
    assert site.endswith("out = block(x)  # the user's line")


def test_trace_shows_sites_for_a_forward_run_before_the_tool(capsys):
    x = mt.tensor(np.ones(3), requires_grad=True)
    loss = (x * 2).sum()  # the line the trace should show
    with mt.debug.trace():
        loss.backward()
    out = capsys.readouterr().out
    assert "loss = (x * 2).sum()  # the line the trace should show" in out


# -- 3. names students already gave --------------------------------------------------------


def block_and_input():
    mt.manual_seed(0)
    block = Block(8, 2)
    x = mt.randn(2, 3, 8, requires_grad=True)
    x.name = "x"
    return block, x


def test_viz_text_names_parameters_and_shows_a_leaf_used_twice_once():
    block, x = block_and_input()
    loss = block(x).sum()
    tree = mt.viz.text(loss)
    assert "leaf 'block.ln1.weight' (8,)" in tree and "leaf 'block.attn.w_q.weight' (8, 8)" in tree
    assert "leaf (8,)" not in tree  # every parameter has its name
    lines = [line.strip() for line in tree.splitlines()]
    assert lines.count("leaf 'x' (2, 3, 8)") == 1 and "(leaf 'x' (2, 3, 8), see above)" in lines


def test_trace_and_backward_steps_name_the_parameters():
    block, x = block_and_input()
    out = io.StringIO()
    with mt.debug.trace(file=out):
        block(x).sum().backward()
    assert "to block.ln2.bias" in out.getvalue() and "to block.mlp.fc1.weight" in out.getvalue()
    labels = {label for step in mt.debug.backward_steps(block(x).sum()) for label in step.input_labels}
    assert {"block.ln1.weight", "block.attn.w_o.bias", "x"} <= labels


# -- 4. checks that cover what the student wrote -------------------------------------------


class Scale(mt.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = mt.nn.Parameter(np.array([0.5, -1.0, 2.0], dtype=np.float32))

    def forward(self, x):
        return ScaleWithWrongWeightGrad.apply(x, self.w)


def test_gradcheck_checks_every_leaf_when_asked_and_names_the_parameter():
    scale = Scale()
    x = mt.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    with pytest.warns(UncheckedLeavesWarning, match=r"1 leaf that require grad.*scale\.w.*leaves=\"all\""):
        assert mt.gradcheck(lambda x: scale(x), x)  # the inputs alone are right, and it says what it left out
    with pytest.raises(mt.GradcheckError, match=r"gradcheck failed for scale\.w of <lambda> \(shape \(3,\)\)"):
        mt.gradcheck(lambda x: scale(x), x, leaves="all")
    assert scale.w.dtype == np.float32 and scale.w.grad is None  # restored after the check


class ScaleTheOtherWay(Scale):
    def forward(self, x):
        return ScaleWithWrongWeightGrad.apply(self.w, x)  # now x gets the wrong gradient


def test_gradcheck_report_lists_the_leaves_it_did_not_check():
    scale = ScaleTheOtherWay()
    x = mt.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    with pytest.raises(mt.GradcheckError, match=r"gradcheck failed for input 0(.|\n)*not checked .*leaves=\"all\".*: scale\.w"):
        mt.gradcheck(lambda x: scale(x), x)
    assert scale.w.grad is None  # gradcheck leaves no gradient in the model


def test_break_on_an_unknown_op_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"no op is called 'softmax'\. Did you mean 'Softmax'\?.*LayerNormFunction"):
        mt.debug.break_on(op="softmax")


def test_break_on_says_when_it_never_stopped(monkeypatch):
    monkeypatch.setattr(sys, "breakpointhook", lambda *a, **k: pytest.fail("must not stop"))
    out = io.StringIO()
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    with mt.debug.break_on(op="Softmax", file=out):
        (x * 2).sum().backward()
    assert "break_on(op='Softmax'): no node's backward matched, so it never stopped" in out.getvalue()


class CubeReturningATensor(mt.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return mt.tensor(grad * 3 * x**2)  # a Tensor, as a PyTorch user would write it


def test_a_custom_backward_may_return_a_tensor():
    x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    CubeReturningATensor.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad, [3.0, 12.0])
    assert type(x.grad) is np.ndarray


class CubeReturningAList(CubeReturningATensor):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return list(grad * 3 * x**2)


def test_a_custom_backward_returning_something_else_is_named():
    x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(TypeError, match=r"CubeReturningAList.backward returned a list as the gradient of input 0.*\(2,\)"):
        CubeReturningAList.apply(x).sum().backward()


class CubeThatForgotToSave(mt.Function):
    @staticmethod
    def forward(ctx, x):
        return x**3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x**2


def test_forgetting_save_for_backward_names_the_op():
    x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"CubeThatForgotToSave.forward never called ctx.save_for_backward"):
        CubeThatForgotToSave.apply(x).sum().backward()


# -- 5. a graph picture that can be read ---------------------------------------------------


def test_draw_of_a_block_fits_a_notebook_and_says_what_it_folded():
    mt.manual_seed(0)
    block = Block(16, 4)
    x = mt.randn(2, 5, 16, requires_grad=True)
    loss = block(x, is_causal=True).sum()
    figure = mt.viz.draw(loss)
    width, height = figure.get_size_inches()
    assert width <= 10 and height <= 14
    ax = figure.axes[0]
    texts = [t.get_text() for t in ax.texts if t.get_text()]  # the boxes (arrows have no text)
    assert any(t.startswith("attn: MultiHeadAttention -> (2, 5, 16)") for t in texts)
    assert any(t.startswith("mlp: MLP") for t in texts) and len(texts) <= 12
    assert min(t.get_fontsize() for t in ax.texts) >= 8
    assert ax.get_title().startswith("folded into one box each: ln1, attn, ln2, mlp")
    unfolded = mt.viz.draw(loss, fold=False)
    assert sum(t.get_text().startswith("MatMul") for t in unfolded.axes[0].texts) == 6


# -- the engine without the tools ----------------------------------------------------------


def test_the_engine_runs_without_an_observer():
    autograd.set_observer(None)
    try:
        x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
        y = (x * x).sum()
        y.backward()
        assert y.grad_fn.site is None
    finally:
        autograd.set_observer(mt.debug.engine_observer)
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])


# -- the README's debugging snippet shows what it says ------------------------------------


def test_the_readme_debugging_snippet_prints_what_its_comments_say(capsys, tmp_path, monkeypatch):
    import pathlib
    import re

    readme = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "backward_steps" in b)
    claims = re.findall(r"# prints: (.*)", block)
    assert len(claims) >= 4
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed == [claim.rstrip() for claim in claims]


@pytest.mark.parametrize("how", ["softmax of -inf", "softmax with a mask", "attention with a mask"])
def test_detect_anomaly_reports_a_row_with_nothing_visible(how):
    """Issue 21, item 9: such a row gets zeros by minitensor's policy (torch.softmax gives NaN),
    which no NaN check can see; a mask that hides every key of a query is a bug to report."""
    from minitensor import F

    rng = np.random.default_rng(0)
    x = mt.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    hide_row_1 = np.zeros((3, 4), dtype=bool)
    hide_row_1[1] = True
    calls = {
        "softmax of -inf": lambda: x.masked_fill(hide_row_1, float("-inf")).softmax(axis=-1),
        "softmax with a mask": lambda: x.softmax(axis=-1, mask=hide_row_1),
        "attention with a mask": lambda: F.scaled_dot_product_attention(x, x, x, mask=hide_row_1[:, :3]),
    }
    weights = calls[how]()  # outside anomaly mode: the policy, zeros
    np.testing.assert_array_equal(weights.data[1], 0.0)
    with pytest.raises(mt.debug.AnomalyError, match=r"met 1 of 3 rows \(the first at index \(1,\)\) whose entries are all -inf or hidden"):
        with mt.debug.detect_anomaly():
            calls[how]()
    with mt.debug.detect_anomaly():  # a causal mask hides some keys of each query, never all: fine
        x.softmax(axis=-1, mask=causal_mask(3, 4))


# -- the layout: site recording below both gradcheck and the tools ------------------------


def _imports(path):
    """(module-level imports, imports inside a function) of a file, each as the module named
    (relative ones resolved inside minitensor)."""
    import ast

    tree = ast.parse(path.read_text())
    package = "minitensor" if path.parent.name == "minitensor" else f"minitensor.{path.parent.name}"
    top_level, inside = set(), set()

    def named(node):
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = package.rsplit(".", node.level - 1)[0] if node.level else ""
        module = ".".join(part for part in (base, node.module) if part)
        return [module] + [f"{module}.{alias.name}" for alias in node.names]

    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            top_level.update(named(node))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    inside.update(named(inner))
    return top_level, inside


def test_gradcheck_and_the_debugging_tools_import_one_way():
    """sites.py (where each node was made, the leaves' names) imports neither gradcheck nor mt.debug;
    gradcheck imports sites, not mt.debug (importing any of minitensor.debug runs its __init__,
    which imports op_check, which imports gradcheck); no import hides inside a function."""
    import pathlib

    package = pathlib.Path(mt.__file__).resolve().parent
    sites, sites_inside = _imports(package / "sites.py")
    gradcheck, gradcheck_inside = _imports(package / "gradcheck.py")
    assert not [m for m in sites | sites_inside if m.startswith(("minitensor.debug", "minitensor.gradcheck"))]
    assert "minitensor.sites" in gradcheck
    assert not [m for m in gradcheck | gradcheck_inside if m.startswith("minitensor.debug")]
    op_check, _ = _imports(package / "debug" / "op_check.py")
    assert "minitensor.gradcheck.measure" in op_check  # the one central-difference measurement
    for path in [package / "sites.py", package / "gradcheck.py", *sorted((package / "debug").glob("*.py"))]:
        # two exceptions: torch (a test dependency, not a runtime one), imported by compare_torch.py
        # only when compare is given a torch module as the reference; and the observer's text of a
        # node (show.py), loaded when pdb first shows one, so that `import minitensor` stays light
        lazy = {"observer.py": {"minitensor.debug.show", "minitensor.debug.show.describe"}}.get(path.name, set())
        inside = {m for m in _imports(path)[1] if m.split(".")[0] != "torch" and m not in lazy}
        assert not inside, f"{path.name} imports inside a function"
