"""Check a function's backward against central finite differences, in float64.

    mt.gradcheck(fn, x, w)          # True, or a GradcheckError that says what is wrong

For each input that requires grad, the analytic derivative (what backward computes) is compared
with a numeric one from central differences, whose error is O(eps**2). Three checks come first and
cover every element: no analytic derivative may be NaN or infinite, and a second backward with
the same inputs and incoming gradient must give the same gradients bit for bit (a backward that
keeps state between calls, or draws random numbers, fails, as in PyTorch's reentrancy check).
Small problems then compare the full Jacobian (one backward per output element). Larger ones
project the output on a random direction u and compare d(u . f)/dx: every element one by one
when there are at most `max_checked`; else the corners of the input and a random sample one by
one, and every other element in random groups (a derivative along random signs on each group),
so an error anywhere is seen, and a group that fails is halved until the element is found. The
sample and the groups are drawn anew on each call from a seed the report prints: pass it back
(seed=...) to replay a failure.

    mt.gradcheck(fn, x, leaves="all")   # also every other leaf that requires grad (parameters)

checks the parameters fn uses without taking them as arguments too, each reported by its
name in the model (block.ln1.weight). A pass without it warns when such leaves were not checked.
What no gradient check sees: the forward values. A wrong mask or a wrong formula in forward has
a backward that is right for the function written, so compare forward with a reference
(minitensor.testing.assert_matches_torch) too.
"""

import sys
import time
import warnings
from typing import NamedTuple

import numpy as np

from . import random as random_numbers
from .autograd import no_grad, topological_order
from .autograd_errors import GradientShapeError
from .gradcheck_report import (checked_summary, closing_lines, failure_report, format_index, name_of, nonfinite_report,
                               ops_in_graph, repeat_report)
from .sites import leaf_labels
from .tensor import Tensor



# For a failing parameter (leaves="all"): mt.debug's per-op check, which names an op upstream that
# fails on its own. minitensor/debug/op_check.py sets it on import (mt.debug imports gradcheck,
# never the other way round); None leaves the report as it is.
upstream_check = None


class GradcheckError(AssertionError):
    """The analytic gradient disagrees with finite differences. `details` is the report
    without the closing advice (what mt.debug.find_wrong_op shows for one op)."""

    def __init__(self, details, advice):
        super().__init__(f"{details}\n{advice}")
        self.details = details


class UncheckedLeavesWarning(UserWarning):
    """gradcheck passed for its inputs, but fn also uses leaves that require grad, not checked."""


class Measured(NamedTuple):
    """What measure found: passed, the relative error of the worst element (the one definition
    every report and the backward page use, see relative_error), the report when it failed, what
    was checked (summary: also said on a pass), the seed of the random draws, and the names of the
    leaves fn uses that were not checked."""

    passed: bool
    relative_error: float
    details: str  # None when passed
    summary: str = ""
    seed: int = None
    unchecked: tuple = ()
    failed_for: tuple = None  # (name, tensor) of the checked tensor the report is about


