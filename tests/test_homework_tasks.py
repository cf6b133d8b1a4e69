"""The homework's graded tests, one group per task, in the order of homework.TASKS.

Each test runs the student's code through the `student` fixture: a `probe_*` function below runs
here, in the grader, and reaches the student's code through its `side` argument, each import,
attribute, call and operator a request to a worker process of the task's own (under `grade`; in
the test suite, this process over the same wire format: homework/remote.py). What
comes back is plain arrays, which the test compares here, with PyTorch in float64 or with a
measurement (tests/_grading.py): no probe, reference, seed or tolerance is ever in the student's
process, and no reference comes from the copy. Each task's tests use only that task and the tasks before it
(tests/test_homework_copies.py checks this). Inputs are drawn afresh on every run, so no stored answer
passes.

Each backward task also runs once at a size where a backward that does O(size) work fits its
time budget (a multiple of PyTorch's time for the same work, measured here in the same run:
tests/_grading.py) and one that estimates each gradient element numerically cannot; tiled
attention runs under a memory limit that a (T, T) array of scores does not fit.
"""

import functools

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from _graph_feedback import names_the_node
from _grading import (array_of, assert_close, assert_fits_budget, assert_matches, assert_same_mask, attention,
                      best_seconds, budget, future, torch_expression, wire_seconds)

task = pytest.mark.task


def rng():
    return np.random.default_rng()


# A backward task's work tests (@work: timed at a large size, off the forward's image, a memory limit)
# run first among its tests; once one fails, the task's other tests fail too, with the reason: a
# backward that gets the values without doing the work (finite differences, the engine's autograd
# of composed ops, a (T, T) array of scores) earns no part of the task.
_WORK_FAILED = {}  # task -> which work test failed, and why (in this grading run)


def work(test):
    @functools.wraps(test)
    def checked(*args, **kwargs):
        try:
            return test(*args, **kwargs)
        except NotImplementedError:
            raise  # unsolved: the task's other tests say what blocks it
        except BaseException as error:  # a failed check, the student's error, a time-out
            task_name = next(mark.args[0] for mark in checked.pytestmark if mark.name == "task")  # @task above @work
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            _WORK_FAILED.setdefault(task_name, f"{test.__name__}: {first}")  # the first that failed
            raise

    checked.work = True
    return checked


@pytest.fixture(autouse=True)
def _counts_once_the_work_is_done(request):
    marker = request.node.get_closest_marker("task")
    failed = _WORK_FAILED.get(marker.args[0]) if marker else None
    if failed and not getattr(request.function, "work", False):
        pytest.fail(f"not counted: this task's work test failed ({failed[:300]})", pytrace=False)


def shape(generator, low, high, axes):
    """A shape of `axes` sizes drawn from [low, high)."""
    return tuple(int(n) for n in generator.integers(low, high, axes))


# Probes: each runs here, in the grader, and reaches the student's code through `side` (a request
# to the worker for each import, attribute, call and operator: homework/remote.py); it
# returns plain values, which the test judges here.


def _imported(side, imports):
    """{name: the student's object} for each "module:name" of `imports`."""
    names = {}
    for spec in imports:
        module, name = spec.split(":")
        names[name] = getattr(side.module(module), name)
    return names


def probe_expression(side, expression, inputs, upstream, imports=(), backend="numpy"):
    """`expression` over the student's tensors of the named inputs, then backward(upstream)."""
    mt = side.module("minitensor")
    names = {"mt": mt, **_imported(side, imports)}
    with mt.use_backend(backend):
        tensors = {name: mt.tensor(array, requires_grad=array.dtype.kind == "f") for name, array in inputs.items()}
        out = eval(expression, names, dict(tensors))
        out.backward(upstream)
    answer = {"out": out.data}
    answer.update({f"d{name}": tensors[name].grad for name, array in inputs.items() if array.dtype.kind == "f"})
    return answer


