"""mt.debug.compare(model, reference, *inputs): which node of your model departs from a reference,
and whether it is the culprit or only inherited the error.

    result = mt.debug.compare(block, reference_block, x)
    print(result)            # the first node that departs, then a short table
    result.culprit           # that node's row: op, module, made_at, worst element, ...
    result.repro("repro.py") # a ten-line script: the culprit's op alone on the reference's inputs

Both run on the same inputs (the reference gets the model's weights, copied by name, when both are
Modules); a random upstream gradient (seeded, never all ones) flows back through each. The two
graphs are aligned by module path and call order, and inside a module by (op, input shapes), with
a fallback by op name where the two compose ops differently. Each aligned node is then judged on
its own, as PyTorch's FX minimizer does with accumulate_error=False: your op runs again on the
reference node's inputs (its forward) and on the reference node's upstream gradient (its
backward), so a node that only received a wrong input is told apart from the one that made it.
Tolerances come from a float64 re-run of the reference: a node departs when it is farther from the
reference than the reference is from its own float64 run (a margin of 8 times, and a few units of
the dtype's rounding).

The judging works on records (compare_record.py), plain arrays, so the homework's grader uses it on
a graph recorded in the student's worker (without running the student's ops again: there a node is
the culprit when its output, or the gradient it passes on, departs while what it received agrees).
The words of the report: compare_report.py.
"""

import difflib

import numpy as np

from ..autograd import Context, unbroadcast
from ..nn.module import Module
from .compare_record import record
from .compare_report import Comparison, Row
from .compare_torch import compare_with_torch
from .compare_tolerance import NOISE_MARGIN, ROUNDING_UNITS, difference  # noqa: F401 (compare.difference)


def compare(model, reference, *inputs, seed=0, upstream=None, copy_weights=True):
    """Run `model` and `reference` (a minitensor Module or function of the same inputs) on `inputs`,
    forward and backward, and return a Comparison: the first node that departs (the culprit, or the
    node where the difference first shows), then every node's verdict. `upstream` is dL/d(output)
    (by default a seeded standard normal). With copy_weights, a Module reference gets the model's
    parameters by name first. A PyTorch module with the same module paths is a reference too: its
    weights are copied into the model by name (copy_weights=False: the report names those that
    differ), and each of the model's modules is judged on the torch module's boundary values
    (compare_torch.py)."""
    if any(cls.__module__.startswith("torch") for cls in type(reference).__mro__):
        # module by module (compare_torch imports torch inside its functions, only then)
        return compare_with_torch(model, reference, inputs, seed=seed, upstream=upstream, copy_weights=copy_weights)
    copied, missing = _copy_weights(model, reference) if copy_weights else ([], [])
    theirs, out, upstream, _ = record(model, inputs, upstream, seed)
    ours, _, _, _ = record(reference, inputs, upstream, seed, expected_shape=out.shape)
    float64 = _float64_run(reference, inputs, upstream, seed)
    rows = judge(theirs, ours, float64, rerun=True)
    comparison = Comparison(rows, dtype=out.dtype, missing_weights=missing, copied_weights=len(copied))
    comparison.upstream = upstream  # the gradient both backward passes started from
    comparison.records = (theirs, ours)
    return comparison


def _copy_weights(model, reference):
    """The model's parameters into the reference, by name and shape: (copied names, names the
    reference lacks or has in another shape)."""
    if not (isinstance(model, Module) and isinstance(reference, Module)) or model is reference:
        return [], []
    targets = dict(reference.named_parameters())
    copied, missing = [], []
    for name, parameter in model.named_parameters():
        target = targets.get(name)
        if target is None or target.shape != parameter.shape:
            missing.append(name)
            continue
        target.data = parameter.data.astype(target.data.dtype, copy=True)
        copied.append(name)
    return copied, missing


def _float64_run(reference, inputs, upstream, seed):
    """The reference's records in float64 (its parameters and float inputs cast, then put back), to
    measure its own rounding error node by node; None when it already runs in float64."""
    floats = [a for a in inputs if getattr(a, "dtype", None) is not None and np.dtype(a.dtype).kind == "f"]
    if floats and all(np.dtype(a.dtype) == np.float64 for a in floats):
        return None
    parameters = list(reference.parameters()) if isinstance(reference, Module) else []
    kept = [p.data for p in parameters]
    try:
        for p in parameters:
            p.data = p.data.astype(np.float64)
        wide = [_as_float64(a) for a in inputs]
        records, _, _, _ = record(reference, wide, np.asarray(upstream, dtype=np.float64), seed)
    finally:
        for p, data in zip(parameters, kept):
            p.data = data
    return records


