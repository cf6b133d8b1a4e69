"""The words of mt.gradcheck's reports: what failed and where, what a check compared and what it
cannot see. gradcheck.py measures; this file only writes."""

from .autograd import topological_order

NOT_CHECKED = ("not checked: the forward values (a wrong mask or formula in forward has a right backward for "
               "what it computes: compare forward with a reference, e.g. minitensor.testing.assert_matches_torch)")


def checked_summary(s, analytic, plans):
    """What the check compared, and what it cannot see."""
    lines = [f"gradcheck of {name_of(s.fn)} (seed={s.seed} replays the random draws):"]
    for (name, x), values, plan in zip(s.checked, analytic, plans):
        said = (f"  {name} (shape {x.shape}): all {values.size} analytic derivatives finite and the same on a second "
                f"backward; compared with central differences: ")
        if plan is None:
            said += f"the full Jacobian, {values.shape[0]} x {values.shape[1]}"
        else:
            singles, groups = plan
            grouped = sum(g.size for g in groups)
            said += f"{len(singles)} of {x.size} elements one by one (d (u . output) / dx, u random)"
            if groups:
                said += f", the other {grouped} along random signs in {len(groups)} random groups"
        lines.append(said)
    if s.unchecked:
        lines.append(f"  not checked (leaves fn uses besides its inputs; leaves=\"all\" checks them): "
                     f"{', '.join(name for name, _ in s.unchecked)}")
    lines.append(f"  {NOT_CHECKED}")
    return "\n".join(lines)


def format_index(index):
    """(1, 2) -> '[1, 2]'; () -> '' (a scalar has no index)."""
    return f"[{', '.join(str(int(i)) for i in index)}]" if len(index) else ""


def name_of(fn):
    return getattr(fn, "__name__", type(fn).__name__)


def ops_in_graph(output):
    """The names of the ops in output's graph, output first, each once."""
    ops = []
    for node in topological_order(output.grad_fn):
        if node.name not in ops:
            ops.append(node.name)
    return ", ".join(ops)


def closing_lines(s, summary):
    """The lines every failure report ends with: the ops, the leaves not checked, the seed."""
    not_checked = ""
    if s.unchecked:
        names = ", ".join(name for name, _ in s.unchecked)
        not_checked = f"\n  not checked (leaves fn uses besides its inputs; leaves=\"all\" checks them): {names}"
    return (f"  ops in the graph, output first: {ops_in_graph(s.output)}{not_checked}\n"
            f"  seed={s.seed} replays this check's random draws")


def failure_report(s, checked_name, x, where, analytic, numeric, relative, bad_count, total, summary):
    return (
        f"gradcheck failed for {checked_name} of {name_of(s.fn)} (shape {x.shape}):\n"
        f"  worst element: {where}\n"
        f"  analytic (backward):         {analytic:.8g}\n"
        f"  numeric (finite difference): {numeric:.8g}\n"
        f"  absolute error {abs(analytic - numeric):.3g} (allowed: atol={s.atol:g} + rtol={s.rtol:g} * |numeric|)\n"
        f"  relative error {relative:.3g} = |analytic - numeric| / (|numeric| + atol/rtol), "
        f"at most rtol={s.rtol:g} to pass\n"
        f"  {bad_count} of {total} checked derivatives are off.\n"
        f"{closing_lines(s, summary)}"
    )


def nonfinite_report(s, checked_name, x, where, value, bad_count, total, summary):
    return (
        f"gradcheck failed for {checked_name} of {name_of(s.fn)} (shape {x.shape}): backward gave {value} "
        f"at {where}\n"
        f"  relative error inf: a NaN or infinite analytic derivative never passes (every element of every "
        f"gradient is looked at, sampled or not)\n"
        f"  {bad_count} of {total} analytic derivatives are NaN or infinite.\n"
        f"{closing_lines(s, summary)}"
    )


def repeat_report(s, checked_name, x, where, first, second, differ_count, total, summary):
    return (
        f"gradcheck failed for {checked_name} of {name_of(s.fn)} (shape {x.shape}): backward is not reentrant: "
        f"a second backward with the same inputs and incoming gradient gave a different gradient\n"
        f"  at {where}: first call {first:.17g}, second call {second:.17g}\n"
        f"  {differ_count} of {total} analytic derivatives differ by more than nondet_tol={s.nondet_tol:g}.\n"
        f"  A backward must depend only on what forward saved and on the incoming gradient: state kept between "
        f"calls (on the class, in a global, in ctx), random numbers, or a saved array changed in place make it "
        f"differ (PyTorch's gradcheck fails it too). A backward that is nondeterministic on purpose: pass "
        f"nondet_tol=.\n"
        f"{closing_lines(s, summary)}"
    )