def probe_attention_op(side, q, k, v, upstream, is_causal):
    """The fused attention op (the tiled kernels), forward and backward."""
    mt = side.module("minitensor")
    Attention = side.module("minitensor.ops.attention").Attention
    with mt.use_backend("numpy"):
        tensors = [mt.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = Attention.apply(*tensors, is_causal=is_causal)
        out.backward(upstream)
    return {"out": out.data, "dq": tensors[0].grad, "dk": tensors[1].grad, "dv": tensors[2].grad}


def probe_blas_ready(side):
    """A matrix product large enough that BLAS sets up its threads' buffers (before a call
    under a memory limit, where it could not)."""
    ones = side.module("numpy").ones
    ones((512, 512)) @ ones((512, 512))


def probe_topological_order(side, graph):
    """Build the graph (each node: an op over earlier nodes, node 0 the leaf), order it."""
    mt = side.module("minitensor")
    identity = side.toolbox("identity")
    values = [mt.tensor(np.array([1.0, 2.0]), requires_grad=True)]
    for op, left, right in graph:
        a, b = values[left], values[right]
        values.append(a + b if op == "add" else a * b if op == "mul" else -a)
    nodes = {identity(value.grad_fn): number for number, value in enumerate(values[1:], 1)}
    order = side.module("minitensor.autograd").topological_order(values[-1].grad_fn)
    if type(order) is not list:
        return "(not a list)"
    return [nodes.get(identity(node), -1) for node in order]


def probe_chain_and_diamond(side, length):
    mt = side.module("minitensor")
    x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    a = -x
    ((a + x) + a).backward(np.ones(2))
    y = mt.tensor(np.array(1.0), requires_grad=True)
    side.toolbox("added_repeatedly")(y, 1.0, length).backward()
    return {"diamond": x.grad, "chain": y.grad}


def probe_summed_axes(side, pairs):
    summed_axes = side.module("minitensor.autograd").summed_axes
    answers = [summed_axes(tuple(big), tuple(small)) for big, small in pairs]
    return [list(axes) if type(axes) in (list, tuple) else "(not a sequence of axes)" for axes in answers]


def probe_central_difference(side, x, j, eps):
    """The student's central difference of f(x) = sum(sin(x) * x**2) at element j."""
    mt = side.module("minitensor")
    t = mt.tensor(x.copy())
    partial = side.module("minitensor.gradcheck")._central_difference(t, j, side.toolbox("sum_sin_x_squared")(t), eps)
    return {"partial": np.array(partial) if type(partial) in (int, float) else partial, "x_after": t.data}


def probe_causal_mask(side, T, S):
    return {"mask": side.module("models.attention").causal_mask(T, S)}


def probe_masked_attention(side, q, k, v, padding):
    mt = side.module("minitensor")
    attention = side.module("models.attention")
    with mt.use_backend("numpy"):
        tensors = [mt.tensor(a, requires_grad=True) for a in (q, k, v)]
        out, weights = attention.scaled_dot_product_attention(*tensors, mask=padding, is_causal=True,
                                                              return_weights=True)
        out.backward(np.ones(out.shape))  # dL/dout = 1, as the test's reference
    return {"out": out.data, "weights": weights.data, "dq": tensors[0].grad, "dk": tensors[1].grad,
            "dv": tensors[2].grad}


def probe_split_merge(side, x, heads):
    mt = side.module("minitensor")
    attention = side.module("models.attention")
    split = attention.split_heads(mt.tensor(x), heads)
    return {"heads": split.data, "merged": attention.merge_heads(split).data}


def _graded_model(side, kind, d, heads, weights, padding=None):
    """The student's model of a model task: a MultiHeadAttention ("mha") or a pre-norm Block
    ("block") with the grader's weights (float64), the MultiHeadAttention run token by token with a
    KVCache ("kv_cache"), or masked attention ("attention": q, k, v -> the output, causal, `padding`
    hidden). Attention is the materialised one (scores, softmax, weighted sum), so that neither task
    nor its backward needs the tiled kernel, a later task. Returns (model, a function that undoes the swap)."""
    mt = side.module("minitensor")
    attention = side.module("models.attention")
    fused = attention.scaled_dot_product_attention
    if kind == "attention":
        return side.toolbox("first_output")(fused, mask=padding, is_causal=True, return_weights=True), lambda: None
    mt.set_default_dtype("float64")
    try:
        module = (side.module("models.transformer").Block(d, heads) if kind == "block"
                  else attention.MultiHeadAttention(d, heads))
    finally:
        mt.set_default_dtype("float32")
    parameters = side.module("builtins").dict(module.named_parameters())
    for name, array in weights.items():
        parameters[name].data = array.copy()

    # (MultiHeadAttention calls models.attention.attend with a checked mask: the weights path is
    # swapped in there, a function of the worker's toolbox, so that a node made inside it keeps its
    # module path: where a node was made is looked up through the forward methods of your code)
    fused_attend = attention.attend
    attention.attend = side.toolbox("with_weights")(fused_attend)

    def restore():
        attention.attend = fused_attend

    if kind == "kv_cache":  # the attention token by token, each step reading the cache (causal)
        return side.toolbox("token_by_token")(module, attention.KVCache, mt.cat), restore
    return module, restore


def probe_module(side, kind, d, heads, weights, x, upstream):
    """A MultiHeadAttention or a pre-norm Block of the student's (_graded_model), forward on x and
    backward of upstream: the output, the input's and every weight's gradient."""
    mt = side.module("minitensor")
    module, restore = _graded_model(side, kind, d, heads, weights)
    try:
        with mt.use_backend("numpy"):
            t = mt.tensor(x, requires_grad=True)
            out = module(t)
            out.backward(upstream)
    finally:
        restore()
    answer = {"out": out.data, "dx": t.grad}
    answer.update({f"d{name}": p.grad for name, p in module.named_parameters()})
    return answer


def probe_graph(side, kind, d, heads, weights, inputs, upstream, padding=None):
    """The graph of a model task's model (_graded_model), node by node, forward on `inputs` and
    backward of `upstream`, as plain arrays (minitensor/debug/compare_record.py). The feedback of a
    failed model task (tests/_graph_feedback.py) runs this probe on the student's side and, in the
    grader, on the teacher's code (a LocalSide), and names the first node where the two depart."""
    mt = side.module("minitensor")
    compare_record = side.module("minitensor.debug.compare_record")
    model, restore = _graded_model(side, kind, d, heads, weights, padding)
    try:
        with mt.use_backend("numpy"):
            records = compare_record.record(model, inputs, upstream)[0]
    finally:
        restore()
    return compare_record.plain(records)


def probe_tiled_attention(side, q, k, v, mask, is_causal):
    """Attention's own forward (no accelerator) on arrays, with what it saves for backward."""
    mt = side.module("minitensor")
    Attention = side.module("minitensor.ops.attention").Attention
    node = side.module("minitensor.autograd").Context(Attention, (False, False, False))
    with mt.use_backend("numpy"):
        out = Attention.forward(node, q, k, v, mask=mask, is_causal=is_causal)
    statistics = node.saved_tensors[4]
    row_max, row_sum = statistics if type(statistics) in (list, tuple) and len(statistics) == 2 else (None, None)
    return {"out": out, "row_max": row_max, "row_sum": row_sum}


def probe_kv_cache(side, d, heads, weights, x):
    mt = side.module("minitensor")
    attention = side.module("models.attention")
    mt.set_default_dtype("float64")
    try:
        mha = attention.MultiHeadAttention(d, heads)
    finally:
        mt.set_default_dtype("float32")
    parameters = side.module("builtins").dict(mha.named_parameters())
    for name, array in weights.items():
        parameters[name].data = array.copy()
    cache = attention.KVCache()
    steps = []
    with mt.use_backend("numpy"), mt.no_grad():
        for t in range(x.shape[1]):
            steps.append(mha(mt.tensor(x[:, t : t + 1]), is_causal=True, cache=cache).data)
    if not all(type(step) is np.ndarray for step in steps):
        return {"steps": "(not arrays)", "length": len(cache)}
    return {"steps": np.concatenate(steps, axis=1), "length": len(cache)}


# 1 -------------------------------------------------------------------------
def _random_graph(generator, size):
    """[(op, left, right)]: node i + 1 is op over two earlier nodes (some used twice)."""
    graph = []
    for number in range(1, size + 1):
        left, right = generator.integers(0, number, 2)
        graph.append((str(generator.choice(["add", "mul", "neg"])), int(left), int(right)))
    return graph


def _check_order(graph, order):
    """Each node before every node it reads; every node that reaches the last one, once."""
    reaches, stack = set(), [len(graph)]
    while stack:
        node = stack.pop()
        if node in reaches or node == 0:
            continue
        reaches.add(node)
        op, left, right = graph[node - 1]
        stack += [left] if op == "neg" else [left, right]
    assert type(order) is list and sorted(order) == sorted(reaches), (
        f"topological_order returned nodes {order}; the nodes reachable from the output are {sorted(reaches)}")
    position = {node: i for i, node in enumerate(order)}
    for node in order:
        op, left, right = graph[node - 1]
        for source in ([left] if op == "neg" else [left, right]):
            if source:
                assert position[node] < position[source], (
                    f"node {node} ({op}) reads node {source} but comes after it in the order {order}")


@task("topological_order")
def test_consumers_come_before_their_inputs(student):
    diamond = [("neg", 0, 0), ("add", 1, 0), ("add", 2, 1)]  # a is used twice: by b and by c
    _check_order(diamond, student.call(probe_topological_order, diamond))
    generator = rng()
    for size in (5, 12, 30):
        graph = _random_graph(generator, size)
        _check_order(graph, student.call(probe_topological_order, graph))


@task("topological_order")
def test_a_diamond_and_a_long_chain_backpropagate(student):
    length = int(rng().integers(20_000, 25_000))
    answer = student.call(probe_chain_and_diamond, length)
    assert_close("x.grad (diamond)", answer.get("diamond"), [-1.0, -1.0], 0, 0)
    assert_close(f"y.grad (a {length:,}-op chain)", answer.get("chain"), 1.0, 0, 0)


# 2 -------------------------------------------------------------------------
ELEMENTWISE = {
    "mul": ("a * b", "a * b"),
    "div": ("a / b", "a / b"),
    "exp": ("a.exp() + b * 0.0", "a.exp() + b * 0.0"),
    "tanh": ("a.tanh() + b", "a.tanh() + b"),
}


def _upstream(theirs, inputs):
    out_shape = eval(theirs, {"torch": torch, "np": np},
                     {name: torch.tensor(array) for name, array in inputs.items()}).shape
    return rng().standard_normal(tuple(out_shape))


def _compare_expression(student, ours, theirs, inputs, imports=(), rtol=1e-9, atol=1e-11):
    upstream = _upstream(theirs, inputs)
    expected = torch_expression(theirs, inputs, upstream)
    assert_matches(student.call(probe_expression, ours, inputs, upstream, imports), expected, rtol, atol)


def _timed_expression(student, ours, theirs, inputs, imports=(), rtol=1e-9, atol=1e-11):
    """The expression at a large size: its values, and its time against PyTorch's for the same
    forward and backward (plus the cost of sending the arrays), both measured in this run."""
    upstream = _upstream(theirs, inputs)
    expected = torch_expression(theirs, inputs, upstream)
    reference = best_seconds(lambda: torch_expression(theirs, inputs, upstream)) + wire_seconds(inputs, upstream, expected)
    student.call(probe_expression, "x + x", {"x": np.ones(2)}, np.ones(2), imports)  # the worker started and warm
    sizes = " and ".join(f"{name} {array.shape}" for name, array in inputs.items())
    what = f"{ours} with {sizes}, forward and backward"
    answer, seconds = student.measure(probe_expression, ours, inputs, upstream, imports, within_s=budget(what, reference))
    assert_matches(answer, expected, rtol, atol)
    assert_fits_budget(what, seconds, reference)


@task("elementwise_backward")
@work
def test_elementwise_backward_at_a_large_size(student):
    generator = rng()
    size = shape(generator, 300, 600, 2)
    inputs = {"a": generator.standard_normal(size), "b": generator.uniform(0.5, 2.0, size)}
    _timed_expression(student, "(a * b).tanh() / b + a.exp()", "(a * b).tanh() / b + a.exp()", inputs,
                      rtol=1e-12, atol=1e-14)


@task("elementwise_backward")
@pytest.mark.parametrize("op", list(ELEMENTWISE))
def test_elementwise_backward_matches_torch(student, op):
    generator = rng()
    size = shape(generator, 1, 7, int(generator.integers(1, 4)))
    inputs = {"a": generator.standard_normal(size), "b": generator.uniform(0.5, 2.0, size)}
    _compare_expression(student, *ELEMENTWISE[op], inputs, rtol=1e-13, atol=1e-15)


# 3 -------------------------------------------------------------------------
def _broadcast_pair(generator):
    """(big, small): a shape, and one that broadcasts to it (axes dropped on the left, some set to 1)."""
    big = shape(generator, 1, 5, int(generator.integers(0, 5)))
    small = tuple(1 if generator.random() < 0.4 else n for n in big[int(generator.integers(0, len(big) + 1)):])
    return big, small


@task("unbroadcast")
@work
def test_broadcasting_gradients_at_a_large_size(student):
    generator = rng()
    rows, columns = shape(generator, 300, 600, 2)
    inputs = {"a": generator.standard_normal((rows, columns)),
              "b": generator.standard_normal((columns,) if generator.random() < 0.5 else (rows, 1))}
    _timed_expression(student, "a + b * a", "a + b * a", inputs)


@task("unbroadcast")
def test_summing_over_the_summed_axes_gives_torchs_gradient(student):
    """Summing a gradient of the big shape over the axes summed_axes names must give what PyTorch
    sends to the small operand of a broadcast sum, reshaped; and no axis is named twice."""
    generator = rng()
    pairs = [_broadcast_pair(generator) for _ in range(8)]
    got = student.call(probe_summed_axes, pairs)
    assert type(got) is list and len(got) == len(pairs), f"summed_axes: expected one list per pair, got {got!r}"
    for (big, small), axes in zip(pairs, got):
        assert type(axes) is list and all(type(a) is int and 0 <= a < len(big) for a in axes) \
            and len(set(axes)) == len(axes), f"summed_axes({big}, {small}): {axes!r} is not a list of distinct axes of {big}"
        grad = generator.standard_normal(big)
        b = torch.zeros(small, dtype=torch.float64, requires_grad=True)
        (torch.zeros(big, dtype=torch.float64) + b).backward(torch.from_numpy(grad))
        summed = np.asarray(grad.sum(axis=tuple(axes)) if axes else grad)
        assert summed.size == b.grad.numel(), (
            f"summed_axes({big}, {small}) = {axes}: the sum over those axes has {summed.size} elements, "
            f"the operand {b.grad.numel()}")
        assert_close(f"the gradient of a {small} operand broadcast to {big}, summed over {axes}",
                     summed.reshape(small), b.grad.numpy(), 1e-12, 1e-12)


@task("unbroadcast")
@pytest.mark.parametrize("case", range(4))
def test_broadcasting_gradients_match_torch(student, case):
    generator = rng()
    big, small = _broadcast_pair(generator)
    shapes = (big, small) if case % 2 else (small, big)
    inputs = {"a": generator.standard_normal(shapes[0]), "b": generator.standard_normal(shapes[1])}
    _compare_expression(student, "a + b * a", "a + b * a", inputs)


@task("matmul_backward")
@work
def test_matmul_backward_at_a_large_size(student):
    generator = rng()
    n, k, m = shape(generator, 150, 250, 3)
    inputs = {"a": generator.standard_normal((n, k)), "b": generator.standard_normal((k, m))}
    _timed_expression(student, "a @ b", "torch.matmul(a, b)", inputs)


# 4 -------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["(n,k) (k,m)", "(B,n,k) (k,m)", "(B,1,n,k) (C,k,m)", "(k,) (k,m)", "(B,n,k) (k,)",
                                  "(k,) (k,)"])
