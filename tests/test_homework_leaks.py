"""The student copy states no answer in any form (issue 20, point 6).

tests/test_homework.py finds a solved line copied verbatim anywhere in the copy. These are the
paraphrases that test cannot see: the same answer in a docstring, a comment, another file's code,
a test's expectation or a figure. Each case names its task, the file of the copy where the answer
stood, and a pattern the answer matches. Each case checks both sides: the pattern is absent from
that file of a fresh copy, and present somewhere in the teacher's repository (in a solution
region, or a file kept out of the copy), so that no case is one that cannot fail."""

import importlib
import pathlib
import re
import subprocess
import sys

import pytest

import homework
from homework.strip import copy_environment

ROOT = pathlib.Path(__file__).resolve().parent.parent

CAUSAL_OFFSET = (r"j > i \(\+ S - T\)|j <= i \+ \(?T[kq] - T[kq]|k=(S - T|keys - queries|tk - tq|TK - tq) \+ 1"
                 r"|keys > queries \+ offset|j0 \+ b > i0 \+ a \+ causal_offset")
PRE_NORM_ATTENTION = r"x \+ (self\.drop\()?self\.(self_)?attn\((self\.ln1\(x\)|a, a, a)"
PRE_NORM_MLP = r"x \+ (self\.drop\()?self\.mlp\(self\.ln[23]\(x\)\)"
PRE_NORM_FORMULA = r"X \+ MHA\(LN\(X\)\)|x \+ MHA\(LN1\(x\)\)|x \+ (attention|MLP)\(LN\(x\)\)"
TANH_DERIVATIVE = r"1 - (tanh\(u\)|y) ?\*\* ?2|1 - y \* y|1 - y\^2"
SOFTMAX_BACKWARD = (r"y_i \(grad_i - sum_j grad_j y_j\)|y \* \(grad - \(grad \* y\)|the - sum\(grad \* y\) term"
                    r"|dS = P \* \(|dS \*= P|P \(dP - rowsum")
CENTRAL_DIFFERENCE = r"(?i)\) / \(2 \* (step|eps)\)"
MHA_PARAMETERS = r"1,088|4 d\^2 \+ 4 d|4 \* d \* d \+ 4 \* d|4 \* 16\*\*2 \+ 4 \* 16"
ONLINE_SOFTMAX = r"m_new|rescale = |\* rescale|running maximum, a\s+#? ?running normaliser and a running weighted sum"

