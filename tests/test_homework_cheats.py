"""Cheats planted in a copy: the grader's pytest, NumPy and comparisons patched, results files
forged, the grader's files read, the grader killed, the wire forged, PyTorch or a solved checkout
doing a backward. Each scores exactly what the copy earns without it.

They are graded together, in one grading run: each cheat runs in the worker of the task it aims at
(and in the worker that checks the copy imports), so that a task scoring other than the untouched
copy's names the cheat that got through; and all of them at once, in every worker, through the
autograder bundle at each isolation level. Cheats that get values without doing the work are in
test_homework_work_cheats.py."""

import json
import os
import secrets
import subprocess
import sys
import textwrap
import time
import zipfile

import pytest
from round_trip import HIDDEN, copy_of, grade, levels_here, solved_checkouts_others_can_read

import homework
from homework.strip import copy_environment

CHEATS = {
    # the grader's own pytest, made to pass every test, from the package's __init__
    "patch pytest": "import sys\ntry:\n    import _pytest.python\n    _pytest.python.Function.runtest = lambda self: None\n"
                    "except ImportError:\n    pass\n",
    # every comparison helper made to pass
    "patch numpy and the helpers": "import numpy\nnumpy.allclose = lambda *a, **k: True\n"
                                   "numpy.testing.assert_allclose = lambda *a, **k: None\n"
                                   "numpy.array_equal = lambda *a, **k: True\n",
    # results files rewritten when the process ends, and by a process that outlives the grader
    "atexit and detached rewrites": (
        "import atexit, json, os, time\n"
        "def _forge():\n"
        "    for top in ('/tmp', os.environ.get('MINITENSOR_FORGE', '/tmp')):\n"
        "        for folder, _, names in os.walk(top):\n"
        "            for name in names:\n"
        "                if name == 'results.json':\n"
        "                    try:\n"
        "                        open(os.path.join(folder, name), 'w').write(json.dumps({'score': 190, 'tests': []}))\n"
        "                    except OSError:\n"
        "                        pass\n"
        "atexit.register(_forge)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(8)\n"
        "        _forge()\n"
        "    os._exit(0)\n"),
    # the grader's files read from the worker: the tests, hidden ones and results, into feedback
    "read the grader's files": (
        "import os\n"
        "def _loot():\n"
        "    found = []\n"
        "    for folder, folders, names in os.walk('/tmp'):\n"
        "        folders[:] = [f for f in folders if f not in ('.venv', '.git', 'site-packages', '__pycache__')]\n"
        "        found += [os.path.join(folder, n) for n in names if n.startswith('test_') or n == 'results.json']\n"
        "    texts = []\n"
        "    for path in found:\n"
        "        try:\n"
        "            texts.append(open(path, errors='replace').read())\n"
        "        except Exception:\n"
        "            pass\n"
        "    return texts\n"
        "_LOOT = _loot()\n"
        "if any('SECRET_MARK' in text for text in _LOOT):\n"
        "    raise RuntimeError('SECRET_MARK leaked')\n"),
    # a lying ndarray subclass as the data of every gradient the elementwise ops send back
    "a lying ndarray subclass": (
        "import numpy as _np\n"
        "class _Liar(_np.ndarray):\n"
        "    def __eq__(self, other):\n        return _np.ones(self.shape, bool)\n"
        "    def __array_ufunc__(self, *args, **kwargs):\n        return _np.zeros(()).view(_Liar)\n"
        "from minitensor.ops import elementwise as _el\n"
        "def _lie(ctx, grad):\n"
        "    return _np.zeros_like(grad).view(_Liar)\n"
        "_el.Exp.backward = _el.Tanh.backward = staticmethod(_lie)\n"
        "_el.Mul.backward = _el.Div.backward = staticmethod(lambda ctx, grad: (_lie(ctx, grad), _lie(ctx, grad)))\n"),
    # PyTorch's autograd doing the student's backward
    "torch in student code": (
        "def _torch_softmax_backward(y, dy, axis=-1):\n"
        "    import torch\n"
        "    t = torch.tensor(y).log().requires_grad_()\n"
        "    torch.softmax(t, axis).backward(torch.tensor(dy))\n"
        "    return t.grad.numpy()\n"
        "from minitensor.ops import Softmax as _Softmax\n"
        "_Softmax.backward = staticmethod(lambda ctx, grad: _torch_softmax_backward(ctx.saved_tensors[0], grad, ctx.axis))\n"),
    # the process ended from inside one task
    "os._exit in a task": "import os\nfrom minitensor.ops import LayerNormFunction as _LayerNorm\n"
                          "_LayerNorm.backward = staticmethod(lambda *a, **k: os._exit(0))\n",
    # the grader killed from the worker, before it can write a result
    "kill the grader": "import os, signal\n"
                       "try:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError:\n    pass\n",
    # answers forged on the wire: a frame saying 'passed' written to every descriptor, ahead of any request
    "forge the wire": (
        "import os, struct, numpy as _np\n"
        "def _frame():\n"
        "    import json\n"
        "    header = json.dumps({'d': {'value': {'d': {'out': {'v': 0.0}}}}}).encode()\n"
        "    body = struct.pack('<QI', len(header), 0) + header\n"
        "    return struct.pack('<Q', len(body)) + body\n"
        "for _fd in range(3, 64):\n"
        "    try:\n        os.write(_fd, _frame() * 4)\n    except OSError:\n        pass\n"),
    # a solved checkout found on the disk (the editable install's metadata names one; a walk finds others),
    # its reductions' backwards taken from there
    "a solved checkout on the disk": (
        "import json as _json, os as _os\n"
        "def _solved_file():\n"
        "    roots = []\n"
        "    try:\n"
        "        import importlib.metadata as _m\n"
        "        roots.append(_json.loads(_m.distribution('minitensor').read_text('direct_url.json'))['url'][7:])\n"
        "    except Exception:\n"
        "        pass\n"
        "    for root in roots + ['/work', '/home', '/root', '/opt', '/srv', '/tmp']:\n"
        "        for folder, folders, names in _os.walk(root):\n"
        "            folders[:] = [f for f in folders if f not in ('.git', 'site-packages', '__pycache__', 'proc')]\n"
        "            if 'reduce.py' in names:\n"
        "                try:\n"
        "                    text = open(_os.path.join(folder, 'reduce.py')).read()\n"
        "                except OSError:\n"
        "                    continue\n"
        "                if 'BEGIN SOLUTION reductions' in text:\n"
        "                    return text\n"
        "_text = _solved_file()\n"
        "if _text:\n"
        "    from minitensor.ops import reduce as _reduce\n"
        "    _space = {'__name__': 'minitensor.ops.solved_reduce', '__package__': 'minitensor.ops'}\n"
        "    exec(compile(_text, 'solved', 'exec'), _space)\n"
        "    for _name in ('Sum', 'Mean', 'Var', 'Max', 'Min'):\n"
        "        getattr(_reduce, _name).backward = staticmethod(_space[_name].backward)\n"),
    # the grader's own copy of the comparisons rewritten, wherever a worker can reach it
    "rewrite the grader's comparisons": (
        "import os as _os\n"
        "for _top in ('/tmp', '/var/tmp', '/autograder'):\n"
        "    for _folder, _folders, _names in _os.walk(_top):\n"
        "        if '_grading.py' in _names:\n"
        "            try:\n"
        "                open(_os.path.join(_folder, '_grading.py'), 'a').write(\n"
        "                    '\\ndef assert_close(*a, **k):\\n    pass\\ndef assert_matches(*a, **k):\\n    pass\\n')\n"
        "            except OSError:\n"
        "                pass\n"),
    # PyTorch found through another process's command line, the import guard taken out, for matmul's backward
    "PyTorch through /proc": (
        "import os as _os, sys as _sys\n"
        "_sys.meta_path[:] = [f for f in _sys.meta_path if type(f).__name__ != '_Refuse']\n"
        "try:\n"
        "    _pids = [p for p in _os.listdir('/proc') if p.isdigit()]\n"
        "except OSError:\n"
        "    _pids = []\n"
        "for _pid in _pids:\n"
        "    try:\n"
        "        _exe = open(f'/proc/{_pid}/cmdline', 'rb').read().split(b'\\0')[0].decode()\n"
        "    except OSError:\n"
        "        continue\n"
        "    _site = _os.path.join(_os.path.dirname(_os.path.dirname(_exe)), 'lib', 'python3.11', 'site-packages')\n"
        "    if _os.path.isdir(_os.path.join(_site, 'torch')) and _site not in _sys.path:\n"
        "        _sys.path.append(_site)\n"
        "def _by_torch(a, b, grad):\n"
        "    import torch\n"
        "    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)\n"
        "    (ta @ tb).backward(torch.tensor(grad))\n"
        "    return ta.grad.numpy(), tb.grad.numpy()\n"
        "from minitensor.ops import MatMul as _MatMul\n"
        "_MatMul.backward = staticmethod(lambda ctx, grad: _by_torch(*ctx.saved_tensors, grad))\n"),
}