@task("matmul_backward")
def test_matmul_backward_matches_torch(student, form):
    generator = rng()
    sizes = dict(zip("nkmBC", (int(n) for n in generator.integers(1, 6, 5))))
    shapes = [tuple(sizes.get(axis, 1) for axis in operand.strip("()").split(",") if axis) for operand in form.split()]
    inputs = {"a": generator.standard_normal(shapes[0]), "b": generator.standard_normal(shapes[1])}
    _compare_expression(student, "a @ b", "torch.matmul(a, b)", inputs)


# 5 -------------------------------------------------------------------------
def _reductions(axis, keepdims, ndim):
    dims = tuple(range(ndim)) if axis is None else axis
    return [
        (f"x.sum(axis={axis!r}, keepdims={keepdims})", f"x.sum(dim={dims!r}, keepdim={keepdims})"),
        (f"x.mean(axis={axis!r}, keepdims={keepdims})", f"x.mean(dim={dims!r}, keepdim={keepdims})"),
        (f"x.var(axis={axis!r}, keepdims={keepdims})", f"x.var(dim={dims!r}, keepdim={keepdims}, correction=0)"),
        (f"x.max(axis={axis!r}, keepdims={keepdims})", f"x.amax(dim={dims!r}, keepdim={keepdims})"),
        (f"x.min(axis={axis!r}, keepdims={keepdims})", f"x.amin(dim={dims!r}, keepdim={keepdims})"),
    ]