# (task, file in the copy, a pattern the answer matches): every place the issue lists and every
# place a whole-copy read found.
CASES = [
    # issue 20's list
    ("tiled_attention", "demos/efficient_attention.py", ONLINE_SOFTMAX),
    ("multihead_split_merge", "benchmarks/block.py", r"reshape\(B, T, H, dh\)\.transpose\(0, 2, 1, 3\)"),
    ("matmul_backward", "benchmarks/block.py", r"def linear_back|\.T @ inp"),
    ("pre_norm_block", "benchmarks/block.py", r"h = x \+ o @"),
    ("tiled_attention", "benchmarks/block.py", r"dscores = ref\.softmax_backward"),
    ("pre_norm_block", "benchmarks/torch_reference.py", PRE_NORM_ATTENTION),
    ("pre_norm_block", "benchmarks/torch_reference.py", PRE_NORM_MLP),
    ("pre_norm_block", "benchmarks/torch_reference.py", PRE_NORM_FORMULA),
    ("attention_masks", "demos/_attention_memory.py", r"np\.triu\("),
    ("pre_norm_block", "models/transformer.py", PRE_NORM_FORMULA),
    ("pre_norm_block", "models/transformer.py", PRE_NORM_ATTENTION),
    ("pre_norm_block", "models/transformer.py", PRE_NORM_MLP),
    ("kv_cache", "models/attention.py", r"mt\.cat\(\[self\.[ckv], [ckv]\.detach\(\)\]"),
    ("demo_multihead", "models/attention.py", MHA_PARAMETERS),
    ("tiled_attention", "minitensor/ops/attention.py", SOFTMAX_BACKWARD),
    ("tiled_attention", "minitensor/ops/attention.py", r"D = \((dout|grad) \* out\)\.sum"),
    # found by reading a whole copy
    ("attention_masks", "models/attention.py", CAUSAL_OFFSET),
    ("attention_masks", "minitensor/backends/numba_backend/score_tiles.py", CAUSAL_OFFSET),
    ("attention_masks", "minitensor/ops/attention.py", CAUSAL_OFFSET),
    ("attention_masks", "tests/test_backends.py", CAUSAL_OFFSET),
    ("attention_masks", "tests/test_reference_kernels.py", CAUSAL_OFFSET),
    ("softmax_backward", "minitensor/ops/softmax.py", SOFTMAX_BACKWARD),
    ("softmax_backward", "minitensor/ops/softmax.py", r"delta_ij - y_j|exp\(y_j\) \* sum_i"),
    ("layer_norm_backward", "minitensor/ops/normalization.py", r"mean\(g \* x_hat\)|delta_ij - 1/d"),
    ("softmax_backward", "minitensor/ops/attention.py", SOFTMAX_BACKWARD),
    ("tiled_attention", "minitensor/ops/attention.py", r"rowsum\(dout \* out\)"),
    ("softmax_backward", "tests/test_debug.py", SOFTMAX_BACKWARD),
    ("elementwise_backward", "minitensor/autograd.py", r"(?m)return grad \* y\s*(#.*)?$"),
    ("elementwise_backward", "minitensor/ops/activations.py", TANH_DERIVATIVE),
    ("elementwise_backward", "tests/test_viz_html.py", TANH_DERIVATIVE),
    ("elementwise_backward", "tests/test_erf.py", TANH_DERIVATIVE),
    ("gradcheck_central_difference", "tests/test_erf.py", CENTRAL_DIFFERENCE),
    ("demo_multihead", "demos/model_size.py", MHA_PARAMETERS),
    ("demo_multihead", "tests/test_models.py", MHA_PARAMETERS),
    ("demo_attention_cost", "demos/attention_cost.py",
     r"\(T, D, 4 \* D\), \(T, 4 \* D, D\)|2 \* T \* d \* \(4 \* d\) \* 2"),
    ("demo_attention_cost", "demos/attention_cost.py", r"\(T, D, T\), \(T, T, D\)|2 \* T \* T \* d \* 2"),
    ("pre_norm_block", "examples/backward_page.py", PRE_NORM_FORMULA),
    ("tiled_attention", "benchmarks/block.py", r"dscores = ref\.softmax_backward"),
    ("gradcheck_central_difference", "minitensor/backward_page/check.py", CENTRAL_DIFFERENCE),
    ("softmax_backward", "minitensor/backward_page/collect.py", SOFTMAX_BACKWARD + r"|d_weights - \(grad_out \* out\)"),
    ("attention_masks", "minitensor/backward_page/collect.py", CAUSAL_OFFSET + r"|\[:, None\] \+ \(tk - tq\)"),
    ("softmax_backward", "minitensor/backward_page/page.js", SOFTMAX_BACKWARD),
    ("softmax_backward", "tests/test_homework.py", r"y \* \((dy|grad) - \((dy|grad) \* y\)\.sum"),
    ("attention_masks", "tests/test_homework_tasks.py", CAUSAL_OFFSET),
]


DEMO_TASK_FIGURES = [f"demos/figures/{task.removeprefix('demo_')}.png" for task in homework.TASK_NAMES
                     if task.startswith("demo_")]


def _case_id(case):
    return f"{case[0]}-{case[1]}"


@pytest.fixture(scope="module")
def copy(stripped_copy):
    return stripped_copy


def _tracked(root):
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout.decode()
    return [name for name in listed.split("\0") if name and (root / name).is_file()]


def _texts(root):
    """{path relative to root: text} of the text files git lists there (or every file)."""
    texts = {}
    for name in _tracked(root):
        try:
            texts[name] = (root / name).read_text()
        except (UnicodeDecodeError, OSError):
            continue  # figures
    return texts


@pytest.fixture(scope="module")
def teacher():
    return _texts(ROOT)