def _as_float64(value):
    data = getattr(value, "data", value)
    if isinstance(data, np.ndarray) and data.dtype.kind == "f":
        return data.astype(np.float64)
    return value


# ----------------------------------------------------------------------------
# Alignment: which node of the model stands for which node of the reference
# ----------------------------------------------------------------------------


def _key(record):
    return record["op"], tuple(np.shape(a) for a in record["inputs"])


def align(theirs, ours):
    """{index in theirs: index in ours}: by module path and call order; inside a module by (op,
    input shapes) in order (difflib), and where the two sides compose ops differently, by op name
    in order inside each stretch that differs."""
    groups = {}
    for side, records in ((0, theirs), (1, ours)):
        for index, r in enumerate(records):
            groups.setdefault(r["module"], ([], []))[side].append(index)
    pairs = {}
    for left, right in groups.values():
        keys_left, keys_right = [_key(theirs[i]) for i in left], [_key(ours[j]) for j in right]
        matcher = difflib.SequenceMatcher(None, keys_left, keys_right, autojunk=False)
        for tag, a0, a1, b0, b1 in matcher.get_opcodes():
            if tag == "equal":
                pairs.update(zip(left[a0:a1], right[b0:b1]))
            elif tag == "replace":  # the fallback: the same op in the same order, shapes aside
                unused = list(range(b0, b1))
                for a in range(a0, a1):
                    match = next((b for b in unused if keys_right[b][0] == keys_left[a][0]), None)
                    if match is not None:
                        unused = unused[unused.index(match) + 1:]
                        pairs[left[a]] = right[match]
    return pairs


# ----------------------------------------------------------------------------
# Judging each node on its own
# ----------------------------------------------------------------------------


def _wide(ref64, key, position=None):
    """One array of the reference node's float64 record (None where there is none)."""
    if ref64 is None or ref64[key] is None:
        return None
    if position is None:
        return ref64[key]
    return ref64[key][position] if position < len(ref64[key]) else None


def _noise(array, wide):
    """The reference's own error on one array: its distance from the float64 run's."""
    if wide is None or array is None or np.shape(array) != np.shape(wide):
        return None
    return float(np.nanmax(np.abs(np.asarray(array, np.float64) - wide), initial=0.0))


def _rerun(record, reference):
    """record's op (the model's Function, options) run again on the reference node's inputs and
    upstream gradient: (output, gradients summed to the inputs' shapes) or the error it raised."""
    function = record["function"]
    needs = tuple(g is not None for g in (reference["grad_inputs"] or [None] * len(reference["inputs"])))
    ctx = Context(function, needs if True in needs else (True,) * len(reference["inputs"]))
    try:
        output = np.asarray(function.forward(ctx, *reference["inputs"], **record["options"]))
    except Exception as error:  # the op cannot run on the reference's inputs: it departs there
        return error, None
    if reference["grad_output"] is None or True not in needs:
        return output, None
    try:
        grads = function.backward(ctx, reference["grad_output"])
        grads = grads if isinstance(grads, tuple) else (grads,)
        grads = [None if g is None or not need else unbroadcast(np.asarray(getattr(g, "data", g)), np.shape(x))
                 for g, need, x in zip(grads, needs, reference["inputs"])]
    except Exception:  # a backward that fails on the reference's inputs: judged by what it passed on
        return output, None
    return output, grads


def _first(pairs):
    """The first of [(position, difference or None)] that departs: (position, difference) or None."""
    return next(((p, d) for p, d in pairs if d is not None), None)


def judge(theirs, ours, float64=None, rerun=False):
    """One Row per node of the model (theirs), in forward order, with its verdict: "culprit" (it
    departs on its own), "inherited" (it departs only because what it received does), "agrees", or
    "no counterpart" (the reference has no node like it). With rerun, the model's op is run again on
    the reference's inputs (in this process only); without, a node is judged by what it received."""
    pairs = align(theirs, ours)
    wide = float64 if float64 is not None and [r["op"] for r in float64] == [r["op"] for r in ours] else None
    rows = []
    for index, r in enumerate(theirs):
        row = Row(index=index, op=r["op"], module=r["module"], made_at=r["site"],
                  input_shapes=[tuple(np.shape(a)) for a in r["inputs"]], output_shape=tuple(np.shape(r["output"])))
        rows.append(row)
        j = pairs.get(index)
        if j is None:
            row.verdict = "no counterpart"
            continue
        ref, ref64 = ours[j], (wide[j] if wide is not None else None)
        row.reference_index = j
        _judge_forward(row, r, ref, ref64, rows, rerun)
    for row in reversed(rows):  # backward order: a node's upstream gradient is judged before it
        if row.reference_index is not None and row.verdict != "culprit":
            ref = ours[row.reference_index]
            _judge_backward(row, theirs[row.index], ref, wide[row.reference_index] if wide is not None else None,
                            rerun)
    _blame_unmatched(rows, theirs)
    return rows