@task("reductions")
@work
def test_reductions_at_a_large_size(student):
    generator = rng()
    inputs = {"x": generator.standard_normal(shape(generator, 300, 600, 2))}
    for ours, theirs in _reductions(int(generator.integers(0, 2)), bool(generator.integers(0, 2)), 2):
        _timed_expression(student, ours, theirs, inputs)


@task("reductions")
@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_reductions_match_torch(student, axis, keepdims):
    inputs = {"x": rng().standard_normal(shape(rng(), 1, 6, 3))}
    for ours, theirs in _reductions(axis, keepdims, 3):
        _compare_expression(student, ours, theirs, inputs)


@task("reductions")
def test_max_and_min_share_the_gradient_between_ties(student):
    generator = rng()
    x = generator.integers(0, 3, shape(generator, 2, 7, 2)).astype(float)  # few values: many ties
    for ours, theirs in [("x.max(axis=1)", "x.amax(dim=1)"), ("x.min(axis=0)", "x.amin(dim=0)"), ("x.max()", "x.amax()")]:
        _compare_expression(student, ours, theirs, {"x": x})


# 6 -------------------------------------------------------------------------
@task("gradcheck_central_difference")
def test_the_central_difference_estimates_each_partial_and_restores_x(student):
    x = rng().standard_normal(shape(rng(), 1, 4, 2))
    exact = torch.autograd.functional.jacobian(lambda t: (torch.sin(t) * t**2).sum(), torch.from_numpy(x)).numpy()
    for j in range(x.size):
        answer = student.call(probe_central_difference, x, j, 1e-5)
        assert_close(f"the partial derivative at element {j}", answer.get("partial"), exact.reshape(-1)[j], 1e-7, 1e-8)
        assert_close("x after the estimate (it must be left as it was)", answer.get("x_after"), x, 0, 0)


@task("softmax_backward")
@work
def test_softmax_backward_at_a_large_size(student):
    """Timed at a large size: a backward that estimates each gradient element numerically does
    not fit the budget. (Whether it is a formula is judged off the forward's image, on saved
    tensors no forward produces: tests/test_homework_teacher.py.)"""
    generator = rng()
    inputs = {"x": generator.standard_normal((int(generator.integers(20, 50)), int(generator.integers(4000, 8000))))}
    axis = -1 if generator.random() < 0.5 else 0
    _timed_expression(student, f"x.softmax(axis={axis})", f"torch.softmax(x, dim={axis})", inputs,
                      rtol=1e-10, atol=1e-12)