def _check(copy, teacher, task, name, pattern):
    where = [path for path, text in teacher.items() if re.search(pattern, text)]
    assert where, f"{task}: the pattern {pattern!r} is in no file of the teacher's repository: the case cannot fail"
    path = copy / name
    found = re.search(pattern, path.read_text()) if path.is_file() else None
    assert found is None, f"{task}: the student copy's {name} states the answer: {found.group(0)!r}"


@pytest.mark.parametrize("task, name, pattern", CASES, ids=[_case_id(case) for case in CASES])
def test_the_copy_does_not_paraphrase_an_answer(copy, teacher, task, name, pattern):
    assert task in homework.TASK_NAMES
    _check(copy, teacher, task, name, pattern)


def test_the_solved_demo_task_figures_are_not_in_the_copy(copy):
    assert len(DEMO_TASK_FIGURES) == 6
    for name in DEMO_TASK_FIGURES:
        assert (ROOT / name).is_file(), name  # the teacher keeps them
        assert homework.kept_out(name), name
        assert not (copy / name).exists(), name
    assert (copy / "demos" / "figures" / "efficient_attention.png").is_file()  # the other figures stay


def test_what_stays_out_of_the_copy_is_nothing_the_copy_needs(copy):
    kept = [name for name in _tracked(ROOT) if homework.kept_out(name)]
    assert {"benchmarks/block.py", "benchmarks/kernels.py", "tests/test_benchmark_block.py",
            "tests/test_homework_leaks.py"} <= set(kept)  # this file's patterns spell the answers out
    assert not [name for name in kept if (copy / name).exists()]
    modules = [name.removesuffix(".py").replace("/", ".") for name in kept if name.endswith(".py")]
    for path in copy.rglob("*.py"):
        text = path.read_text()
        for module in modules:
            package, _, leaf = module.rpartition(".")
            imports = rf"\b{re.escape(module)}\b|from {re.escape(package)} import [\w, ]*\b{leaf}\b"
            if path.parent.name == package:
                imports += rf"|from \.{leaf}\b|from \. import [\w, ]*\b{leaf}\b"
            assert not re.search(imports, text), f"{path.relative_to(copy)} needs {module}, which is not in the copy"
    listed = subprocess.run([sys.executable, "-c", "from benchmarks.__main__ import BENCHMARKS; print(*BENCHMARKS)"],
                            cwd=copy, env=copy_environment(copy), capture_output=True, text=True, check=True)
    assert listed.stdout.split() == ["overhead", "train", "user_models"]


def test_kept_out_matches_paths_and_patterns(monkeypatch):
    assert homework.kept_out("benchmarks/block.py") and homework.kept_out(pathlib.PurePath("benchmarks", "block.py"))
    assert not homework.kept_out("benchmarks/common.py") and not homework.kept_out("demos/figures/alignment.png")
    monkeypatch.setattr(importlib.import_module("homework.strip"), "NOT_IN_STUDENT_COPY", ["notes/*.md"])
    assert homework.kept_out("notes/answers.md") and not homework.kept_out("README.md")


# ----------------------------------------------------------------------------
# A derivative written in words: any docstring, comment or prose of the copy
# ----------------------------------------------------------------------------

