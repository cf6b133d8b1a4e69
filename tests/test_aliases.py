"""Tensors that share memory (views and detach()) share one version counter, so an in-place
change through any alias is seen by every node that saved the memory, as in PyTorch.

The explicit cases come first; the last test runs random short programs (a leaf, a chain of
view ops, in-place ops on some alias, backward) in minitensor and in PyTorch: minitensor must
raise exactly when PyTorch raises, and otherwise give the same values and gradients.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import minitensor as mt

# Each view op, written once for each library: (name, minitensor, PyTorch), on a (2, 3) tensor.
VIEW_OPS = [
    ("reshape", lambda t: t.reshape(3, 2), lambda t: t.reshape(3, 2)),
    ("view", lambda t: t.view(6), lambda t: t.view(6)),
    ("slice", lambda t: t[:, 1:], lambda t: t[:, 1:]),
    ("int index", lambda t: t[1], lambda t: t[1]),
    ("0-d index", lambda t: t[1, 2], lambda t: t[1, 2]),
    ("T", lambda t: t.T, lambda t: t.T),
    ("transpose", lambda t: t.transpose(0, 1), lambda t: t.transpose(0, 1)),
    ("permute", lambda t: t.permute(1, 0), lambda t: t.permute(1, 0)),
    ("swapaxes", lambda t: t.swapaxes(0, 1), lambda t: t.swapaxes(0, 1)),
    ("expand", lambda t: t.expand(1, 2, 3), lambda t: t.expand(1, 2, 3)),
    ("unsqueeze", lambda t: t.unsqueeze(0), lambda t: t.unsqueeze(0)),
    ("squeeze", lambda t: t.unsqueeze(1).squeeze(1), lambda t: t.unsqueeze(1).squeeze(1)),
    ("detach", lambda t: t.detach(), lambda t: t.detach()),
]
VIEW_IDS = [name for name, _, _ in VIEW_OPS]
X = np.arange(1.0, 7.0).reshape(2, 3) / 4


def _inplace_through_alias(lib, make_view, grad_mode):
    """y = exp(x) saves y; change y through an alias; backward must refuse."""
    if lib is mt:
        x = mt.tensor(X, requires_grad=True)
        no_grad = mt.no_grad
    else:
        x = torch.tensor(X, requires_grad=True)
        no_grad = torch.no_grad
    y = x.exp()
    if grad_mode:
        alias = make_view(y)
        alias += 1.0
    else:
        with no_grad():
            alias = make_view(y)
            alias += 1.0
    y.sum().backward()


@pytest.mark.parametrize("grad_mode", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("name, mt_view, torch_view", VIEW_OPS, ids=VIEW_IDS)
def test_inplace_change_through_an_alias_is_caught(name, mt_view, torch_view, grad_mode):
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _inplace_through_alias(torch, torch_view, grad_mode)
    with pytest.raises(RuntimeError, match=r"Exp\.backward needs its saved output .* in-place"):
        _inplace_through_alias(mt, mt_view, grad_mode)


def test_the_issue_example_detach_then_add():
    x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = x.exp()
    d = y.detach()
    d += 1
    with pytest.raises(RuntimeError, match=r"Exp\.backward .* version 1; Exp expected version 0"):
        y.sum().backward()


@pytest.mark.parametrize("name, mt_view, torch_view", VIEW_OPS[:-1], ids=VIEW_IDS[:-1])  # (a detached z has no grad)
def test_setitem_on_the_base_is_seen_by_a_saved_view(name, mt_view, torch_view):
    """A node saved a view (Mul saves its inputs); t[index] = value on the base changes it."""
    for lib, make_view in ((torch, torch_view), (mt, mt_view)):
        x = (mt.tensor if lib is mt else torch.tensor)(X, requires_grad=True)
        y = x * 1.0
        v = make_view(y)
        z = v * v
        with (mt.no_grad if lib is mt else torch.no_grad)():
            y[0, 0] = 5.0
        with pytest.raises(RuntimeError, match="Mul.backward needs its saved|modified by an inplace"):
            z.sum().backward()


@pytest.mark.parametrize("name, mt_view, torch_view", VIEW_OPS, ids=VIEW_IDS)
def test_setitem_through_a_view_is_seen_by_the_saved_base(name, mt_view, torch_view):
    for lib, make_view in ((torch, torch_view), (mt, mt_view)):
        x = (mt.tensor if lib is mt else torch.tensor)(X, requires_grad=True)
        y = x.exp()
        with (mt.no_grad if lib is mt else torch.no_grad)():
            v = make_view(y)
            v[...] = 0.0
        with pytest.raises(RuntimeError, match="Exp.backward needs its saved|modified by an inplace"):
            y.sum().backward()


def test_a_view_writes_into_its_base_and_a_zero_d_index_is_a_view():
    """y[i] += v is y[i].__iadd__(v) then y[i] = result: two bumps each, in both libraries."""
    results = []
    for lib in (torch, mt):
        y = lib.zeros(2, 3, dtype=torch.float64) if lib is torch else mt.zeros(2, 3)
        y[1, 2] += 1.0
        y[0] += 2.0
        y.T[1] *= 3.0
        results.append((np.asarray(y), y._version if lib is torch else y.version))  # torch spells it _version
    np.testing.assert_array_equal(results[1][0], [[2.0, 6.0, 2.0], [0.0, 0.0, 1.0]])
    np.testing.assert_array_equal(results[1][0], results[0][0])
    assert results[1][1] == results[0][1]


def test_a_reshape_that_copies_is_not_an_alias():
    """reshape of a transposed tensor copies (in NumPy and in PyTorch): no shared counter."""
    for lib in (torch, mt):
        x = (mt.tensor if lib is mt else torch.tensor)(X, requires_grad=True)
        y = x.exp()
        flat = y.T.reshape(-1)
        with (mt.no_grad if lib is mt else torch.no_grad)():
            flat += 1.0
        y.sum().backward()
        np.testing.assert_allclose(np.asarray(x.grad), np.exp(X))


@pytest.mark.parametrize("write", ["+=", "*=", "masked_fill_", "setitem"])
def test_inplace_write_into_an_expanded_tensor_says_so(write):
    base = mt.zeros(1, 3)
    expanded = base.expand(4, 3)
    with pytest.raises(RuntimeError, match=r"expanded \(broadcast\) view.*clone\(\)"):
        if write == "+=":
            expanded += 1.0
        elif write == "*=":
            expanded *= 2.0
        elif write == "masked_fill_":
            expanded.masked_fill_(np.ones((4, 3), dtype=bool), 1.0)
        else:
            expanded[0, 0] = 1.0
    np.testing.assert_array_equal(base.data, 0.0)  # nothing changed
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        torch.zeros(1, 3).expand(4, 3).add_(1.0)  # PyTorch refuses it too


def test_inplace_write_into_an_expand_that_repeats_nothing_writes_the_base():
    for lib in (torch, mt):
        base = lib.zeros(1, 3)
        expanded = base.expand(1, 1, 3)
        expanded += 1.0
        np.testing.assert_array_equal(np.asarray(base), 1.0)


def test_inplace_through_a_view_rebases_the_base_as_pytorch():
    """y = 2x; y[0:1] *= 3 makes y = [6 x0, 2 x1]: dy/dx must go through the in-place op."""
    results = []
    for lib in (torch, mt):
        x = (mt.tensor if lib is mt else torch.tensor)(np.array([1.0, 2.0]), requires_grad=True)
        y = x * 2.0
        first, same_first, last = y[0:1], y[0:1], y[1:]
        first *= 3.0
        ((y * np.array([1.0, 10.0]) if lib is mt else y * torch.tensor([1.0, 10.0])).sum()
         + 100 * same_first.sum() + 1000 * last.sum()).backward()
        results.append((np.asarray(y.detach()), np.asarray(x.grad)))
    np.testing.assert_allclose(results[1][0], results[0][0])
    np.testing.assert_allclose(results[1][1], results[0][1])
    np.testing.assert_allclose(results[1][1], [6.0 + 600.0, 20.0 + 2000.0])


def test_inplace_on_the_base_reaches_its_views():
    results = []
    for lib in (torch, mt):
        x = (mt.tensor if lib is mt else torch.tensor)(np.array([1.0, 2.0]), requires_grad=True)
        w = (mt.tensor if lib is mt else torch.tensor)(np.array(0.5), requires_grad=True)
        y = x * 2.0
        view = y[0:1]
        y *= w
        view.sum().backward()
        results.append((np.asarray(x.grad), np.asarray(w.grad)))
    np.testing.assert_allclose(results[1][0], results[0][0])
    np.testing.assert_allclose(results[1][1], results[0][1])


def test_inplace_through_a_view_of_a_leaf_is_refused_as_in_pytorch():
    x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\*= on a view \(shape \(1,\)\) of a leaf tensor that requires grad"):
        view = x[0:1]
        view *= 3.0
    np.testing.assert_array_equal(x.data, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        torch.tensor([1.0, 2.0], requires_grad=True)[0:1].mul_(3.0)


def test_inplace_with_grad_on_a_view_made_in_no_grad_is_refused_as_in_pytorch():
    for lib in (torch, mt):
        x = (mt.tensor if lib is mt else torch.tensor)(np.array([1.0, 2.0]), requires_grad=True)
        y = x * 2.0
        with (mt.no_grad if lib is mt else torch.no_grad)():
            view = y[0:1]
        with pytest.raises(RuntimeError, match=r"view was created in no_grad mode|\*=: this tensor \(shape \(1,\)\) is a view made inside no_grad"):
            view *= x[1:]


def test_a_view_made_in_no_grad_is_not_used_with_grad_after_a_change_as_in_pytorch():
    for lib in (torch, mt):
        x = (mt.tensor if lib is mt else torch.tensor)(np.array([1.0, 2.0]), requires_grad=True)
        y = x * 2.0
        no_grad = mt.no_grad if lib is mt else torch.no_grad
        with no_grad():
            view = y[0:1]
            y += 1.0
        with no_grad():
            np.testing.assert_allclose(np.asarray(view * 2.0), [6.0])  # without the graph it is fine
        with pytest.raises(RuntimeError, match="view was created in no_grad mode|Mul: this tensor .* made inside no_grad"):
            view * 2.0


# Bases laid out every way NumPy allows (mt.tensor keeps an array's layout; ops keep their
# inputs' layout), each with a view chain that is a view of that layout and not of a C-ordered
# copy, then an in-place op through it (issue 21, item 1: CopySlices replayed the chain on
# C-ordered copies, so the reshape below became a copy and the base's gradient kept the
# overwritten region).
LAYOUTS = {
    "transposed": (lambda a: np.ascontiguousarray(a.T).T, (2, 3), lambda t: t.T.reshape(-1)),
    "fortran": (np.asfortranarray, (2, 3), lambda t: t.T.reshape(6)),
    "strided": (lambda a: np.ascontiguousarray(a.T).T, (4, 3), lambda t: t[::2].T.reshape(-1)[1:5]),
    "permuted 3-D": (lambda a: np.ascontiguousarray(a.transpose(2, 0, 1)).transpose(1, 2, 0), (2, 3, 4),
                     lambda t: t.permute(2, 0, 1).reshape(8, 3)[1:5]),
    "C": (np.ascontiguousarray, (2, 3), lambda t: t.reshape(-1)),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_inplace_through_a_view_of_any_layout_matches_pytorch(layout):
    lay_out, shape, make_view = LAYOUTS[layout]
    array = lay_out(np.random.default_rng(0).standard_normal(shape))
    results = []
    for lib in (torch, mt):
        x = (mt.tensor if lib is mt else torch.tensor)(array, requires_grad=True)
        b = x * 1.0  # (keeps the layout in minitensor, as NumPy does)
        if lib is mt:
            assert np.shares_memory(make_view(b).data, b.data)
        v = make_view(b)
        w = (mt.tensor if lib is mt else torch.tensor)(np.arange(1.0, v.shape[-1] + 1), requires_grad=True)
        v += w
        (b * b).sum().backward()
        results.append([np.asarray(t) for t in (b.detach(), x.grad, w.grad)])
    for mine, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)


def test_the_issue_example_transposed_base_flatten_then_add():
    x = mt.tensor(np.random.default_rng(1).standard_normal((2, 3)), requires_grad=True)
    w = mt.tensor(np.ones(6), requires_grad=True)
    b = x.T * 1.0
    v = b.T.reshape(-1)
    v += w
    b.sum().backward()
    np.testing.assert_array_equal(x.grad, np.ones((2, 3)))  # was 2.0: the region was never zeroed
    np.testing.assert_array_equal(w.grad, np.ones(6))


def test_a_view_of_a_no_grad_view_is_refused_after_an_in_place_change_as_in_pytorch():
    """Issue 21, item 2: the mark "made in no_grad" passes to every view made from such a view."""
    for lib in (torch, mt):
        x = (mt.tensor if lib is mt else torch.tensor)(np.ones(3), requires_grad=True)
        b = x * 2.0
        with (mt.no_grad if lib is mt else torch.no_grad)():
            v = b[:2]
        u = v[:]
        b += 0.0
        with pytest.raises(RuntimeError, match="created in no_grad mode|Mul: this tensor .* made inside no_grad"):
            (u * 3.0).sum().backward()
        assert x.grad is None  # (was [6, 6, 0])


def test_in_place_on_a_view_of_a_no_grad_view_is_refused_as_in_pytorch():
    for lib in (torch, mt):
        x = (mt.tensor if lib is mt else torch.tensor)(np.ones(3), requires_grad=True)
        b = x * 2.0
        with (mt.no_grad if lib is mt else torch.no_grad)():
            v = b[:2]
        u = v[:1]
        with pytest.raises(RuntimeError, match=r"view of a view which was created in no_grad|\+=: this tensor \(shape \(1,\)\) is a view made inside no_grad"):
            u += 1.0
        np.testing.assert_array_equal(np.asarray(b.detach()), [2.0, 2.0, 2.0])  # refused before any change


def test_a_parameter_shares_its_tensors_version_counter_as_in_pytorch():
    """Issue 21, item 3: nn.Parameter(t) shares t's memory, so it shares t's counter too."""
    for lib, parameter in ((torch, torch.nn.Parameter), (mt, mt.nn.Parameter)):
        t = (mt.tensor if lib is mt else torch.tensor)(np.ones(3))
        w = parameter(t)
        y = (w * w).sum()
        with (mt.no_grad if lib is mt else torch.no_grad)():
            t += 10.0
        with pytest.raises(RuntimeError, match=r"modified by an inplace|Mul\.backward needs its saved"):
            y.backward()


def test_a_views_flags_are_right_as_soon_as_its_base_changes_in_place():
    """Issue 21, item 8: after a += w, a view made before reads requires_grad and grad_fn at once."""
    flags = []
    for lib in (torch, mt):
        a = (mt.tensor if lib is mt else torch.tensor)(np.ones(3))
        w = (mt.tensor if lib is mt else torch.tensor)(np.ones(3), requires_grad=True)
        v = a[:2]
        a += w
        flags.append((v.requires_grad, v.grad_fn is None, v.is_leaf))
    assert flags[1] == flags[0] == (True, False, False)


def _memory_of_a_chain_of_views(n):
    """Bytes held by n chained views (each a view of the one before), measured by tracemalloc."""
    import tracemalloc

    y = mt.tensor(np.ones((2, 3)), requires_grad=True) * 1.0
    tracemalloc.start()
    try:
        view = y
        chain = []
        for i in range(n):
            view = view.T if i % 2 else view[:]
            chain.append(view)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(chain[-1]._view.steps) == n  # (the chain is one of views, and each knows its way to y)
    return held


def test_building_chained_views_is_linear():
    """Issue 21, item 10: each view held a copy of its source's tuple of view steps, so n chained
    views held n**2 / 2 steps (30,000 took 3 s to build, 100,000 took 96 s). Measured in bytes, not
    seconds, so a busy machine cannot fail it: twice the views must hold about twice the memory
    (a quadratic chain holds 3.7 times as much at these sizes)."""
    ratio = _memory_of_a_chain_of_views(4000) / _memory_of_a_chain_of_views(2000)
    assert ratio < 2.5, ratio


@pytest.mark.parametrize("op", ["-=", "+=", "*=", "/="])
def test_an_in_place_op_whose_operand_overlaps_the_target_gives_the_out_of_place_answer(op):
    """A documented decision (README, "How the engine works"): a -= a[:, :1] computes the
    right-hand side from the values before the write, as NumPy does, so it equals a = a - a[:, :1].
    PyTorch refuses some such overlaps and gives an order-dependent answer for others."""
    x_array = np.random.default_rng(3).standard_normal((3, 4)) + 3.0
    x = mt.tensor(x_array, requires_grad=True)
    a = x * 1.0
    operand = a[:, :1]
    {"-=": a.__isub__, "+=": a.__iadd__, "*=": a.__imul__, "/=": a.__itruediv__}[op](operand)
    x_t = torch.tensor(x_array, requires_grad=True)
    a_t = x_t * 1.0
    a_t = {"-=": a_t - a_t[:, :1], "+=": a_t + a_t[:, :1], "*=": a_t * a_t[:, :1], "/=": a_t / a_t[:, :1]}[op]
    np.testing.assert_allclose(a.data, a_t.detach().numpy(), rtol=1e-12)
    upstream = np.arange(12.0).reshape(3, 4)
    if op in ("*=", "/="):  # Mul and Div saved the operand, which the write then changed
        with pytest.raises(RuntimeError, match=r"(Mul|Div)\.backward needs its saved input 1"):
            (a * upstream).sum().backward()
        return
    (a * upstream).sum().backward()
    (a_t * torch.from_numpy(upstream)).sum().backward()
    np.testing.assert_allclose(x.grad, x_t.grad.numpy(), rtol=1e-12)


def test_every_in_place_change_bumps_through_one_method():
    """Optimizers, init and load_state_dict call views.increment_version: a view sees their changes."""
    p = mt.nn.Parameter(np.ones(3))
    view = p.detach()[1:]
    before = view.version
    mt.nn.init.zeros_(p)
    assert view.version == before + 1


# ----------------------------------------------------------------------------
# Random programs against PyTorch
# ----------------------------------------------------------------------------

SHAPES = [(2, 3), (3, 1, 2), (2, 2, 2), (4,), (1, 3)]
HEADS = ["exp", "mul", "tanh", "sigmoid", "add"]  # exp, tanh, sigmoid save their output; mul its inputs; add nothing
CONSUMERS = ["square", "exp", "scale"]  # square saves its input twice, exp its output, scale nothing
INPLACE = ["add", "mul", "add_w", "mul_w", "masked_fill", "setitem"]


@st.composite
def programs(draw):
    """A short program as data: run() replays it in either library."""
    shape = draw(st.sampled_from(SHAPES))
    # Alias 0 is y = head(x), laid out in memory as x is (LAYOUTS). An expand that repeats
    # elements ends a chain (NumPy makes every view of it read-only). A view made in no_grad,
    # and every view made from it (they carry its mark, in both libraries), may be viewed
    # again and changed in place, but is not consumed: PyTorch says such a view requires grad,
    # without sending any gradient through it; minitensor says it does not.
    shapes, terminal, repeats, without_grad = [shape], [False], [False], [False]
    views = []
    for _ in range(draw(st.integers(1, 4))):
        source = draw(st.sampled_from([i for i, done in enumerate(terminal) if not done]))
        s = shapes[source]
        ops = ["reshape", "flatten", "unsqueeze", "expand", "detach", "clone", "view_flat", "contiguous"]
        if len(s) >= 1:
            ops += ["permute", "T", "slice", "int"]
        if len(s) >= 2:
            ops += ["swapaxes"]
        if 1 in s:
            ops += ["squeeze"]
        op = draw(st.sampled_from(ops))
        if op == "reshape":
            arg, new = s[::-1], s[::-1]
        elif op == "flatten":
            arg, new = None, (int(np.prod(s)),)
        elif op == "unsqueeze":
            arg = draw(st.integers(-len(s) - 1, len(s)))
            at = arg % (len(s) + 1)
            new = s[:at] + (1,) + s[at:]
        elif op == "expand":
            arg = draw(st.sampled_from([1, 2]))
            new = (arg,) + s
        elif op in ("detach", "clone", "contiguous"):  # clone keeps the strides (a reshape of it copies
            arg, new = None, s  # exactly where PyTorch's does); contiguous is a C-ordered copy or itself
        elif op == "view_flat":  # refused by both where it would copy
            arg, new = None, (int(np.prod(s)),)
        elif op == "permute":
            arg = tuple(draw(st.permutations(range(len(s)))))
            new = tuple(s[a] for a in arg)
        elif op == "T":
            arg, new = None, s[::-1]
        elif op == "slice":
            axis = draw(st.integers(0, len(s) - 1))
            start = draw(st.integers(0, s[axis] - 1))
            stop = draw(st.integers(start + 1, s[axis]))
            step = draw(st.sampled_from([1, 2]))
            arg = (slice(None),) * axis + (slice(start, stop, step),)
            new = s[:axis] + (len(range(start, stop, step)),) + s[axis + 1 :]
        elif op == "int":
            arg = draw(st.integers(-s[0], s[0] - 1))
            new = s[1:]
        elif op == "swapaxes":
            a, b = draw(st.permutations(range(len(s))))[:2]
            arg = (a, b)
            new = list(s)
            new[a], new[b] = new[b], new[a]
            new = tuple(new)
        else:  # squeeze
            arg = draw(st.sampled_from([i for i, n in enumerate(s) if n == 1]))
            new = s[:arg] + s[arg + 1 :]
        in_no_grad = draw(st.sampled_from([False, False, False, True]))
        views.append((source, op, arg, in_no_grad))
        shapes.append(new)
        repeats.append(op == "expand" and arg > 1 or (op in ("clone", "contiguous") and repeats[source]))
        without_grad.append((in_no_grad or without_grad[source]) and op != "detach")
        terminal.append(repeats[-1])
    aliases = range(len(shapes))
    usable = [i for i in aliases if not without_grad[i]]
    consumers = draw(st.lists(st.tuples(st.sampled_from(usable), st.sampled_from(CONSUMERS)), max_size=3))
    changes = []
    for _ in range(draw(st.integers(1, 2))):
        target = draw(st.sampled_from(aliases))
        # (PyTorch's masked_fill_ on repeated elements only warns that it is deprecated)
        kind = draw(st.sampled_from([k for k in INPLACE if not (repeats[target] and k == "masked_fill")]))
        mask_seed = draw(st.integers(0, 1000))
        # t[i] = v while recording is refused by minitensor (PyTorch records it): only under no_grad
        in_no_grad = True if kind == "setitem" else draw(st.booleans())
        changes.append((target, kind, in_no_grad, mask_seed, shapes[target]))
    # hooks and retain_grad on aliases, before the changes: a view changed in place later never
    # calls its hook in PyTorch; retain_grad follows a tensor changed in place to its new value
    hooks = draw(st.lists(st.tuples(st.sampled_from(usable), st.sampled_from(["hook", "retain"])), max_size=2))
    # left out, a difference we keep (README, porting): a hook on a view that is then changed in
    # place under no_grad, with views of it made before, runs for some of their uses here
    hooks = [(i, kind) for i, kind in hooks if not any(t == i and quiet for t, _, quiet, _, _ in changes)]
    late_consumers = draw(st.lists(st.tuples(st.sampled_from(usable), st.sampled_from(CONSUMERS)), max_size=2))
    # which aliases the loss sums (besides every consumer's output): not always all of them, or
    # a program could never use one view alone after its base changed (issue 21, item 2)
    in_loss = draw(st.lists(st.sampled_from(list(aliases)), unique=True, max_size=len(aliases)))
    return dict(shape=shape, seed=draw(st.integers(0, 2**16)), head=draw(st.sampled_from(HEADS)),
                layout=draw(st.sampled_from(sorted(BASE_LAYOUTS))), views=views, consumers=consumers,
                changes=changes, late_consumers=late_consumers, in_loss=in_loss, hooks=hooks)


def _permuted(a):
    """a, stored in memory with its axes in a reversed-then-rotated order (a 3-D permutation)."""
    order = tuple(np.roll(np.arange(a.ndim)[::-1], 1))
    return np.ascontiguousarray(a.transpose(order)).transpose(np.argsort(order))


# How x (and so y = head(x): NumPy's ufuncs and PyTorch's elementwise ops keep their input's
# layout) is laid out in memory, the same in both libraries (see _Torch.tensor). A strided
# array is copied to a dense one by mt.tensor, so strided bases come from the view ops
# instead: a detach() of a strided slice is a base of its own whose array is strided.
BASE_LAYOUTS = {
    "C": np.ascontiguousarray,
    "fortran": np.asfortranarray,
    "transposed": lambda a: np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2) if a.ndim >= 2 else a,
    "permuted": _permuted,
    "strided": lambda a: np.repeat(a, 2, axis=-1)[..., ::2] if a.ndim else a,
}


class _Torch:
    # torch.from_numpy keeps the array's strides (torch.tensor would copy to C order), and
    # PyTorch's elementwise ops keep their input's layout as NumPy's do: so a reshape is a view
    # in one library exactly when it is in the other
    tensor = staticmethod(lambda a, requires_grad=False: torch.from_numpy(np.array(a)).requires_grad_(requires_grad))
    no_grad = staticmethod(torch.no_grad)
    enable_grad = staticmethod(torch.enable_grad)
    mask = staticmethod(torch.from_numpy)
    T = staticmethod(lambda t: t.permute(*reversed(range(t.ndim))))


class _Minitensor:
    tensor = staticmethod(lambda a, **kw: mt.tensor(a, **kw))
    no_grad = staticmethod(mt.no_grad)
    enable_grad = staticmethod(mt.enable_grad)
    mask = staticmethod(lambda m: m)
    T = staticmethod(lambda t: t.T)


def _view(lib, t, op, arg):
    if op == "reshape":
        return t.reshape(arg)
    if op == "flatten":
        return t.reshape(-1)
    if op == "unsqueeze":
        return t.unsqueeze(arg)
    if op == "expand":
        return t.expand((arg,) + tuple(t.shape))
    if op == "detach":
        return t.detach()
    if op == "clone":
        return t.clone()
    if op == "contiguous":
        return t.contiguous()
    if op == "view_flat":
        return t.view(-1)
    if op == "permute":
        return t.permute(arg)
    if op == "T":
        return lib.T(t)
    if op in ("slice", "int"):
        return t[arg]
    if op == "swapaxes":
        return t.swapaxes(*arg)
    return t.squeeze(arg)


def _consume(t, kind):
    if kind == "square":
        return t * t
    if kind == "exp":
        return t.exp()
    return t * 3.0


def run(lib, program):
    """The program in one library: the loss, x.grad and w.grad as arrays (None when absent)."""
    rng = np.random.default_rng(program["seed"])
    x = lib.tensor(BASE_LAYOUTS[program.get("layout", "C")](rng.standard_normal(program["shape"]) / 2), requires_grad=True)
    w = lib.tensor(np.array(0.75), requires_grad=True)
    y = {"exp": x.exp, "mul": lambda: x * 1.5, "tanh": x.tanh, "sigmoid": x.sigmoid, "add": lambda: x + 0.25}[program["head"]]()
    aliases = [y]
    for source, op, arg, in_no_grad in program["views"]:
        with lib.no_grad() if in_no_grad else lib.enable_grad():
            aliases.append(_view(lib, aliases[source], op, arg))
    outputs = [_consume(aliases[i], kind) for i, kind in program["consumers"]]
    calls, retained = [], []
    for i, kind in program.get("hooks", ()):
        if kind == "hook":
            aliases[i].register_hook(lambda g, i=i: calls.append(i) or g * 2)
        elif aliases[i].requires_grad and not aliases[i].is_leaf:
            aliases[i].retain_grad()
            retained.append(aliases[i])
    for target, kind, in_no_grad, mask_seed, shape in program["changes"]:
        t = aliases[target]
        with lib.no_grad() if in_no_grad else lib.enable_grad():
            if kind == "add":
                t += 0.5
            elif kind == "mul":
                t *= 2.0
            elif kind == "add_w":
                t += w
            elif kind == "mul_w":
                t *= w
            elif kind == "masked_fill":
                t.masked_fill_(lib.mask(np.asarray(np.random.default_rng(mask_seed).random(shape) < 0.5)), 0.25)
            else:
                t[...] = 0.5
    outputs += [_consume(aliases[i], kind) for i, kind in program["late_consumers"]]
    loss = 0.0
    in_loss = program.get("in_loss", range(len(aliases)))
    for k, t in enumerate([aliases[i] for i in in_loss] + outputs):
        loss = loss + (t * float(k + 1)).sum()
    if isinstance(loss, float):
        return np.asarray(loss), [None, None]
    if loss.requires_grad:
        loss.backward()
    if lib is _Minitensor and w.grad is not None:  # a 0-d parameter's .grad stays an array (issue 32)
        assert type(w.grad) is np.ndarray, type(w.grad)
    grads = [None if t.grad is None else np.asarray(t.grad) for t in [x, w] + retained]
    return np.asarray(loss.detach()), grads + [np.asarray(sorted(calls))]


def _outcome(lib, program):
    try:
        return run(lib, program), None
    except RuntimeError as error:
        return None, error


@settings(max_examples=300)
@given(programs())
def test_random_alias_programs_agree_with_pytorch(program):
    theirs, their_error = _outcome(_Torch, program)
    ours, our_error = _outcome(_Minitensor, program)
    assert (our_error is None) == (their_error is None), (
        f"PyTorch: {their_error!r}\nminitensor: {our_error!r}\nprogram: {program}"
    )
    if ours is None:
        return
    (our_loss, our_grads), (their_loss, their_grads) = ours, theirs
    np.testing.assert_allclose(our_loss, their_loss, rtol=1e-10, atol=1e-12)
    assert len(our_grads) == len(their_grads), program
    for mine, reference in zip(our_grads, their_grads):
        assert (mine is None) == (reference is None), program
        if mine is not None:
            np.testing.assert_allclose(mine, reference, rtol=1e-10, atol=1e-12, err_msg=str(program))