def _judge_forward(row, r, ref, ref64, rows, rerun):
    noise = _noise(ref["output"], _wide(ref64, "output"))
    row.output_difference = difference(r["output"], ref["output"], noise)
    inputs = [difference(a, b, _noise(b, _wide(ref64, "inputs", i))) if i < len(ref["inputs"]) else None
              for i, (a, b) in enumerate(zip(r["inputs"], ref["inputs"]))]
    row.inputs_agree = not any(inputs)
    if rerun and "function" in r:
        output, row.rerun_grads = _rerun(r, ref)
        own = (((), f"{type(output).__name__}: {output}", "", np.inf, 0.0) if isinstance(output, Exception)
               else difference(output, ref["output"], noise))
    else:
        own = row.output_difference if not any(inputs) else None
    if own is not None:
        row.verdict, row.where, row.worst = "culprit", "forward", own
        return
    if row.output_difference is None:
        row.verdict = "agrees"
        return
    # It departs, and only because an input does. Which one, and where did that input come from?
    position, _ = _first(enumerate(inputs)) or (0, None)
    source = r["input_from"][position] if position < len(r["input_from"]) else ""
    row.worst = row.output_difference
    row.input_position = position
    if isinstance(source, int) and rows[source].verdict in ("culprit", "inherited", "no counterpart"):
        row.verdict, row.where = "inherited", "forward"
        if rows[source].verdict == "no counterpart":
            rows[source].blamed = True
    else:  # what it read agrees where it was made: it read the wrong thing
        row.verdict, row.where = "culprit", "forward (reads the wrong input)"
        row.wrong_input = source


def _judge_backward(row, r, ref, ref64, rerun):
    if r["grad_inputs"] is None or ref["grad_inputs"] is None:
        return
    pairs = []
    for i, (mine, theirs) in enumerate(zip(r["grad_inputs"], ref["grad_inputs"])):
        if mine is not None and theirs is not None:
            pairs.append((i, difference(mine, theirs, _noise(theirs, _wide(ref64, "grad_inputs", i)))))
    departing = _first(pairs)
    row.grad_difference = departing
    if departing is None:
        return
    if rerun and row.rerun_grads is not None:
        own = _first([(i, difference(row.rerun_grads[i], ref["grad_inputs"][i],
                                     _noise(ref["grad_inputs"][i], _wide(ref64, "grad_inputs", i))))
                      for i, _ in pairs if row.rerun_grads[i] is not None])
    else:
        upstream_noise = _noise(ref["grad_output"], _wide(ref64, "grad_output"))
        upstream = difference(r["grad_output"], ref["grad_output"], upstream_noise)
        own = departing if upstream is None and row.inputs_agree else None
    if own is not None:
        row.verdict, row.where, row.worst, row.input_position = "culprit", "backward", own[1], own[0]
    elif row.verdict == "agrees":
        row.verdict, row.where, row.worst, row.input_position = "inherited", "backward", departing[1], departing[0]


def _blame_unmatched(rows, theirs):
    """A node with no counterpart is where the two graphs part (the culprit) when a node it feeds
    departs in forward because of what it made, or when a node that feeds it receives a gradient
    that departs and none of that node's other consumers, which have counterparts, sent a departing
    one (its own backward, a class of the student's own naming, was wrong: a blind review's case)."""
    consumers = {index: [] for index in range(len(rows))}
    for index, node in enumerate(theirs):
        for source in node["input_from"] or ():
            if isinstance(source, int):
                consumers[source].append(index)
    for row in rows:
        if row.blamed:
            row.verdict, row.where = "culprit", "forward (no node like it in the reference)"
    for row in rows:
        if row.verdict != "inherited" or row.where != "backward":
            continue
        takers = [rows[k] for k in consumers[row.index]]
        unmatched = [t for t in takers if t.verdict == "no counterpart"]
        if unmatched and all(t.verdict in ("agrees", "no counterpart") or t.where != "backward" for t in takers):
            for taker in unmatched:
                taker.verdict, taker.where = "culprit", "backward (no node like it in the reference)"