# The task each cheat aims at: where it replaces the task's code, or any task for a cheat that goes
# for the grader itself. Every target is unsolved in the copy; SOLVED is solved (what no cheat may
# take away). The untouched copy earns EARNED: its solved task, nothing else (a copy solved that
# far is graded so in test_homework_copies.py, test_solving_the_first_k_tasks_passes_exactly_those).
AIMS = {
    "patch pytest": "gradcheck_central_difference",
    "patch numpy and the helpers": "demo_scaling",
    "atexit and detached rewrites": "demo_attention_cost",
    "read the grader's files": "attention_masks",
    "a lying ndarray subclass": "elementwise_backward",
    "torch in student code": "softmax_backward",
    "os._exit in a task": "layer_norm_backward",
    "kill the grader": "demo_stacking",
    "forge the wire": "multihead_split_merge",
    "a solved checkout on the disk": "reductions",
    "rewrite the grader's comparisons": "pre_norm_block",
    "PyTorch through /proc": "matmul_backward",
}
SOLVED = ["topological_order"]
# demo_multihead: the copy's demo edited so its own checks pass and its count is the seed's (_edit_the_copys_own)
GRADED = [task for task in homework.TASK_NAMES if task in {*SOLVED, *AIMS.values(), "demo_multihead"}]
EARNED = {task: 10.0 if task in SOLVED else 0.0 for task in GRADED}
# All together, in every worker: the tasks the cheats for values aim at (the others go for the grader,
# whatever the task)
FOR_VALUES = ["a lying ndarray subclass", "torch in student code", "os._exit in a task", "a solved checkout on the disk",
              "PyTorch through /proc"]