# 7 -------------------------------------------------------------------------
@task("softmax_backward")
@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_backward(student, axis):
    _compare_expression(student, f"x.softmax(axis={axis})", f"torch.softmax(x, dim={axis})",
                        {"x": rng().standard_normal(shape(rng(), 1, 8, 2)) * 3}, rtol=1e-10, atol=1e-12)


# 8 -------------------------------------------------------------------------
def _layer_norm_inputs(generator, rows, d):
    return {"x": generator.standard_normal((rows, d)) * 2 + 1, "w": generator.standard_normal(d),
            "b": generator.standard_normal(d)}


@task("layer_norm_backward")
@work
def test_layer_norm_backward_at_a_large_size(student):
    """Timed at a large size (and judged off the forward's image: tests/test_homework_teacher.py)."""
    generator = rng()
    rows, d = int(generator.integers(100, 200)), int(generator.integers(1000, 2000))
    _timed_expression(student, "LayerNormFunction.apply(x, w, b, eps=1e-5)",
                      f"torch.nn.functional.layer_norm(x, ({d},), w, b, eps=1e-5)", _layer_norm_inputs(generator, rows, d),
                      imports=["models.layernorm:LayerNormFunction"], rtol=1e-9, atol=1e-11)


@task("layer_norm_backward")
def test_layer_norm_backward(student):
    generator = rng()
    rows, d = shape(generator, 1, 8, 2)
    eps = float(generator.choice([1e-5, 1e-3, 0.1]))
    _compare_expression(student, f"LayerNormFunction.apply(x, w, b, eps={eps})",
                        f"torch.nn.functional.layer_norm(x, ({d},), w, b, eps={eps})", _layer_norm_inputs(generator, rows, d),
                        imports=["models.layernorm:LayerNormFunction"], rtol=1e-9, atol=1e-11)


# 9 -------------------------------------------------------------------------
@task("attention_masks")
@pytest.mark.parametrize("size", ["small", "large"])
def test_the_causal_mask(student, size):
    T = int(rng().integers(2, 9) if size == "small" else rng().integers(9, 40))
    mask = array_of(student.call(probe_causal_mask, T, T), "mask", shape=(T, T), dtype=bool)
    assert_same_mask(f"causal_mask({T}, {T}) (PyTorch's nn.Transformer.generate_square_subsequent_mask)", mask, future(T))


@task("attention_masks")
def test_masked_attention_matches_torch(student):
    generator = rng()
    T, d = int(generator.integers(3, 8)), int(generator.integers(2, 6))
    q, k, v = (generator.standard_normal((2, T, d)) for _ in range(3))
    padding = generator.random(T) < 0.3  # hide these keys from everyone
    padding[0] = False  # every query sees a key
    hidden = future(T) | padding
    out, weights = attention(q, k, v, hidden)
    tensors = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    scores = tensors[0] @ tensors[1].transpose(-1, -2) / np.sqrt(d)
    reference = torch.softmax(scores.masked_fill(torch.from_numpy(hidden), float("-inf")), dim=-1) @ tensors[2]
    reference.backward(torch.ones_like(reference))
    expected = {"out": out, "weights": weights, "dq": tensors[0].grad.numpy(), "dk": tensors[1].grad.numpy(),
                "dv": tensors[2].grad.numpy()}
    answer = student.call(probe_masked_attention, q, k, v, padding)
    with names_the_node(student, probe_graph, "attention", 0, 0, {}, [q, k, v], generator.standard_normal(out.shape),
                        padding):
        assert_matches(answer, expected, 1e-9, 1e-11)


# 10 ------------------------------------------------------------------------
@task("multihead_split_merge")
def test_split_and_merge_heads(student):
    generator = rng()
    heads, d_head = int(generator.integers(2, 6)), int(generator.integers(1, 5))
    x = generator.standard_normal((int(generator.integers(1, 4)), int(generator.integers(1, 6)), heads * d_head))
    answer = student.call(probe_split_merge, x, heads)
    expected = torch.from_numpy(x).unflatten(-1, (heads, d_head)).transpose(1, 2).numpy()  # (B, heads, T, d_head)
    assert_close(f"split_heads(x of {x.shape}, {heads})", answer.get("heads"), expected, 0, 0)
    assert_close(f"merge_heads(split_heads(x, {heads}))", answer.get("merged"), x, 0, 0)


def _mha_weights(theirs, attribute="data"):
    """PyTorch's nn.MultiheadAttention weights (or their gradients) under minitensor's names."""
    get = (lambda p: p.detach().numpy().copy()) if attribute == "data" else (lambda p: p.grad.numpy().copy())
    d = theirs.embed_dim
    w_q, w_k, w_v = get(theirs.in_proj_weight).reshape(3, d, d)
    b_q, b_k, b_v = get(theirs.in_proj_bias).reshape(3, d)
    return {"w_q.weight": w_q, "w_k.weight": w_k, "w_v.weight": w_v, "w_q.bias": b_q, "w_k.bias": b_k,
            "w_v.bias": b_v, "w_o.weight": get(theirs.out_proj.weight), "w_o.bias": get(theirs.out_proj.bias)}


@task("multihead_split_merge")
def test_multihead_attention_matches_torch(student):
    generator = rng()
    heads = int(generator.integers(1, 4))
    d = heads * int(generator.integers(2, 5))
    theirs = torch.nn.MultiheadAttention(d, heads, batch_first=True, dtype=torch.float64)
    for parameter in theirs.parameters():  # PyTorch starts the biases at 0; make every weight count
        parameter.data = torch.randn_like(parameter) * 0.3
    size = (int(generator.integers(1, 3)), int(generator.integers(2, 7)), d)
    x, upstream = generator.standard_normal(size), generator.standard_normal(size)
    t = torch.tensor(x, requires_grad=True)
    out = theirs(t, t, t, need_weights=False)[0]
    out.backward(torch.from_numpy(upstream))
    expected = {"out": out.detach().numpy(), "dx": t.grad.numpy(),
                **{f"d{k}": v for k, v in _mha_weights(theirs, "grad").items()}}
    answer = student.call(probe_module, "mha", d, heads, _mha_weights(theirs), x, upstream)
    with names_the_node(student, probe_graph, "mha", d, heads, _mha_weights(theirs), [x], upstream):
        assert_matches(answer, expected, 1e-9, 1e-11)


