"""The words of mt.debug.compare: one Row per node of your model with its verdict, and the
Comparison they make, printed as the first node that departs followed by a short table.

A Row's worst element is (index, yours, the reference's, |difference|, tolerance). With
reference_values=False (the homework's feedback) the text names the node, the quantity, the
worst element's index and how far the quantity departs (its relative error in norm), and states no
value of the reference's.
"""

import dataclasses
import pathlib

import numpy as np

VERDICTS = ("culprit", "inherited", "no counterpart", "agrees")


@dataclasses.dataclass
class Row:
    """One node of your model: what it is, where it was made, and how it compares."""

    index: int
    op: str
    module: str
    made_at: str
    input_shapes: list
    output_shape: tuple
    verdict: str = "agrees"  # culprit, inherited, agrees, or no counterpart
    where: str = None  # "forward", "backward", "forward (reads the wrong input)", ...
    worst: tuple = None  # (index, yours, reference's, |difference|, tolerance)
    input_position: int = None  # the gradient (backward) or input (forward) that departs
    wrong_input: object = None  # where a wrongly read input came from: a node's index or a leaf's name
    reference_index: int = None
    output_difference: tuple = None
    grad_difference: tuple = None  # (input position, difference) of the first departing gradient
    rerun_grads: list = dataclasses.field(default=None, repr=False)
    blamed: bool = False
    inputs_agree: bool = True  # every input of it agrees with the reference node's
    relative: float = None  # the departing quantity's |yours - reference| / |reference| (set by the grader)

    @property
    def shapes(self):
        inputs = ", ".join(str(s) for s in self.input_shapes)
        return f"{inputs} -> {self.output_shape}"

    @property
    def quantity(self):
        """What departs: "its output" or "its gradient to input 1"."""
        if self.where is None:
            return "nothing"
        if self.where.startswith("backward"):
            if isinstance(self.input_position, str):  # a module's: "input 0", "bias", or what reached it
                if self.input_position.startswith("the gradient"):
                    return self.input_position
                return f"its gradient to {self.input_position}"
            return f"its gradient to input {self.input_position}"
        return "its output"

    def place(self):
        return f"{self.op} in {self.module}" if self.module else f"{self.op} (in the model's own forward)"


class Comparison:
    """What compare found: rows (one per node of your model, forward order), culprit (the Row of
    the first node that departs on its own, or None), first (the first node that departs at all)."""

    def __init__(self, rows, dtype=None, missing_weights=(), copied_weights=0, reference_values=True):
        self.rows = rows
        self.dtype = np.dtype(dtype) if dtype is not None else None
        self.missing_weights = list(missing_weights)
        self.copied_weights = copied_weights
        self.reference_values = reference_values
        self.records = None  # (the model's records, the reference's), kept by compare for repro
        self.upstream = None

    @property
    def culprits(self):
        """Every culprit: those of forward in forward order, then those of backward in the order
        backward reaches them (the last node first)."""
        forward = [r for r in self.rows if r.verdict == "culprit" and not r.where.startswith("backward")]
        backward = [r for r in reversed(self.rows) if r.verdict == "culprit" and r.where.startswith("backward")]
        return forward + backward

    @property
    def culprit(self):
        found = self.culprits
        return found[0] if found else None

    @property
    def first(self):
        departing = [r for r in self.rows if r.verdict in ("culprit", "inherited")]
        return self.culprit or (departing[0] if departing else None)

    @property
    def agrees(self):
        return self.first is None

    def __str__(self):
        return report(self)

    def repro(self, path):
        """Write a ten-line script that runs the culprit's op alone on the reference node's inputs
        and upstream gradient (saved beside it, as path with .npz) and prints how far it departs."""
        return write_repro(self, path)

    def __repr__(self):
        culprit = self.culprit
        return f"<Comparison: {culprit.place() + ' departs' if culprit else 'no culprit'}>"


def _number(value):
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _index(index):
    return f"[{', '.join(str(int(i)) for i in index)}]" if index else ""


def worst_text(row, reference_values=True):
    """The worst element of the quantity that departs, in words."""
    if row.worst is None and (row.where or "").startswith("backward"):  # no counterpart; what it sent back departs
        return "it has no counterpart in the reference, and the gradient it passes back departs"
    if row.worst is None:  # a node with no counterpart, blamed for what the node it feeds received
        return "it has no counterpart in the reference, and the node it feeds departs because of what it made"
    index, yours, theirs, gap, tolerance = row.worst
    if gap == np.inf and isinstance(yours, str):  # a shape, or an error: no value of either side
        theirs = f", the reference's {theirs}" if theirs else ""
        return f"{row.quantity}: yours has {yours}{theirs}"
    if not reference_values:
        # a whole percentage: no digit of a reference value
        how_far = f" departs by {100 * row.relative:.0f}% in norm" if row.relative is not None else " departs"
        return f"{row.quantity}{how_far}; worst element {_index(index) or '(its shape)'}"
    return (f"worst element of {row.quantity} {_index(index)}: yours {_number(yours)}, reference {_number(theirs)} "
            f"(|difference| {gap:.3g}, tolerance {tolerance:.3g})")


