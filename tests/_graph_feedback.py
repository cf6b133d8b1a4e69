"""The feedback of a failed model task (the pre-norm block, masked attention, the multi-head split):
the first node of the student's graph that departs from the teacher's, instead of one failing number.

    with names_the_node(student, probe_graph, "block", d, heads, weights, [x], upstream):
        assert_matches(answer, expected)

When the comparison fails, the probe runs again on the student's side and sends back the graph, node
by node, as plain arrays (op, module, the student's line, shapes, values, gradients); here, on the
grader's side, the same probe runs on the teacher's code (never the copy), and the two graphs are
aligned and judged (minitensor.debug.compare's judge, on records: a node is the culprit when its
output, or a gradient it passes on, departs while what it received agrees). The feedback says which
node departs, which quantity, where its worst element is and how far the quantity departs in norm
(a whole percentage), and states no value of the reference's. A hidden test's feedback is withheld
by the grader as any other message of a hidden test. A grader without the teacher's minitensor (the
Gradescope bundle's ships only homework) keeps each test's own message.
"""

import contextlib

import numpy as np

try:  # the teacher's minitensor, where the grader has it (`grade` here, not a Gradescope bundle's grader)
    from minitensor.debug.compare_graphs import judge
    from minitensor.debug.compare_report import Comparison, first_text, table
    from homework.remote import LocalSide
except ImportError:  # without it no reference graph can be made: each test keeps its own message
    judge = None


@contextlib.contextmanager
def names_the_node(student, probe, *args):
    try:
        yield
    except AssertionError as failure:
        feedback = graph_feedback(student, probe, *args)
        if feedback is None:
            raise
        raise AssertionError(f"{str(failure).splitlines()[0].split(':')[0]} departs. {feedback}") from None


def graph_feedback(student, probe, *args):
    """The text that names the first departing node, or None when the graphs cannot be compared
    (the student's side raised, no node departs, or the grader has not the teacher's minitensor)."""
    if judge is None:
        return None
    try:
        theirs = student.call(probe, *args)
        ours = probe(LocalSide(), *args)  # the same probe on the teacher's code, in the grader's process
        rows = judge(theirs, ours, rerun=False)
    except Exception:  # the student's error is already the test's message; this is only a hint
        return None
    comparison = Comparison(rows, reference_values=False)
    first = comparison.first
    if first is None:
        return None
    first.relative = relative_error(first, theirs, ours)
    text = first_text(comparison).replace("compare: ", "", 1)
    return f"The first node of your graph that departs from the reference graph: {text}\n{table(comparison)}"


def relative_error(row, theirs, ours):
    """|yours - reference| / |reference| (norms) of the quantity that departs, or None."""
    mine, reference = theirs[row.index], ours[row.reference_index] if row.reference_index is not None else None
    if reference is None:
        return None
    if row.where and row.where.startswith("backward"):
        pair = mine["grad_inputs"][row.input_position], reference["grad_inputs"][row.input_position]
    else:
        pair = mine["output"], reference["output"]
    if pair[0] is None or pair[1] is None or np.shape(pair[0]) != np.shape(pair[1]):
        return None
    scale = np.linalg.norm(pair[1])
    return float(np.linalg.norm(np.asarray(pair[0]) - pair[1]) / scale) if scale > 0 else None