# Each backward task's result in the forms a docstring or comment writes it, matched with the
# spaces taken out (so `y * (g - sum(g * y))` and `y*(g-sum(g*y))` are one form). A teacher who
# adds an op and writes its derivative in the docstring outside a solution region is caught here.
DERIVATIVES = {
    "elementwise_backward": [r"1-(tanh\(\w+\)|y)\*\*2", r"1-y\*y\b", r"1-y\^2", r"dl/da=grad\*b(?![\w*])",
                             r"-\w*grad\w*\*a/\(?b\*\*2", r"-\w*grad\w*\*a/\(b\*b\)", r"dl/dx=grad\*(y|exp\(x\))(?![\w*])"],
    "unbroadcast": [r"leadingaxesbroadcasting(has)?added", r"where(x|the\w*input)(had|has)size1",
                    r"range\(len\(\w+\)-len\(\w+\)\)"],
    "matmul_backward": [r"grad@b\.(t\b|swapaxes)", r"a\.(t|swapaxes\(-1,-2\))@grad", r"dc\w*b\^?t\b",
                        r"\ba\^t\w*dc", r"grad@\w+\.t,\w+\.t@grad", r"grad@b\^t", r"\ba\^t@grad"],
    "reductions": [r"dl/dx=grad/(n|count|size)\b", r"2\*?\(x-\w*mean\w*\)/\(?\w+", r"grad\*\w*mask\w*/\w*(ties|count)"],
    "gradcheck_central_difference": [r"\)/\(2\*(step|eps|h)\)", r"\)/\(2(step|eps|h)\)"],
    "softmax_backward": [r"\w+\*\(\w+-(\w+\.)?(row)?sum(_j)?\(", r"\w+\*\(\w+-\(\w+\*\w+\)\.sum\(", r"y_i\(\w+_i-sum",
                         r"\w+-(np\.|xp\.|_xp\(\w+\)\.)?exp\(\w+\)\*\(?\w*\.?sum", r"grad_j-softmax\(x\)_j\*sum"],
    "layer_norm_backward": [r"mean\(g\*x_?hat\)", r"\(g\*x_?hat\)\.mean", r"-mean\(g\)-", r"delta_ij-1/d-x_?hat",
                            r"g-g\.mean\("],
    "tiled_attention": [r"ds=p\*\(", r"p\*\(dp-", r"rowsum\(dout\*out\)", r"exp\(m_old-m_new\)", r"\bm_new\b"],
}


def _words(path, text):
    """What a file says in words: a Python file's comments and string literals (its
    docstrings), any other text file whole; with the spaces taken out, in lower case."""
    import io
    import tokenize

    if path.suffix != ".py":
        return re.sub(r"\s+", "", text).lower()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return re.sub(r"\s+", "", text).lower()
    parts = [token.string for token in tokens if token.type in (tokenize.COMMENT, tokenize.STRING)]
    return re.sub(r"\s+", "", "\n".join(parts)).lower()


def stated_derivatives(root):
    """[(task, file, the words that state its derivative)] over the text files of `root`."""
    found = []
    for path in sorted(pathlib.Path(root).rglob("*")):
        if not path.is_file() or ".git" in path.parts or path.suffix in (".png", ".pyc", ".npz", ".zip"):
            continue
        try:
            words = _words(path, path.read_text())
        except (UnicodeDecodeError, OSError):
            continue
        for task, patterns in DERIVATIVES.items():
            for pattern in patterns:
                match = re.search(pattern, words)
                if match:
                    found.append((task, str(path.relative_to(root)), match.group(0)))
    return found


def test_no_docstring_or_comment_of_the_copy_states_a_backward_tasks_derivative(copy):
    assert stated_derivatives(copy) == []


@pytest.mark.parametrize("task", list(DERIVATIVES))
def test_each_derivative_pattern_can_fail(teacher, task):
    """Each task's patterns match something the teacher's repository says (a solution region, a
    file kept out): no task is guarded by patterns that cannot fail."""
    words = [_words(pathlib.Path(name), text) for name, text in teacher.items()]
    matched = [pattern for pattern in DERIVATIVES[task] if any(re.search(pattern, text) for text in words)]
    assert matched, f"{task}: no pattern of {DERIVATIVES[task]} matches what the teacher's repository says"


def test_a_derivative_in_an_added_ops_docstring_is_caught(copy, tmp_path):
    """A teacher adds an op and states its backward in the docstring, outside any region."""
    planted = tmp_path / "copy"
    (planted / "minitensor" / "ops").mkdir(parents=True)
    (planted / "minitensor" / "ops" / "scaled_softmax.py").write_text(
        'class ScaledSoftmax:\n'
        '    """y = softmax(a * x).   backward: dx = a * y * (g - sum(g * y, axis)), the softmax task\'s\n'
        '    result times a."""\n')
    (planted / "minitensor" / "ops" / "norm.py").write_text(
        "def rms_backward(g, x_hat):\n    # dx = r * (g - mean(g) - x_hat * mean(g * x_hat)) for layer norm\n    pass\n")
    found = stated_derivatives(planted)
    assert {task for task, _, _ in found} == {"softmax_backward", "layer_norm_backward"}, found
    assert ("softmax_backward", "minitensor/ops/scaled_softmax.py") in {(task, name) for task, name, _ in found}