# 11 ------------------------------------------------------------------------
def _torch_block(d, heads):
    """PyTorch's own pre-norm transformer layer (norm_first=True, exact GELU, no dropout): the
    seed's block, written by PyTorch, not by this course."""
    return torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0, activation="gelu",
                                            batch_first=True, norm_first=True, dtype=torch.float64)


def _block_weights(theirs, attribute="data"):
    get = (lambda p: p.detach().numpy().copy()) if attribute == "data" else (lambda p: p.grad.numpy().copy())
    d = theirs.self_attn.embed_dim
    w_q, w_k, w_v = get(theirs.self_attn.in_proj_weight).reshape(3, d, d)
    b_q, b_k, b_v = get(theirs.self_attn.in_proj_bias).reshape(3, d)
    return {"ln1.weight": get(theirs.norm1.weight), "ln1.bias": get(theirs.norm1.bias),
            "ln2.weight": get(theirs.norm2.weight), "ln2.bias": get(theirs.norm2.bias),
            "attn.w_q.weight": w_q, "attn.w_k.weight": w_k, "attn.w_v.weight": w_v,
            "attn.w_q.bias": b_q, "attn.w_k.bias": b_k, "attn.w_v.bias": b_v,
            "attn.w_o.weight": get(theirs.self_attn.out_proj.weight), "attn.w_o.bias": get(theirs.self_attn.out_proj.bias),
            "mlp.fc1.weight": get(theirs.linear1.weight), "mlp.fc1.bias": get(theirs.linear1.bias),
            "mlp.fc2.weight": get(theirs.linear2.weight), "mlp.fc2.bias": get(theirs.linear2.bias)}


@task("pre_norm_block")
def test_pre_norm_block_matches_pytorchs(student):
    generator = rng()
    heads = int(generator.integers(1, 4))
    d = heads * int(generator.integers(2, 5))
    theirs = _torch_block(d, heads)
    for parameter in theirs.parameters():  # PyTorch starts the norms at 1 and 0; make every weight count
        parameter.data = torch.randn_like(parameter) * 0.3
    size = (int(generator.integers(1, 3)), int(generator.integers(2, 6)), d)
    x, upstream = generator.standard_normal(size), generator.standard_normal(size)
    t = torch.tensor(x, requires_grad=True)
    out = theirs(t)
    out.backward(torch.from_numpy(upstream))
    expected = {"out": out.detach().numpy(), "dx": t.grad.numpy(),
                **{f"d{k}": v for k, v in _block_weights(theirs, "grad").items()}}
    answer = student.call(probe_module, "block", d, heads, _block_weights(theirs), x, upstream)
    with names_the_node(student, probe_graph, "block", d, heads, _block_weights(theirs), [x], upstream):
        assert_matches(answer, expected, 1e-9, 1e-11)


@task("tiled_attention")
@work
def test_tiled_attention_backward_at_a_large_size_and_in_little_memory(student):
    generator = rng()
    T, is_causal = int(generator.integers(600, 900)), bool(generator.integers(0, 2))
    q, k, v, upstream = _attention_inputs(generator, T, 16)
    expected = _torch_attention(q, k, v, upstream, is_causal)
    reference = best_seconds(lambda: _torch_attention(q, k, v, upstream, is_causal)) + wire_seconds(q, k, v, upstream, expected)
    student.call(probe_attention_op, *(a[:, :3] for a in (q, k, v, upstream)), is_causal)  # the worker warm
    what = f"attention of {T} queries and keys, forward and backward"
    answer, seconds = student.measure(probe_attention_op, q, k, v, upstream, is_causal, within_s=budget(what, reference))
    assert_matches(answer, expected, 1e-9, 1e-10)
    assert_fits_budget(what, seconds, reference)

    # Then under a memory limit a (T, T) array of float64 scores does not fit: only a kernel that
    # holds a tile of scores at a time passes (forward and backward).
    T = int(generator.integers(3000, 3600))
    q, k, v, upstream = (a[:1] for a in _attention_inputs(generator, T, 8))
    is_causal = bool(generator.integers(0, 2))
    expected = _torch_attention(q, k, v, upstream, is_causal)
    limit = 8 * T * T / 2**20 / 3  # MiB: a third of one (T, T) array of float64
    student.call(probe_attention_op, *(a[:, :300] for a in (q, k, v, upstream)), is_causal)  # imported before
    student.call(probe_blas_ready)
    answer = student.call_within(limit, probe_attention_op, q, k, v, upstream, is_causal)
    assert_matches(answer, expected, 1e-9, 1e-10)


# 12 ------------------------------------------------------------------------
@task("tiled_attention")
@pytest.mark.parametrize("is_causal", [False, True])
def test_tiled_attention_equals_the_definition(student, is_causal):
    generator = rng()
    keys = int(generator.integers(260, 420))  # several tiles of keys
    queries = keys if is_causal else int(generator.integers(1, 300))  # causal: as many queries as keys (more
    # keys: the teacher's tests)
    q, k, v = (generator.standard_normal((2, n, 4)) for n in (queries, keys, keys))
    v = v[..., :3].copy()
    mask = generator.random((queries, keys)) < 0.2
    mask[np.arange(queries), np.arange(queries)] = False  # every query sees a key (an empty row: zeros, not NaN)
    hidden = mask | (future(keys) if is_causal else False)
    answer = student.call(probe_tiled_attention, q, k, v, mask, is_causal)
    expected_out, _ = attention(q, k, v, hidden)
    scores = (torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) / 2.0).masked_fill(torch.from_numpy(hidden), float("-inf"))
    assert_close("out", answer.get("out"), expected_out, 1e-9, 1e-10)
    row_max = array_of(answer, "row_max", shape=(2, queries))
    row_sum = array_of(answer, "row_sum", shape=(2, queries))
    assert_close("row_max + log(row_sum) (the log-sum-exp of each row)", row_max + np.log(row_sum),
                 torch.logsumexp(scores, dim=-1).numpy(), 1e-9, 1e-10)