TOGETHER = [task for task in GRADED if task in {*SOLVED, *(AIMS[cheat] for cheat in FOR_VALUES), "demo_multihead"}]
AS_ROOT_ONLY = ("read the grader's files", "kill the grader")  # without root, student code runs as the grading user


def _planted_here(cheat):
    return cheat not in AS_ROOT_ONLY or os.geteuid() == 0


# The hidden tests' secret: drawn per run, so only the hidden test file holds it (a copy of this
# repository lying readable on the machine, this file included, does not).
SECRET = f"secret-{secrets.token_hex(8)}"


def _edit_the_copys_own(copy):
    """The copy's own references and demo code edited too: neither is what judges."""
    (copy / "tests" / "_grading.py").write_text("def assert_close(*a, **k):\n    pass\n")
    demo = copy / "demos" / "multihead.py"
    demo.write_text(demo.read_text().replace("checks(", "(lambda *a: True)("))
    stub = [line for line in demo.read_text().splitlines() if "NotImplementedError" in line]
    if stub:
        demo.write_text(demo.read_text().replace(stub[0], "    return 1088"))  # the seed's number, for d = 16


def _plant(copy, code):
    init = copy / "minitensor" / "__init__.py"
    init.write_text(init.read_text() + "\n# a cheat\n" + code.replace("SECRET_MARK", SECRET))


def _aimed(cheat):
    """The cheat's code, run at import in the worker of the task it aims at (a worker's argv[2] is
    its task) and in the worker that checks the copy imports ("import"), nowhere else."""
    return (f"if __import__('sys').argv[2:3] in (['import'], [{AIMS[cheat]!r}]):\n"
            + textwrap.indent(CHEATS[cheat], "    "))


@pytest.fixture(scope="module")
def cheat_base(tmp_path_factory):
    """A copy with SOLVED solved and nothing else."""
    return homework.strip(tmp_path_factory.mktemp("base") / "student", keep=SOLVED)


def test_every_cheat_aims_at_a_task_of_its_own():
    assert set(AIMS) == set(CHEATS) and len(set(AIMS.values())) == len(AIMS)
    assert not set(AIMS.values()) & {*SOLVED, "demo_multihead", "kv_cache"}  # kv_cache: the hidden tests' task


def test_each_cheat_planted_in_its_task_scores_what_the_copy_earns_without_it(cheat_base, tmp_path, worker_python,
                                                                              hidden):
    copy = copy_of(cheat_base, tmp_path)
    _edit_the_copys_own(copy)
    planted = [cheat for cheat in CHEATS if _planted_here(cheat)]
    for cheat in planted:
        _plant(copy, _aimed(cheat))
    (hidden / "test_hidden.py").write_text(HIDDEN.replace("the secret", SECRET))
    results = tmp_path / "results.json"
    ok, rows, table = grade(copy, tasks=GRADED, extra=hidden, gradescope=results, python=worker_python,
                            timeout=30, verbose=True)
    document = json.loads(results.read_text())
    time.sleep(9)  # a detached process its task's worker started, had it lived, would have written by now
    assert json.loads(results.read_text()) == document
    aimed_at = {task: cheat for cheat, task in AIMS.items()}
    got_through = {f"{aimed_at.get(row.task, 'the edited demo and references')} ({row.task})": row.points
                   for row in rows if row.points != EARNED[row.task]}
    assert not got_through and [row.task for row in rows] == GRADED, (got_through, table)
    assert SECRET not in results.read_text() and SECRET not in table
    assert document["extra_data"]["isolation"] == levels_here()[0]  # the strongest level here, not a fallback
    assert "task softmax_backward: student code may not import torch while it is graded" in table
    assert "ended the grading process (exit status 0) during this test" in table  # os._exit, in layer_norm_backward