def first_text(comparison):
    row = comparison.first
    dtype = f" ({comparison.dtype})" if comparison.dtype is not None else ""
    if row is None:
        return f"compare{dtype}: every node agrees with the reference"
    kind = "the culprit" if row.verdict == "culprit" else "inherited (no node departs on its own before it)"
    why = {"forward": "its forward departs on the reference's inputs",
           "backward": "its backward departs on the reference's inputs and upstream gradient",
           "forward (reads the wrong input)": "it reads an input that differs from the reference node's",
           "forward (no node like it in the reference)": "the reference has no node like it",
           "backward (no node like it in the reference)":
               "the reference has no node like it, and the gradient it passes back departs"}.get(row.where, row.where)
    lines = [f"compare{dtype}: the first node that departs is {row.place()}: {kind}, {why}",
             f"  made at: {row.made_at or '(not recorded)'}",
             f"  shapes:  {row.shapes}",
             f"  {worst_text(row, comparison.reference_values)}"]
    if row.wrong_input is not None:
        source = row.wrong_input
        made = (f"node {source} ({comparison.rows[source].place()}, which agrees)" if isinstance(source, int)
                else (source or "a constant"))
        lines.append(f"  it reads the wrong input: its input {row.input_position} comes from {made}, "
                     f"and differs from the reference's input {row.input_position}")
    return "\n".join(lines)


def table(comparison, limit=8):
    """The culprits, then the other nodes that depart or have no counterpart, one line each (at most
    `limit`), and how many agree."""
    culprits = comparison.culprits
    others = [r for r in comparison.rows if r.verdict != "agrees" and r not in culprits]
    others.sort(key=lambda r: (r.where or "").startswith("backward"))  # what departs forward first (a stable sort)
    shown = culprits + others
    agreeing = len(comparison.rows) - len(shown)
    lines = [f"  {'#':>3}  {'op':<18} {'module':<14} {'verdict':<15} {'what departs'}"]
    for r in shown[:limit]:
        what = r.quantity if r.verdict in ("culprit", "inherited") else ""
        lines.append(f"  {r.index:>3}  {r.op:<18} {r.module or '-':<14} {r.verdict:<15} {what}")
    if len(shown) > limit:
        lines.append(f"  ... {len(shown) - limit} more")
    lines.append(f"  {agreeing} of {len(comparison.rows)} nodes agree")
    return "\n".join(lines)


def report(comparison):
    text = first_text(comparison)
    if comparison.missing_weights:
        missing = ", ".join(comparison.missing_weights)
        text += f"\n  not copied to the reference (no parameter of that name and shape): {missing}"
    if getattr(comparison, "differing_weights", None):
        text += (f"\n  weights that differ from the PyTorch module's (not copied, copy_weights=False): "
                 f"{', '.join(comparison.differing_weights)}")
    if comparison.first is None:
        return text
    return text + "\n" + table(comparison)


def write_repro(comparison, path):
    """The script of Comparison.repro; returns its path."""
    row = comparison.culprit
    if row is None or row.reference_index is None or comparison.records is None:
        raise ValueError("compare: no culprit with a counterpart in the reference to reproduce")
    theirs, ours = comparison.records
    mine, reference = theirs[row.index], ours[row.reference_index]
    function = mine["function"]
    path = pathlib.Path(path)
    arrays = {f"input{i}": a for i, a in enumerate(reference["inputs"])}
    arrays["reference_output"] = reference["output"]
    arrays["upstream"] = reference["grad_output"] if reference["grad_output"] is not None else np.zeros(0)
    options = []
    for name, value in mine["options"].items():
        if isinstance(value, np.ndarray):
            arrays[f"option_{name}"] = value
            options.append(f"{name}=data['option_{name}']")
        else:
            options.append(f"{name}={value!r}")
    for i, grad in enumerate(reference["grad_inputs"] or []):
        if grad is not None:
            arrays[f"reference_grad{i}"] = grad
    np.savez(path.with_suffix(".npz"), **arrays)
    inputs = ", ".join(f"data['input{i}']" for i in range(len(reference["inputs"])))
    lines = [
        f"# {row.place()}, made at {row.made_at.split(' <- ')[0]}: run alone on the reference's inputs",
        "import numpy as np",
        "from minitensor.autograd import Context, unbroadcast",
        f"from {function.__module__} import {function.__qualname__.split('.')[0]} as Op",
        f"data = np.load({str(path.with_suffix('.npz'))!r})",
        f"ctx = Context(Op, (True,) * {len(reference['inputs'])})",
        f"out = Op.forward(ctx, {inputs}{', ' if options else ''}{', '.join(options)})",
        "print('forward: largest |yours - reference|', np.abs(out - data['reference_output']).max())",
        "grads = Op.backward(ctx, data['upstream']) if data['upstream'].size else ()",
        "for i, g in enumerate(grads if isinstance(grads, tuple) else (grads,)):",
        "    if g is not None and f'reference_grad{i}' in data:",
        "        g = unbroadcast(np.asarray(g), data[f'input{i}'].shape)",
        "        print(f'backward, input {i}: largest |yours - reference|',",
        "              np.abs(g - data[f'reference_grad{i}']).max())",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path