def _attention_inputs(generator, T, d):
    return [generator.standard_normal((2, T, d)) for _ in range(3)] + [generator.standard_normal((2, T, d))]


def _torch_attention(q, k, v, upstream, is_causal):
    tensors = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*tensors, is_causal=is_causal)
    out.backward(torch.from_numpy(upstream))
    return {"out": out.detach().numpy(), "dq": tensors[0].grad.numpy(), "dk": tensors[1].grad.numpy(),
            "dv": tensors[2].grad.numpy()}


# 13 ------------------------------------------------------------------------
@task("kv_cache")
def test_kv_cache_generation_equals_full_attention(student):
    generator = rng()
    heads, T = int(generator.integers(1, 4)), int(generator.integers(2, 9))
    d = heads * int(generator.integers(2, 5))
    theirs = torch.nn.MultiheadAttention(d, heads, batch_first=True, dtype=torch.float64)
    x = generator.standard_normal((1, T, d))
    t = torch.from_numpy(x)
    full = theirs(t, t, t, attn_mask=torch.from_numpy(future(T)), need_weights=False)[0].detach().numpy()
    answer = student.call(probe_kv_cache, d, heads, _mha_weights(theirs), x)
    with names_the_node(student, probe_graph, "kv_cache", d, heads, _mha_weights(theirs), [x],
                        generator.standard_normal(x.shape)):
        assert_close("the outputs token by token with the cache", answer.get("steps"), full, 1e-9, 1e-11)
    assert answer.get("length") == T, f"len(cache) after {T} tokens: yours {answer.get('length')!r}, expected {T}"


# Demo tasks: the functions a demo's task asks for, on inputs drawn here --------------


def probe_demo(side, name, function, *args):
    """demos/NAME.py's FUNCTION(*args), without running the demo's experiment (the worker's
    load_demo); tensors come back as their arrays."""
    mt = side.module("minitensor")
    demo = side.toolbox("load_demo")(name)
    result = getattr(demo, function)(*[mt.tensor(a) if hasattr(a, "dtype") and a.dtype.kind == "f" else a for a in args])
    return side.toolbox("plain_values")(result)


def _flops(function):
    with FlopCounterMode(display=False) as counter:
        function()
    return counter.get_total_flops()


@task("demo_attention_cost")
def test_the_counts_of_a_layer_are_what_its_products_do(student):
    generator = rng()
    for _ in range(3):
        T, d = int(generator.integers(2, 300)), int(generator.integers(2, 100))
        x = torch.zeros(T, d)
        layer = [torch.nn.Linear(d, d, bias=False) for _ in range(4)]
        mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d, bias=False), torch.nn.Linear(4 * d, d, bias=False))
        weights = _flops(lambda: [linear(x) for linear in layer] + [mlp(x)])
        attention_part = _flops(lambda: (x @ x.T) @ x)  # the scores, then the weighted sum
        got = student.call(probe_demo, "attention_cost", "weight_operations", T, d)
        assert got == weights, f"weight_operations({T}, {d}): yours {got}, PyTorch's products do {weights}"
        got = student.call(probe_demo, "attention_cost", "attention_operations", T, d)
        assert got == attention_part, f"attention_operations({T}, {d}): yours {got}, PyTorch's products do {attention_part}"


@task("demo_attention_cost")
def test_the_two_counts_meet_at_t_equal_6d(student):
    for d in [int(n) for n in rng().integers(2, 200, 3)]:
        weights = student.call(probe_demo, "attention_cost", "weight_operations", 6 * d, d)
        attention_part = student.call(probe_demo, "attention_cost", "attention_operations", 6 * d, d)
        assert weights == attention_part and weights > 0, (
            f"at T = 6d (d = {d}) the seed finds the two counts equal; yours {weights} and {attention_part}")
        x = torch.zeros(6 * d, d)
        assert attention_part == _flops(lambda: (x @ x.T) @ x), (
            f"attention_operations({6 * d}, {d}): yours {attention_part}, not what PyTorch's products do")


@task("demo_scaling")
def test_the_softmax_jacobian_norm(student):
    p = torch.softmax(torch.from_numpy(rng().standard_normal(shape(rng(), 2, 9, 2)) * 2), dim=-1).numpy()
    norms = [torch.linalg.matrix_norm(torch.autograd.functional.jacobian(lambda z: torch.softmax(z, 0), torch.log(torch.from_numpy(row))))
             for row in p]
    got = student.call(probe_demo, "scaling", "jacobian_norm", p)
    assert_close("jacobian_norm(p)", np.asarray(got) if type(got) is float else got, np.mean([n.item() for n in norms]), 1e-9, 1e-12)


@task("demo_scaling")
@pytest.mark.parametrize("width", ["narrow", "wide"])
def test_the_statistics_of_raw_and_scaled_scores(student, width):
    d = int(rng().integers(2, 32) if width == "narrow" else rng().integers(100, 400))
    s = rng().standard_normal(shape(rng(), 10, 60, 2)) * np.sqrt(d)
    raw, scaled = torch.from_numpy(s), torch.from_numpy(s) / np.sqrt(d)
    expected = []
    for scores in (raw, scaled):
        expected.append(scores.var(correction=0).item())
    for scores in (raw, scaled):
        expected.append(torch.softmax(scores, -1).amax(-1).mean().item())
    for scores in (raw, scaled):
        weights = torch.softmax(scores, -1)
        jacobians = torch.diag_embed(weights) - weights[:, :, None] * weights[:, None, :]
        expected.append(torch.linalg.matrix_norm(jacobians).mean().item())
    got = student.call(probe_demo, "scaling", "score_statistics", s, d)
    names = ["variance unscaled", "variance scaled", "largest weight unscaled", "largest weight scaled",
             "Jacobian norm unscaled", "Jacobian norm scaled"]
    assert type(got) is list and len(got) == 6, f"score_statistics: expected 6 numbers, got {got!r}"
    for name, mine, theirs in zip(names, got, expected):
        assert_close(name, np.asarray(mine, dtype=float) if isinstance(mine, (int, float)) else mine, theirs, 1e-9, 1e-12)


