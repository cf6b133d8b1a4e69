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

from minitensor import homework

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
    ("tiled_attention", "minitensor/backends/numpy_backend.py", SOFTMAX_BACKWARD),
    ("tiled_attention", "minitensor/backends/numpy_backend.py", r"D = \(dout \* out\)\.sum"),
    # found by reading a whole copy
    ("attention_masks", "models/attention.py", CAUSAL_OFFSET),
    ("attention_masks", "minitensor/backends/numpy_backend.py", CAUSAL_OFFSET),
    ("attention_masks", "minitensor/backends/numba_backend/score_tiles.py", CAUSAL_OFFSET),
    ("attention_masks", "minitensor/ops/attention.py", CAUSAL_OFFSET),
    ("attention_masks", "tests/test_backends.py", CAUSAL_OFFSET),
    ("attention_masks", "tests/test_reference_kernels.py", CAUSAL_OFFSET),
    ("softmax_backward", "minitensor/ops/softmax.py", SOFTMAX_BACKWARD),
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
    ("softmax_backward", "tests/test_homework.py", r"return y \* \(dy - \(dy \* y\)\.sum"),
    ("attention_masks", "tests/test_homework_tasks.py", CAUSAL_OFFSET),
]


DEMO_TASK_FIGURES = [f"demos/figures/{task.removeprefix('demo_')}.png" for task in homework.TASK_NAMES
                     if task.startswith("demo_")]


def _case_id(case):
    return f"{case[0]}-{case[1]}"


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    return homework.strip(tmp_path_factory.mktemp("leaks") / "student")


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
                            cwd=copy, env=homework._env_for(copy), capture_output=True, text=True, check=True)
    assert listed.stdout.split() == ["overhead", "train"]


def test_kept_out_matches_paths_and_patterns(monkeypatch):
    assert homework.kept_out("benchmarks/block.py") and homework.kept_out(pathlib.PurePath("benchmarks", "block.py"))
    assert not homework.kept_out("benchmarks/common.py") and not homework.kept_out("demos/figures/alignment.png")
    monkeypatch.setattr(importlib.import_module("minitensor.homework.strip"), "NOT_IN_STUDENT_COPY", ["notes/*.md"])
    assert homework.kept_out("notes/answers.md") and not homework.kept_out("README.md")
