"""What the graded tests compare with, on the grader's side: PyTorch in float64, and a report
that names the worst element. Nothing here runs the student's code; the student's answers come
in as plain arrays (`student.call`), and are checked with `Student.array` before use."""

import io
import time

import numpy as np
import torch

# A timed test's budget: TIME_MULTIPLE times the reference's time for the same work, measured
# here in the same run (so a busy machine slows both), plus TIME_FLOOR seconds for a call's fixed
# costs. A backward that does O(size) work fits with room to spare, idle or beside two busy
# processes (README, "What the tests require"); one that evaluates the forward once per input
# element (finite differences) is O(size^2) and misses it by orders of magnitude at these sizes.
TIME_MULTIPLE = 25.0
TIME_FLOOR = 1.5

def array_of(answer, key, shape=None, dtype=None):
    """answer[key] if it is a plain ndarray (no subclass) of that shape and dtype, else an
    AssertionError that says what was expected and what came."""
    value = answer.get(key, "(missing)") if type(answer) is dict else "(no answer)"
    if type(value) is not np.ndarray:
        raise AssertionError(f"{key}: expected an array, got {value if isinstance(value, str) else type(value).__name__}")
    if shape is not None and value.shape != tuple(shape):
        raise AssertionError(f"{key}: expected shape {tuple(shape)}, got {value.shape}")
    if dtype is not None and value.dtype != np.dtype(dtype):
        raise AssertionError(f"{key}: expected dtype {np.dtype(dtype)}, got {value.dtype}")
    return value


def assert_close(name, got, expected, rtol=1e-9, atol=1e-11, whose="PyTorch's"):
    """Raise AssertionError naming `name`, the worst element, yours against the reference
    (`whose`: PyTorch's, or the formula's where the reference is computed here)."""
    expected = np.asarray(expected, dtype=np.float64)
    got = array_of({name: got}, name, shape=expected.shape)
    if not np.issubdtype(got.dtype, np.floating):
        raise AssertionError(f"{name}: expected floating-point numbers, got dtype {got.dtype}")
    both_nan = np.isnan(got) & np.isnan(expected)
    error = np.where(both_nan, 0.0, np.abs(got - expected))
    allowed = atol + rtol * np.abs(expected)
    bad = ~(error <= allowed)  # NaN where the reference has a number is bad
    if bad.any():
        worst = np.unravel_index(np.argmax(np.where(bad, np.nan_to_num(error, nan=np.inf) / allowed, -1.0)), bad.shape)
        index = f"[{', '.join(str(int(i)) for i in worst)}]" if worst else ""
        raise AssertionError(f"{name}: {int(bad.sum())} of {bad.size} elements differ from {whose}; worst "
                             f"{name}{index}: yours {float(got[worst])!r}, {whose} {float(expected[worst])!r} "
                             f"(allowed |difference| {float(allowed[worst]):.3g})")


def torch_expression(expression, inputs, upstream):
    """PyTorch's output of `expression` (over the named inputs) and each floating input's
    gradient when `upstream` flows back: {"out": ..., "d<name>": ...}."""
    tensors = {name: torch.tensor(array, requires_grad=array.dtype.kind == "f") for name, array in inputs.items()}
    out = eval(expression, {"torch": torch, "np": np}, dict(tensors))
    out.backward(torch.as_tensor(upstream))
    answer = {"out": out.detach().numpy()}
    answer.update({f"d{name}": t.grad.numpy() for name, t in tensors.items() if t.requires_grad})
    return answer


def assert_matches(answer, reference, rtol=1e-9, atol=1e-11, whose="PyTorch's"):
    """Every entry of the reference against the same entry of the student's answer."""
    if type(answer) is not dict:
        raise AssertionError(f"expected a dict of arrays from the student's side, got {type(answer).__name__}")
    for key, expected in reference.items():
        assert_close(key, answer.get(key), expected, rtol, atol, whose)


def attention(q, k, v, hidden):
    """PyTorch's attention with a boolean mask (True hides a key): (out, weights)."""
    scores = torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) / np.sqrt(q.shape[-1])
    hide = torch.from_numpy(np.broadcast_to(hidden, scores.shape).copy())
    weights = torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)
    return (weights @ torch.from_numpy(v)).numpy(), weights.numpy()


def future(T):
    """PyTorch's causal mask for T tokens as booleans, True where a query may not look
    (nn.Transformer.generate_square_subsequent_mask: -inf there)."""
    return torch.isinf(torch.nn.Transformer.generate_square_subsequent_mask(T)).numpy()


def best_seconds(work, repeat=3):
    """The shortest of `repeat` runs of work(), timed here."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def wire_seconds(*values):
    """What sending these arrays (dicts of arrays) costs: each written as .npy bytes and read
    back, as the wire between the grader and the worker does, timed here."""
    arrays = [a for v in values for a in (v.values() if isinstance(v, dict) else [v]) if isinstance(a, np.ndarray)]

    def round_trip():
        for array in arrays:
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, allow_pickle=False)
            buffer.seek(0)
            np.lib.format.read_array(buffer, allow_pickle=False)

    return best_seconds(round_trip, repeat=2)


def budget(what, reference):
    """The seconds a call doing `what` may take: TIME_MULTIPLE x the reference + TIME_FLOOR
    (passed to student.measure as within_s, so a call past it is stopped there)."""
    return TIME_MULTIPLE * reference + TIME_FLOOR


def assert_fits_budget(what, seconds, reference):
    """The student's call (timed on this side) within its budget."""
    allowed = budget(what, reference)
    if not seconds <= allowed:
        raise AssertionError(f"{what}: took {seconds:.2f} s; at this size the budget is {allowed:.2f} s "
                             f"({TIME_MULTIPLE:g} x the {reference * 1e3:.0f} ms PyTorch takes here for the same "
                             f"work, plus {TIME_FLOOR:g} s): work that grows faster than the input (an estimate "
                             f"per input element, a matrix per row) does not fit")


def assert_same_mask(name, got, expected):
    """Booleans equal, or an AssertionError saying how many differ and where (the first three),
    never the expected mask itself."""
    got = array_of({name: got}, name, shape=np.shape(expected), dtype=bool)
    wrong = np.argwhere(got != expected)
    if len(wrong):
        first = "; ".join(f"[{', '.join(str(int(i)) for i in index)}] yours {bool(got[tuple(index)])}"
                          for index in wrong[:3])
        raise AssertionError(f"{name}: {len(wrong)} of {got.size} entries are wrong: {first}")