@task("demo_stacking")
def test_two_layers_collapse_into_one(student):
    generator = rng()
    T, d = shape(generator, 2, 9, 2)
    X = generator.standard_normal((T, d))
    A1, A2 = (torch.softmax(torch.from_numpy(generator.standard_normal((T, T))), -1).numpy() for _ in range(2))
    W1, W2 = generator.standard_normal((d, d)), generator.standard_normal((d, d))
    answer = student.call(probe_demo, "stacking", "collapse", A1, A2, W1, W2)
    assert type(answer) is list and len(answer) == 2, f"collapse: expected (alpha*, Wv*), got {type(answer).__name__}"
    A_star, W_star = array_of({"a": answer[0]}, "a", (T, T)), array_of({"w": answer[1]}, "w", (d, d))
    two_layers = A2 @ (A1 @ X @ W1) @ W2
    assert_close("alpha* X Wv* (the one layer's output)", A_star @ X @ W_star, two_layers, 1e-9, 1e-11)
    assert_close("the rows of alpha* (each sums to 1)", A_star.sum(axis=1), np.ones(T), 1e-9, 1e-12)


@task("demo_multihead")
def test_the_count_by_hand_is_nn_multiheadattentions(student):
    for d in [4 * int(n) for n in rng().integers(1, 1024, 4)]:
        expected = sum(p.numel() for p in torch.nn.MultiheadAttention(d, 4).parameters())
        got = student.call(probe_demo, "multihead", "count_by_hand", d)
        assert got == expected, f"count_by_hand({d}): yours {got!r}, nn.MultiheadAttention({d}, 4) has {expected}"


@task("demo_causal_self_attention")
@pytest.mark.parametrize("size", ["small", "large"])
def test_the_four_panels(student, size):
    generator = rng()
    T, d = int(generator.integers(3, 8) if size == "small" else generator.integers(8, 20)), int(generator.integers(2, 8))
    Q, K, V = (generator.standard_normal((T, d)) for _ in range(3))
    answer = student.call(probe_demo, "causal_self_attention", "causal_self_attention", Q, K, V)
    assert type(answer) is list and len(answer) == 4, "causal_self_attention: expected (scores, hidden, A, Y)"
    scores = torch.from_numpy(Q) @ torch.from_numpy(K).T / np.sqrt(d)
    expected_hidden = future(T)
    assert_same_mask("the causal mask", answer[1], expected_hidden)
    weights, out = attention(Q, K, V, expected_hidden)[1], attention(Q, K, V, expected_hidden)[0]
    assert_close("scores", answer[0], scores.numpy())
    assert_close("A (the weights)", answer[2], weights)
    assert_close("Y (the outputs)", answer[3], out)


KV_LABELS = ["multi-head ({heads} KV heads)", "grouped-query (8 KV heads)", "multi-query (1 KV head)",
             "latent (512 + 64 numbers, MLA)"]


@task("demo_kv_cache")
def test_the_cache_sizes_of_the_seeds_model_and_of_others(student):
    """The seed's numbers at its own configuration, and at random configurations sizes in whole
    bytes, in proportion to the number of layers, to the key-value heads each way keeps and to
    their width, as the seed's table compares them (one test: numbers stored for the seed's
    configuration alone earn nothing)."""
    sizes = student.call(probe_demo, "kv_cache", "cache_sizes", 80, 64, 128)
    labels = [label.format(heads=64) for label in KV_LABELS]
    assert type(sizes) is dict and list(sizes) == labels, f"cache_sizes: expected the keys {labels}, got {sizes!r}"
    full = sizes[labels[0]]
    assert round(full / 1e6, 1) == 2.6, f"multi-head: {full / 1e6:.2f} MB per token; the seed says 2.6"
    assert round(full * 32768 / 1e9) == 86, f"multi-head at 32,768 tokens: {full * 32768 / 1e9:.1f} GB; the seed says 86"
    assert full / sizes[labels[1]] == 8, f"grouped-query: {full / sizes[labels[1]]:g}x less; the seed says 8x"
    latent = sizes[labels[3]]
    assert latent == 80 * (512 + 64) * 2, (
        f"latent: {latent} bytes per token; its label's 512 + 64 numbers a layer, 2 bytes each as the other ways "
        f"count, over the seed's 80 layers give another number")
    generator = rng()
    for _ in range(3):
        layers, groups, d_head = int(generator.integers(1, 100)), int(generator.integers(1, 9)), int(generator.integers(8, 257))
        heads = 8 * groups
        sizes = student.call(probe_demo, "kv_cache", "cache_sizes", layers, heads, d_head)
        twice = student.call(probe_demo, "kv_cache", "cache_sizes", 2 * layers, heads, 2 * d_head)
        labels = [label.format(heads=heads) for label in KV_LABELS]
        where = f"cache_sizes({layers}, {heads}, {d_head})"
        assert type(sizes) is dict and list(sizes) == labels, f"{where}: expected the keys {labels}, got {sizes!r}"
        assert all(type(n) is int and n > 0 for n in sizes.values()), f"{where}: expected whole numbers of bytes"
        multi_head, grouped, multi_query, latent = (sizes[label] for label in labels)
        assert multi_head * 8 == grouped * heads and grouped == 8 * multi_query, (
            f"{where}: multi-head, grouped-query (8 KV heads) and multi-query (1) are not in the proportion of "
            f"their key-value heads ({heads} : 8 : 1)")
        assert type(twice) is dict and [twice.get(label) for label in labels[:3]] == [4 * n for n in sizes.values()][:3], (
            f"{where}: twice the layers of twice the width should hold four times as many bytes in each of the "
            f"first three ways")
        assert twice.get(labels[3]) == 2 * latent, f"{where}: the latent cache should grow with the layers alone"
