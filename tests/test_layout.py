"""The layout shows the architecture (README "Where each part lives"): small files, imports
that go one way, demos and benchmarks apart, models on public names only."""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "minitensor"
MOST_LINES = 600
# The one designed upward import: Function.apply must hand back a Tensor, and tensor.py (and
# views.py, which tensor.py imports) import the engine, so autograd imports them inside a function.
DESIGNED = {("minitensor.autograd", "_import_upward")}


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module, path, node, modules):
    """The absolute module names one import statement imports: `from . import views` imports
    minitensor.views; `from .tensor import Tensor` imports minitensor.tensor."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    base = ".".join(part for part in [package if node.level else "", node.module or ""] if part)
    submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
    return submodules if len(submodules) == len(node.names) else [base] + submodules


def _imports(path, modules=()):
    """(imported module, the function the import is in or None) for every import in the file."""
    module = _module_name(path)
    tree = ast.parse(path.read_text())
    found = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                found.extend((name, function) for name in _resolve(module, path, child, modules))
            else:
                visit(child, function)

    visit(tree, None)
    return found


def _graph():
    files = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for module, path in files.items():
        edges = set()
        for name, function in _imports(path, files):
            if name in files and name != module and (module, function) not in DESIGNED:
                edges.add(name)
        graph[module] = edges
    return graph


def _a_cycle(graph):
    """One import cycle as a list of modules, or None."""
    state, stack = {}, []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


def test_no_file_in_the_package_is_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > MOST_LINES}
    assert not long, f"files over {MOST_LINES} lines (split them by job): {long}"


def test_imports_go_one_way_except_the_designed_one_in_apply():
    cycle = _a_cycle(_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_planted_circle():
    graph = _graph()
    graph["minitensor.autograd"] = graph["minitensor.autograd"] | {"minitensor.tensor"}
    assert _a_cycle(graph) is not None


def test_demos_and_benchmarks_do_not_import_each_other():
    for folder, other in [("demos", "benchmarks"), ("benchmarks", "demos")]:
        for path in (ROOT / folder).glob("*.py"):
            names = [name for name, _ in _imports(path)]
            assert not [n for n in names if n == other or n.startswith(other + ".")], f"{path.name} imports {other}"


# What sits beside the library: minitensor/ is the engine and its tools, and imports none of them
# (they import it). The homework grader is a package of its own (homework/), as are the models the
# chapters build, the demos, the benchmarks and the course site's builder.
BESIDE = ("homework", "models", "demos", "benchmarks", "sitebuild", "course", "examples", "scripts", "tests")


def library_imports_of_what_sits_beside(root=ROOT):
    """Every import in minitensor/ under root of a package that sits beside it, as "file:line: name"."""
    found = []
    for path in sorted((root / "minitensor").rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if node.level == 0 else [])
                found += [f"{path.relative_to(root)}:{node.lineno}: {name}" for name in names
                          if name.split(".")[0] in BESIDE]
        if module.startswith("minitensor.homework"):
            found.append(f"{path.relative_to(root)}: the grader inside the library")
    return found


def test_the_library_imports_nothing_that_sits_beside_it():
    found = library_imports_of_what_sits_beside()
    assert not found, "minitensor/ imports what sits beside it (it must import the other way):\n" + "\n".join(found)


def test_the_beside_finder_finds_an_import_of_the_grader_or_a_demo(tmp_path):
    (tmp_path / "minitensor" / "debug").mkdir(parents=True)
    (tmp_path / "minitensor" / "homework").mkdir()
    (tmp_path / "minitensor" / "homework" / "__init__.py").write_text("")
    (tmp_path / "minitensor" / "debug" / "show.py").write_text(
        "import numpy\nfrom . import observer\ndef f():\n    import demos.scaling\n    from homework import grade\n")
    found = library_imports_of_what_sits_beside(tmp_path)
    assert found == ["minitensor/debug/show.py:4: demos.scaling", "minitensor/debug/show.py:5: homework",
                     "minitensor/homework/__init__.py: the grader inside the library"], found


def test_models_use_public_names_only():
    allowed = {"minitensor", "minitensor.nn", "minitensor.nn.functional", "minitensor.nn.init", "minitensor.optim",
               "minitensor.backends", "minitensor.random"}
    for path in (ROOT / "models").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("minitensor"):
                assert node.module in allowed, f"models/{path.name} imports from {node.module}"
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"models/{path.name} imports private names {private}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("minitensor"):
                        assert alias.name in allowed, f"models/{path.name} imports {alias.name}"


# ----------------------------------------------------------------------------
# No module reads another module's private names
# ----------------------------------------------------------------------------

# The rule. A name that starts with one underscore (not a dunder) belongs to the module that
# defines it: at module level (a def, a class, an assignment, an import bound under that name),
# in a class body, through `self` or `cls` in a method (so a subclass reaches what its bases
# define through self), or as `ctx._x = ...` (an op's ctx attributes are its own). Everywhere
# else, in every module under minitensor/ and models/:
#   `from X import _name`    is refused when X is one of ours;
#   `module._name`           is refused when module names one of our modules (sites._places);
#   `obj._name`              (a read or a write) is refused when `_name` belongs to another of our
#                            modules and not to this one (node._saved_arrays(), p._bump_version()).
# Names of other libraries (sys._getframe, a namedtuple's _replace, Numba's kernel._cache) are
# not ours: the rule does not look at them. The tools read nodes and tensors through the public
# names (ctx.saved, ctx.saved_arrays, ctx.freed, Tensor.version, views.increment_version, sites).
# The one designed exception: the engine's files share the fields of Tensor and Context. tensor.py
# defines them, autograd.py (apply, the backward walk) and views.py (attached at autograd's hook
# lines) maintain them on every op, where a property would cost each op a call, and joining.py is
# tensor.py's module-level operators (where, maximum coerce a number as Tensor's operators do).
ENGINE = {"minitensor.autograd", "minitensor.tensor", "minitensor.views", "minitensor.joining"}
OWNERS = ("self", "cls")


def _private(name):
    return name.startswith("_") and not name.startswith("__")


def _owned(tree):
    """The private names a module defines (see the rule above)."""
    owned = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            owned.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            owned.add(node.id)  # module level, class body, and locals (which shadow nothing of another module)
        elif isinstance(node, ast.alias):
            owned.add(node.asname or node.name.split(".")[0])
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
              and node.value.id in OWNERS + ("ctx",)):
            owned.add(node.attr)
    return {name for name in owned if _private(name)}


def _module_names(module, path, tree, modules):
    """The names this file binds to modules of ours (from . import sites -> sites), and to other
    libraries' modules (import sys -> sys)."""
    ours, theirs = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                (ours if alias.name.split(".")[0] in ("minitensor", "models") else theirs).add(bound)
        elif isinstance(node, ast.ImportFrom):
            for alias, target in zip(node.names, _resolved_names(module, path, node)):
                if target in modules:
                    ours.add(alias.asname or alias.name)
                elif node.level == 0 and not target.startswith(("minitensor", "models")):
                    theirs.add(alias.asname or alias.name)
    return ours, theirs


