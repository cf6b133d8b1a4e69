"""The layout shows the architecture (README "Where each part lives"): small files, imports
that go one way, demos and benchmarks apart, models on public names only."""

import ast
import pathlib

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