def relative_error(analytic, numeric, atol, rtol):
    """|analytic - numeric| / (|numeric| + atol / rtol), elementwise; NaN counts as inf.

    The one relative error minitensor reports. It is the tolerance test rearranged: an element
    passes (|analytic - numeric| <= atol + rtol |numeric|) exactly when its relative error is at
    most rtol, and near 0, where |numeric| / |numeric| would blow up, atol / rtol keeps it finite."""
    error = np.abs(analytic - numeric)
    scale = np.abs(numeric) + (atol / rtol if rtol > 0 else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(error == 0, 0.0, error / scale)
    return np.where(np.isnan(ratio), np.inf, ratio)


def _off(analytic, numeric, atol, rtol):
    """The elements that fail |analytic - numeric| <= atol + rtol * |numeric| (NaN fails)."""
    return ~(np.abs(analytic - numeric) <= atol + rtol * np.abs(numeric))


def gradcheck(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3, full_jacobian_limit=4096, max_checked=400, seed=None,
              leaves="inputs", nondet_tol=0.0, verbose=False):
    """Return True when backward agrees with central differences; raise GradcheckError if not.

    fn          takes the inputs (Tensors; anything else is passed through) and returns a Tensor
    inputs      the Tensors that require grad are checked; copies in float64 are used
    eps         the finite-difference step
    atol, rtol  an element passes when |analytic - numeric| <= atol + rtol * |numeric|
    max_checked elements per input compared one by one (or in a random group); above it, a sample
    seed        the random direction, sample and groups; None draws a new one (from mt.manual_seed's
                generator) and the report prints it: pass it back to replay a failure
    leaves      "inputs": the inputs only; "all": also every other leaf that requires grad and
                that the output depends on (a model's parameters that fn uses), switched to
                float64 during the check and restored after. The report names each checked
                tensor and lists the leaves that were not checked; a pass warns that they were not
                (UncheckedLeavesWarning).
    nondet_tol  how far a second backward may differ from the first (0: bit for bit, as PyTorch)
    verbose     print, on a pass, what was checked and what not
    The report ends with the call of mt.debug.find_wrong_op to paste, written with the names
    your code gives fn and the inputs.
    """
    measured = measure(fn, *inputs, eps=eps, atol=atol, rtol=rtol, full_jacobian_limit=full_jacobian_limit,
                       max_checked=max_checked, seed=seed, leaves=leaves, nondet_tol=nondet_tol)
    if not measured.passed:
        details = measured.details
        if upstream_check is not None and measured.failed_for is not None and \
                not measured.failed_for[0].startswith("input "):
            details += upstream_check(fn, inputs, *measured.failed_for, eps=eps, atol=atol, rtol=rtol)
        advice = _advice(fn, inputs, sys._getframe(1))
        if "disagrees with backward in float64" in details:  # find_wrong_op checks in float64: it cannot see this
            advice = ("  find_wrong_op checks each op in float64 and will not see this: step through backward in both "
                      "dtypes (mt.debug.backward_steps) and compare each op's gradients")
        raise GradcheckError(details, advice)
    if verbose:
        print(measured.summary)
    if measured.unchecked:
        names = ", ".join(measured.unchecked)
        warnings.warn(UncheckedLeavesWarning(
            f"gradcheck passed for the inputs of {name_of(fn)} only: it also uses {len(measured.unchecked)} "
            f"{'leaf' if len(measured.unchecked) == 1 else 'leaves'} that require grad, whose gradients were not "
            f"checked: {names}. "
            f'Pass leaves="all" to check them too.'), stacklevel=2)
    return True


def measure(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3, full_jacobian_limit=4096, max_checked=400, seed=None,
            leaves="inputs", nondet_tol=0.0, sites=True, kinks=False):
    """gradcheck without raising: a Measured. mt.debug's per-op checks (find_wrong_op and the
    backward page's check mode, minitensor/debug/op_check.py) use it, so all report one number.
    A backward that returns a gradient of the wrong shape is a failure here, reported by name
    (and where the op was made unless sites=False: an op re-run alone was made by the checker).
    kinks=True (the per-op checks, which meet an op at the inputs it was given, such as a relu at
    the exact zeros of an earlier relu): an element where f's one-sided slopes differ is a kink,
    and any derivative between them (a subgradient) passes there."""
    _check_tolerances(eps, atol, rtol, nondet_tol)
    if leaves not in ("inputs", "all"):
        raise ValueError(f'gradcheck: leaves must be "inputs" or "all", got {leaves!r}')
    if not (isinstance(max_checked, (int, np.integer)) and max_checked >= 2):
        raise ValueError(f"gradcheck: max_checked must be an integer >= 2, got {max_checked!r}")
    if seed is None:
        seed = int(random_numbers.generator().integers(2**31))
    copies, checked = [], []  # checked: (name, tensor) of everything compared
    for position, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.dtype.kind == "f":
            # C order, so that _central_difference can perturb the values through a flat view
            copy = Tensor(np.array(x.data, dtype=np.float64, order="C"), requires_grad=x.requires_grad)
            if x.requires_grad:
                checked.append((f"input {position}", copy))
            copies.append(copy)
        else:
            copies.append(x)
    if not checked and leaves == "inputs":
        raise ValueError("gradcheck: no input requires grad; create the inputs with requires_grad=True")

    output = fn(*copies)
    if not isinstance(output, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, it returned a {type(output).__name__}")
    if not output.requires_grad:
        raise ValueError("gradcheck: fn's output does not depend on any input that requires grad")
    others = _other_leaves(output, [x for _, x in checked])
    # The other leaves (a model's parameters) get gradients from the backward calls below, and
    # with leaves="all" float64 values: both are put back afterwards.
    restore = [(leaf, leaf.data, leaf.grad) for _, leaf in others]
    try:
        if leaves == "all":
            for name, leaf in others:
                leaf.data, leaf.grad = np.array(leaf.data, dtype=np.float64, order="C"), None
                checked.append((name, leaf))
            others = []
            output = fn(*copies)  # again, now that the leaves are float64
        settings = _Settings(fn, output, copies, checked, others, eps, atol, rtol, max_checked, seed, nondet_tol,
                             kinks)
        try:
            measured = _compare(settings, full=output.size * sum(x.size for _, x in checked) <= full_jacobian_limit)
            # The float64 check cannot see a bug of the inputs' own dtype (a float32 kernel, an
            # overflow): compare the backward in that dtype with the float64 one (after the check, so
            # that a backward right only on its first call meets the reentrancy check first).
            low_precision = _low_precision(fn, inputs, copies, seed) if measured.passed else None
            if low_precision is not None:
                name, x, report = low_precision
                return measured._replace(passed=False, relative_error=np.inf, failed_for=(name, x),
                                         details=f"{report}\n{closing_lines(settings, measured.summary)}")
            return measured
        except GradientShapeError as error:
            details = (f"gradcheck failed for {name_of(fn)}: {error if sites else error.plain}\n"
                       f"  ops in the graph, output first: {ops_in_graph(output)}")
            return Measured(False, np.inf, details, "", seed, tuple(name for name, _ in others))
    finally:
        for leaf, data, grad in restore:
            leaf.data, leaf.grad = data, grad


def _low_precision(fn, inputs, copies, seed):
    """(name, float64 copy, report) when backward in the inputs' own dtype (float32, float16) differs
    from the float64 one by more than a few percent of the largest derivative; None when it does not
    or every input is float64. One projected backward each, on the same random direction."""
    lows = [Tensor(np.array(x.data, order="C"), requires_grad=x.requires_grad)
            if isinstance(x, Tensor) and x.dtype.kind == "f" else x for x in inputs]
    wanted = [i for i, x in enumerate(lows) if isinstance(x, Tensor) and x.requires_grad and x.dtype != np.float64]
    if not wanted:
        return None
    highs = [Tensor(np.array(x.data), requires_grad=x.requires_grad) if isinstance(x, Tensor) else x for x in copies]
    low_output, high_output = fn(*lows), fn(*highs)
    u = np.random.default_rng(seed + 1).standard_normal(high_output.shape)
    with np.errstate(all="ignore"):  # an overflow in the low precision is what this looks for
        low_output.backward(u.astype(low_output.dtype), retain_graph=False)
    high_output.backward(u)
    for i in wanted:
        low, high = lows[i], highs[i]
        if low.grad is None or high.grad is None:
            continue
        low_grad, high_grad = np.asarray(low.grad, dtype=np.float64), high.grad
        tolerance = max(3e-2, 100 * float(np.finfo(low.dtype).eps)) * float(np.max(np.abs(high_grad), initial=0.0))
        off = ~(np.abs(low_grad - high_grad) <= tolerance + 1e-6)
        if off.any():
            at = np.unravel_index(np.argmax(np.where(off, np.abs(low_grad - high_grad), -1)), off.shape)
            report = (
                f"gradcheck failed for input {i} of {name_of(fn)} (shape {low.shape}): backward in {low.dtype} (the "
                f"input's own dtype) disagrees with backward in float64, which agrees with finite differences\n"
                f"  at d (u . output) / d input{format_index(at)}, u a random direction: {low.dtype} "
                f"{low_grad[at]:.8g}, float64 {high_grad[at]:.8g}\n"
                f"  {int(off.sum())} of {off.size} derivatives differ by more than {tolerance:.3g} (a few percent of "
                f"the largest |derivative|): a kernel used only in {low.dtype} (a backend's), or an overflow or "
                f"cancellation in {low.dtype}, in forward or backward")
            return f"input {i}", copies[i], report
    return None


class Progress:
    """A line on stderr every few seconds once a long check has run for PROGRESS_AFTER seconds:
    how far it is and about how long is left (a quick check prints nothing)."""

    PROGRESS_AFTER, EVERY = 3.0, 5.0

    def __init__(self, what, total, unit, file=None):
        self.what, self.total, self.unit, self.file = what, total, unit, file
        self.done, self.start = 0, time.monotonic()
        self.next_print = self.start + self.PROGRESS_AFTER

    def tick(self, now_doing=""):
        self.done += 1
        now = time.monotonic()
        if now < self.next_print:
            return
        self.next_print = now + self.EVERY
        spent = now - self.start
        left = spent / self.done * max(self.total - self.done, 0)
        print(f"{self.what}: {self.done} of {self.total} {self.unit}{now_doing}, {spent:.0f} s "
              f"(about {left:.0f} s left)", file=self.file or sys.stderr, flush=True)


class _Settings(NamedTuple):
    fn: object
    output: Tensor
    copies: list
    checked: list  # (name, tensor)
    unchecked: list  # (name, leaf)
    eps: float
    atol: float
    rtol: float
    max_checked: int
    seed: int
    nondet_tol: float
    kinks: bool = False  # an element where f has a kink passes if analytic lies between its one-sided slopes


def _other_leaves(output, inputs):
    """(name, leaf) of every leaf that requires grad, that output depends on and that is not
    one of inputs, named as mt.debug names it (block.ln1.weight), in the order found."""
    labels = leaf_labels(output)
    found, seen = [], {id(x) for x in inputs}
    for node in topological_order(output.grad_fn):
        for edge in node.edges:
            if isinstance(edge, Tensor) and edge.requires_grad and id(edge) not in seen:
                seen.add(id(edge))
                found.append((labels.get(id(edge)) or f"a leaf of shape {edge.shape}", edge))
    return found


def _compare(s, full):
    """The three checks in order: every analytic derivative finite, a second backward the same as
    the first, and the derivatives against central differences."""
    rng = np.random.default_rng(s.seed)
    tensors = [x for _, x in s.checked]
    u = None if full else rng.standard_normal(s.output.shape)
    first = _analytic(s.output, tensors, u)
    second = _analytic(s.output, tensors, u)
    plans = [None if full else _plan(x, rng, s.max_checked) for x in tensors]
    summary = checked_summary(s, first, plans)
    unchecked = tuple(name for name, _ in s.unchecked)

    for (name, x), analytic in zip(s.checked, first):
        bad = ~np.isfinite(analytic)
        if bad.any():
            at = np.unravel_index(np.argmax(bad), bad.shape)
            details = nonfinite_report(s, name, x, _where(s.output, x, at, u), analytic[at], int(bad.sum()),
                                        bad.size, summary)
            return Measured(False, np.inf, details, summary, s.seed, unchecked, (name, x))
    for (name, x), one, two in zip(s.checked, first, second):
        differ = ~(np.abs(one - two) <= s.nondet_tol)
        if differ.any():
            at = np.unravel_index(np.argmax(np.abs(one - two)), one.shape)
            ratio = float(np.max(relative_error(two, one, s.atol, s.rtol)))
            details = repeat_report(s, name, x, _where(s.output, x, at, u), one[at], two[at], int(differ.sum()),
                                     differ.size, summary)
            return Measured(False, ratio, details, summary, s.seed, unchecked, (name, x))

    planned = sum(2 * x.size if full else 2 * len(plan[0]) + 4 * len(plan[1]) for x, plan in zip(tensors, plans))
    progress = Progress(f"gradcheck of {name_of(s.fn)}", planned, "forward evaluations")

    def evaluate():
        progress.tick()
        with no_grad():
            return np.array(s.fn(*s.copies).data, dtype=np.float64)  # a copy: the output may be a view of an input

    worst, failed = None, False  # worst: (relative error, index in checked, analytic, numeric, describe, at, off)
    for index, x in enumerate(tensors):
        if full:
            comparisons = [_full_numeric(s.output, x, first[index], evaluate, s.eps) + (None,)]
        else:
            comparisons = _projected_numeric(x, first[index].reshape(-1), plans[index], u, evaluate, s.eps, rng)
        for analytic, numeric, describe, noise in comparisons:
            if not analytic.size:
                continue
            off = _off(analytic, numeric, s.atol, s.rtol)
            if s.kinks and full and off.any():
                off = off & ~_on_a_kink(x, analytic, off, evaluate, s.eps, s.atol, s.rtol)
            ratios = relative_error(analytic, numeric, s.atol, s.rtol)
            key = ratios  # which comparison is the worst: a failing one before any passing one
            if noise is not None:  # a group: one element's error is small beside the group's sum
                beyond = _beyond_noise(analytic, numeric, noise)  # judged against the differences' own error
                strict = beyond > 1
                off = off | strict
                key = np.where(strict, np.maximum(ratios, 1.0) + beyond, ratios)
            failed = failed or bool(off.any())
            at = np.unravel_index(np.argmax(key), key.shape)
            if worst is None or key[at] > worst[0]:
                worst = (float(key[at]), index, analytic, numeric, describe, at, off, float(ratios[at]))
    if worst is None:
        return Measured(True, 0.0, None, summary, s.seed, unchecked)
    if not failed:
        return Measured(True, worst[-1], None, summary, s.seed, unchecked)
    _, index, analytic, numeric, describe, at, off, ratio = worst
    where, analytic_value, numeric_value = describe(at, s.atol, s.rtol)
    ratio = float(relative_error(np.float64(analytic_value), np.float64(numeric_value), s.atol, s.rtol))  # as shown
    name, x = s.checked[index]
    details = failure_report(s, name, x, where, analytic_value, numeric_value, ratio, int(off.sum()), off.size, summary)
    if ratio <= s.rtol:  # failed against the differences' own error, not rtol: say so where rtol is quoted
        details = details.replace("at most rtol", "within rtol, but the unsampled elements are checked in groups "
                                  "against the finite differences' own error (10x how far those at eps and 2 eps "
                                  "are apart, and 1e-5 of the group's terms), which this exceeds; rtol alone "
                                  "would allow at most rtol", 1)
    return Measured(False, ratio, details, summary, s.seed, unchecked, (name, x))


def _analytic(output, tensors, u):
    """What backward gives each tensor: the full Jacobian (outputs, inputs), one backward per
    output element, when u is None; else the gradient of u . output, in one backward."""
    if u is not None:
        for x in tensors:
            x.grad = None
        output.backward(u, retain_graph=True)
        found = [np.array(x.grad, dtype=np.float64) if x.grad is not None else np.zeros(x.shape) for x in tensors]
        for x in tensors:
            x.grad = None
        return found
    jacobians = [np.zeros((output.size, x.size)) for x in tensors]
    for row in range(output.size):
        for x in tensors:
            x.grad = None
        one_hot = np.zeros(output.size)
        one_hot[row] = 1.0
        output.backward(one_hot.reshape(output.shape), retain_graph=True)
        for x, jacobian in zip(tensors, jacobians):
            if x.grad is not None:
                jacobian[row] = x.grad.reshape(-1)
    for x in tensors:
        x.grad = None
    return jacobians


def _where(output, x, at, u):
    """The derivative at `at` of an analytic array, in words."""
    if u is not None:
        return f"d (u . output) / d input{format_index(at)}, u a random direction"
    out_index = np.unravel_index(at[0], output.shape) if output.shape else ()
    return f"d output{format_index(out_index)} / d input{format_index(np.unravel_index(at[1], x.shape))}"


def _plan(x, rng, max_checked):
    """Which elements of x are compared one by one, and the random groups the others fall in."""
    n = x.size
    if n <= max_checked:
        return np.arange(n), []
    corners = {int(np.ravel_multi_index(tuple(s - 1 if bit else 0 for s, bit in zip(x.shape, bits)), x.shape))
               for bits in np.ndindex(*(2,) * min(x.ndim, 6))}
    corners.add(n // 2)
    singles_wanted = max(max_checked // 2, len(corners))
    others = np.setdiff1d(np.arange(n), np.fromiter(corners, dtype=np.int64))
    drawn = rng.choice(others, size=min(len(others), singles_wanted - len(corners)), replace=False)
    singles = np.sort(np.concatenate([np.fromiter(corners, dtype=np.int64), drawn]))
    rest = rng.permutation(np.setdiff1d(np.arange(n), singles))
    groups = [g for g in np.array_split(rest, max(max_checked - len(singles), 1)) if g.size]
    return singles, groups


def _full_numeric(output, x, analytic, evaluate, eps):
    """(analytic J, numeric J, describe) for x, J of shape (outputs, inputs)."""
    numeric = np.zeros_like(analytic)
    for column in range(x.size):
        numeric[:, column] = _central_difference(x, column, evaluate, eps).reshape(-1)

    def describe(at, atol, rtol):
        return _where(output, x, at, None), analytic[at], numeric[at]

    return analytic, numeric, describe


def _beyond_noise(analytic, numeric, allowed):
    """How many times |analytic - numeric| exceeds `allowed` (_group_allowance)."""
    return np.abs(analytic - numeric) / np.maximum(allowed, 1e-300)


def _group_allowance(numeric, numeric_at_2eps, size_of_terms):
    """What a group's check allows: 10 x how far the differences at eps and 2 eps are apart (their
    own error: truncation, rounding, a kink inside the group) plus one part in 10^5 of the sum of
    the group's |analytic| terms (a kernel's own rounding, as a fused float kernel has)."""
    return 10 * np.abs(numeric - numeric_at_2eps) + 1e-5 * size_of_terms


def _on_a_kink(x, analytic, off, evaluate, eps, atol, rtol):
    """Of the entries `off` of a full Jacobian (outputs, inputs), those where f has a kink in that
    input (its one-sided slopes differ by more than the tolerance allows) and the analytic
    derivative lies between the two slopes: a subgradient, which no difference can judge."""
    excused = np.zeros_like(off)
    values = x.data.reshape(-1)  # a view: x.data is a float64 copy we own
    centre = evaluate().reshape(-1)
    for column in np.flatnonzero(off.any(axis=0)):
        original = values[column]
        values[column] = original + eps
        right = (evaluate().reshape(-1) - centre) / eps
        values[column] = original - eps
        left = (centre - evaluate().reshape(-1)) / eps
        values[column] = original
        low, high = np.minimum(left, right), np.maximum(left, right)
        tolerance = atol + rtol * np.abs(high)
        kink = np.abs(right - left) > 10 * tolerance
        between = (analytic[:, column] >= low - tolerance) & (analytic[:, column] <= high + tolerance)
        excused[:, column] = off[:, column] & kink & between
    return excused


def _projected_numeric(x, grad, plan, u, evaluate, eps, rng):
    """Compare d(u . f)/dx one by one on the plan's single elements, then along random signs on
    each of its groups. Yields (analytic, numeric, describe, noise) twice: the singles (noise None:
    judged by atol and rtol), the groups (noise: the differences' own error, which a group's error
    must exceed, since one wrong element is small beside a group's sum)."""
    singles, groups = plan

    def projected():
        return np.sum(u * evaluate())

    numeric = np.array([_central_difference(x, j, projected, eps) for j in singles])

    def describe_single(at, atol, rtol):
        return _where(None, x, np.unravel_index(singles[at[0]], x.shape), u), grad[singles[at[0]]], numeric[at]

    yield grad[singles], numeric, describe_single, None
    if not groups:
        return
    signs = [rng.choice([-1.0, 1.0], size=g.size) for g in groups]
    group_analytic = np.array([grad[g] @ s for g, s in zip(groups, signs)])
    group_numeric = np.array([_along(x, g, s, projected, eps) for g, s in zip(groups, signs)])
    # the same difference at twice the step: how far apart the two are is the differences' own
    # error here, which an error must exceed (_group_allowance)
    at_2eps = np.array([_along(x, g, s, projected, 2 * eps) for g, s in zip(groups, signs)])
    noise = _group_allowance(group_numeric, at_2eps, np.array([np.abs(grad[g]).sum() for g in groups]))

    def describe_group(at, atol, rtol):
        members, sign, analytic, numeric = _narrow(x, groups[at[0]], signs[at[0]], grad, projected, eps, atol, rtol)
        if members.size == 1:
            place = format_index(np.unravel_index(members[0], x.shape))
            return (f"d (u . output) / d input{place}, u a random direction (found by halving a random group of "
                    f"{groups[at[0]].size} elements)", analytic * sign[0], numeric * sign[0])
        listed = ", ".join(format_index(np.unravel_index(j, x.shape)) for j in members[:4])
        more = ", ..." if members.size > 4 else ""
        return (f"d (u . output) along random signs on {members.size} elements of the input ({listed}{more}), "
                f"u a random direction", analytic, numeric)

    yield group_analytic, group_numeric, describe_group, noise


def _along(x, members, signs, evaluate, eps):
    """d f(x + t s) / dt at t = 0, s the signs on members (0 elsewhere): the central difference of
    one scalar t, by the same _central_difference that checks one element."""
    values = x.data.reshape(-1)  # a view: x.data is a float64 copy we own
    base = values[members].copy()
    t = Tensor(np.zeros(1))

    def moved():
        values[members] = base + t.data[0] * signs
        return evaluate()

    try:
        return _central_difference(t, 0, moved, eps)
    finally:
        values[members] = base


def _narrow(x, members, signs, grad, evaluate, eps, atol, rtol):
    """Halve a failing group while one half fails on its own, down to one element where the error
    is one element's: (members, signs, analytic, numeric) of the smallest failing group."""
    analytic, numeric = grad[members] @ signs, _along(x, members, signs, evaluate, eps)
    while members.size > 1:
        half = members.size // 2
        tried = []
        for part in (slice(None, half), slice(half, None)):
            a, n = grad[members[part]] @ signs[part], _along(x, members[part], signs[part], evaluate, eps)
            allowed = _group_allowance(n, _along(x, members[part], signs[part], evaluate, 2 * eps),
                                       np.abs(grad[members[part]]).sum())
            beyond = float(_beyond_noise(a, n, allowed))
            tried.append((max(float(relative_error(a, n, atol, rtol)), beyond), _off(a, n, atol, rtol) or beyond > 1,
                          part, a, n))
        ratio, off, part, a, n = max(tried, key=lambda item: item[0])
        if not off:
            break  # each half passes alone: the error is spread over the group
        members, signs, analytic, numeric = members[part], signs[part], a, n
    return members, signs, analytic, numeric


def _advice(fn, inputs, frame):
    """The call of find_wrong_op to paste, with the names the caller's code gives fn and the
    inputs (a placeholder where it gives none)."""
    def named(value):
        for scope in (frame.f_locals, frame.f_globals):
            for key, held in scope.items():
                if held is value:
                    return key
        owner = getattr(value, "__self__", None)  # MySwish.apply: a method of a class the code names
        if owner is not None:
            owner_name = named(owner)
            return owner_name and f"{owner_name}.{value.__name__}"
        return None

    fn_name = named(fn)
    arguments = [named(x) for x in inputs]
    if fn_name is not None and None not in arguments:
        call = f"mt.debug.find_wrong_op({', '.join([fn_name] + arguments)})"
        return f"  to find the op whose backward is wrong, run: {call}"
    shown = ", ".join([fn_name or "fn"] + [a or f"input{i}" for i, a in enumerate(arguments)])
    return (f"  to find the op whose backward is wrong: mt.debug.find_wrong_op({shown}), with the function "
            f"and the inputs you gave gradcheck (give {name_of(fn)} a name to paste it as it is)")


def _check_tolerances(eps, atol, rtol, nondet_tol=0.0):
    """eps must be a positive step (eps = 0 divides 0 by 0, a negative one flips the
    difference's sign); atol, rtol and nondet_tol must not be negative (nothing could pass)."""
    if not (isinstance(eps, (int, float, np.integer, np.floating)) and 0 < eps < np.inf):
        raise ValueError(f"gradcheck: eps is the finite-difference step and must be a positive number, got eps={eps!r}")
    for name, value in (("atol", atol), ("rtol", rtol), ("nondet_tol", nondet_tol)):
        if not (isinstance(value, (int, float, np.integer, np.floating)) and 0 <= value < np.inf):
            raise ValueError(f"gradcheck: {name} must be a number >= 0, got {name}={value!r}")


def _central_difference(x, flat_index, evaluate, eps):
    """d f / d x_j from two evaluations of f around x (the homework task
    gradcheck_central_difference), leaving x as it was."""
    # BEGIN SOLUTION gradcheck_central_difference
    # (f(x + eps e_j) - f(x - eps e_j)) / (2 eps), restoring x afterwards.
    values = x.data.reshape(-1)  # a view: x.data is a float64 copy we own
    original = values[flat_index]
    values[flat_index] = original + eps
    plus = evaluate()
    values[flat_index] = original - eps
    minus = evaluate()
    values[flat_index] = original
    return (plus - minus) / (2 * eps)
    # END SOLUTION