# Where nothing fences it in (this process's Python, PyTorch and the disk at hand), each cheat that
# goes for values gets them: so the score above holds because the grader stops it, not because it
# could never have worked.
UNFENCED = {
    "torch in student code": (
        "x = mt.tensor(rng.standard_normal((3, 4)), requires_grad=True)\n"
        "dy = rng.standard_normal((3, 4))\n"
        "x.softmax(axis=-1).backward(dy)\n"
        "t = torch.tensor(x.data, requires_grad=True)\n"
        "torch.softmax(t, -1).backward(torch.tensor(dy))\n"
        "print(abs(x.grad - t.grad.numpy()).max())\n"),
    "PyTorch through /proc": (
        "a = mt.tensor(rng.standard_normal((3, 4)), requires_grad=True)\n"
        "b = mt.tensor(rng.standard_normal((4, 2)), requires_grad=True)\n"
        "dy = rng.standard_normal((3, 2))\n"
        "(a @ b).backward(dy)\n"
        "print(max(abs(a.grad - dy @ b.data.T).max(), abs(b.grad - a.data.T @ dy).max()))\n"),
    "a solved checkout on the disk": (
        "x = mt.tensor(rng.standard_normal((3, 4)), requires_grad=True)\n"
        "dy = rng.standard_normal(3)\n"
        "x.sum(axis=1).backward(dy)\n"
        "print(abs(x.grad - dy[:, None]).max())\n"),
}


@pytest.mark.parametrize("cheat", sorted(UNFENCED))
def test_a_cheat_for_values_gets_them_where_nothing_fences_it_in(cheat, cheat_base, tmp_path):
    copy = copy_of(cheat_base, tmp_path)
    _plant(copy, _aimed(cheat))
    script = (f"import sys\nsys.argv = ['worker.py', '.', {AIMS[cheat]!r}]  # as a worker for the task sees it\n"
              "import numpy as np, torch\nimport minitensor as mt\nrng = np.random.default_rng(0)\n" + UNFENCED[cheat])
    run = subprocess.run([sys.executable, "-c", script], cwd=copy, env=copy_environment(copy), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert float(run.stdout.split()[-1]) < 1e-12, run.stdout


@pytest.mark.parametrize("level", levels_here())
def test_cheats_planted_together_score_what_the_copy_earns_through_run_autograder(level, cheat_base, tmp_path,
                                                                                    worker_python, hidden,
                                                                                    monkeypatch):
    """Every cheat at once, in every worker (each at import), through the bundle's run_autograder."""
    if level == "uid" and (found := solved_checkouts_others_can_read()):
        pytest.skip(f"at uid a worker reads what other users may read, and {found[0]} holds solved code they may "
                    f"read (chmod 700 it, or grade at bubblewrap or landlock)")
    monkeypatch.setenv("MINITENSOR_ISOLATION_ONLY", level)
    (hidden / "test_hidden.py").write_text(HIDDEN.replace("the secret", SECRET))
    root = tmp_path / "autograder"
    archive = homework.bundle(tmp_path / "autograder.zip", tasks=TOGETHER, extra=hidden, timeout=30,
                              isolation_at_least="none")
    with zipfile.ZipFile(archive) as zipped:
        zipped.extractall(root / "source")
    submission = copy_of(cheat_base, root)
    (submission.parent / "student").rename(root / "submission")
    _edit_the_copys_own(root / "submission")
    for cheat in CHEATS:
        if _planted_here(cheat):
            _plant(root / "submission", CHEATS[cheat])
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PYTHON=sys.executable, WORKER_PYTHON=worker_python)
    subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, check=True, timeout=600)
    document = json.loads((root / "results" / "results.json").read_text())
    time.sleep(9)  # the detached process would have written by now
    assert json.loads((root / "results" / "results.json").read_text()) == document
    assert document["score"] == sum(EARNED[task] for task in TOGETHER), document["output"]
    assert document["extra_data"]["isolation"] == level
