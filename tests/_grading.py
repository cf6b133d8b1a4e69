"""What the graded tests compare with, on the grader's side: PyTorch in float64, and a report
that names the worst element. Nothing here runs the student's code; the student's answers come
in as plain arrays (`student.call`), and are checked with `Student.array` before use."""

import numpy as np
import torch

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


def assert_close(name, got, expected, rtol=1e-9, atol=1e-11):
    """Raise AssertionError naming `name`, the worst element, yours against the reference."""
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
        raise AssertionError(f"{name}: {int(bad.sum())} of {bad.size} elements differ from PyTorch's; worst "
                             f"{name}{index}: yours {got[worst]!r}, PyTorch's {expected[worst]!r} "
                             f"(allowed |difference| {allowed[worst]:.3g})")


def torch_expression(expression, inputs, upstream):
    """PyTorch's output of `expression` (over the named inputs) and each floating input's
    gradient when `upstream` flows back: {"out": ..., "d<name>": ...}."""
    tensors = {name: torch.tensor(array, requires_grad=array.dtype.kind == "f") for name, array in inputs.items()}
    out = eval(expression, {"torch": torch, "np": np}, dict(tensors))
    out.backward(torch.as_tensor(upstream))
    answer = {"out": out.detach().numpy()}
    answer.update({f"d{name}": t.grad.numpy() for name, t in tensors.items() if t.requires_grad})
    return answer


def assert_matches(answer, reference, rtol=1e-9, atol=1e-11):
    """Every entry of the reference against the same entry of the student's answer."""
    if type(answer) is not dict:
        raise AssertionError(f"expected a dict of arrays from the student's side, got {type(answer).__name__}")
    for key, expected in reference.items():
        assert_close(key, answer.get(key), expected, rtol, atol)


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