def _resolved_names(module, path, node):
    """For each name `from X import a, b` imports, the module it would be if it were one: X.a, X.b."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    base = ".".join(part for part in [package if node.level else "", node.module or ""] if part)
    return [f"{base}.{alias.name}" for alias in node.names]


def _our_files(root):
    paths = sorted(list((root / "minitensor").rglob("*.py")) + list((root / "models").glob("*.py")))
    return {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p for p in paths}


def private_reads(root=ROOT):
    """Every use of another module's private name in minitensor/ and models/ under root, as
    "file:line: what" (see the rule above)."""
    files = _our_files(root)
    trees = {module: ast.parse(path.read_text()) for module, path in files.items()}
    owned = {module: _owned(tree) for module, tree in trees.items()}
    owner_of = {}
    for module, names in owned.items():
        for name in names:
            owner_of.setdefault(name, set()).add(module)
    found = []
    for module, tree in trees.items():
        path = files[module]
        where = path.relative_to(root)
        our_modules, other_libraries = _module_names(module, path, tree, files)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                package = _resolved_names(module, path, node)[0].rpartition(".")[0] if node.names else ""
                if package in files and package != module:
                    for alias in node.names:
                        if _private(alias.name):
                            found.append(f"{where}:{node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}")
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                base = node.value.id if isinstance(node.value, ast.Name) else None
                if base in OWNERS or base in other_libraries:
                    continue
                if base in our_modules:
                    found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
                    continue
                others = owner_of.get(node.attr, set()) - {module}
                if others and node.attr not in owned[module] and not (module in ENGINE and others <= ENGINE):
                    found.append(f"{where}:{node.lineno}: {ast.unparse(node)} (defined in {', '.join(sorted(others))})")
    return found


def test_no_module_reads_another_modules_private_names():
    found = private_reads()
    assert not found, ("another module's private names (read them through a public name; the rule is "
                       "above private_reads in tests/test_layout.py):\n" + "\n".join(found))


def test_the_private_name_finder_finds_each_kind(tmp_path):
    package = tmp_path / "minitensor"
    (package / "debug").mkdir(parents=True)
    (tmp_path / "models").mkdir()
    (package / "__init__.py").write_text("")
    (package / "debug" / "__init__.py").write_text("")
    (package / "sites.py").write_text("import sys\n_places = {}\nclass Context:\n    def _arrays(self):\n"
                                      "        return self._saved\n    def free(self):\n        self._saved = ()\n")
    (package / "debug" / "show.py").write_text(
        "import sys\nfrom .. import sites\nfrom ..sites import _places, Context\n"
        "def show(node):\n    frame = sys._getframe(0)\n    return node._arrays(), sites._places, frame\n"
        "class Mine:\n    def __init__(self):\n        self._own = 1\n    def own(self, other):\n"
        "        return self._own + other._own\n")
    found = private_reads(tmp_path)
    assert sorted(line.split(": ", 1)[1] for line in found) == [
        "from ..sites import _places", "node._arrays (defined in minitensor.sites)", "sites._places"], found


def test_import_minitensor_loads_the_engine_and_leaves_the_tools_for_their_first_use():
    """`import minitensor` loads the engine, the ops, the backends' dispatch, nn and optim: at most
    40 of its modules; of debug/ only its observer (every node records where it was made), and the
    tools, viz, the backward page and compare_torch when first used."""
    script = ("import sys, minitensor as mt\n"
              "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'minitensor')\n"
              "print(len(loaded)); print(' '.join(loaded))\n"
              "mt.debug.compare, mt.viz.text, mt.testing\n"
              "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] == 'minitensor')))\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    count, first, after = run.stdout.splitlines()
    assert int(count) <= 40, first
    for tool in ("minitensor.debug.show", "minitensor.debug.compare_graphs", "minitensor.debug.op_check",
                 "minitensor.viz", "minitensor.backward_page", "minitensor.debug.compare_torch", "minitensor.testing",
                 "homework"):
        assert tool not in first.split(), f"import minitensor loaded {tool}"
    assert "minitensor.debug.observer" in first.split()  # installed: nodes made before any tool know their site
    assert {"minitensor.debug.compare_graphs", "minitensor.viz", "minitensor.testing"} <= set(after.split())
    assert "debug" in dir(__import__("minitensor"))
