"""A numeric fuzzer for the kernels a transformer leans on: softmax, log_softmax, cross-entropy,
layer norm, GELU and attention, and the edges PyTorch users meet (issue 32): a masked softmax
with inf or NaN visible, powers at 0 (x**0, 0**b for b < 0), a subnormal over 0, relu at -0.0
and NaN, on the numpy and numba backends, in float32 and float64, with
extreme values (+-1e4 up to 3e38, -1e9 masks, +-inf, NaN). Each case runs in minitensor (in the
case's dtype) and in PyTorch in float64 on the same values and upstream gradient, and gets one
outcome:

agree       output and every gradient match (to the case dtype's tolerance, relative to the
            largest reference value), NaN and inf in the same places
policy      the only difference is minitensor's documented policy for a row with nothing
            visible (every entry -inf or hidden): zeros and no gradient where PyTorch gives NaN
range       a float32 case that differs from the float64 reference where float32's range runs
            out (3e38 - -3e38, scores |q k| > 3.4e38, a variance of x ~ 1e20, ...), judged from
            the inputs alone
saturated   attention gradients within the documented error of saturated attention,
            16 eps |dO| |v| max(|q|, |k|) (README, "Backends"), the output matching
nonfinite   inputs holding inf or NaN, and the difference is where a NaN or inf shows up
differ      anything else (listed with the case by scripts/numeric_fuzz.py)

tests/test_numeric_fuzz.py runs a small fixed slice; `python scripts/numeric_fuzz.py 3000`
runs thousands and prints the table.
"""

import numpy as np
import torch

import minitensor as mt
from minitensor import F
from models.layernorm import layer_norm

OPS = ["softmax", "log_softmax", "cross_entropy", "layer_norm", "gelu", "attention", "masked_softmax", "pow", "div",
       "relu"]
BACKENDS = ["numpy", "numba"]
DTYPES = [np.float32, np.float64]
SCALES = [1.0, 1e4, 1e15, 1e30, 3e38]
SPECIALS = [1e4, -1e4, 3e38, -3e38, np.inf, -np.inf, np.nan, -1e9]
ROW_VALUES = [-np.inf, np.inf, np.nan, -1e9, 3e38, 1e15, -1e15]
# Closeness, relative to the largest finite reference value of each array: float32 kernels
# (numba's fused loops, BLAS) reorder sums, so they agree to a few ulps of the largest term.
TOLERANCE = {np.float32: 2e-4, np.float64: 1e-9}


def make_case(seed):
    """A case as data (plain arrays and names), so that it can be printed and replayed."""
    rng = np.random.default_rng(seed)
    op = OPS[seed % len(OPS)]
    dtype = DTYPES[(seed // len(OPS)) % 2]
    backend = BACKENDS[(seed // (2 * len(OPS))) % 2]
    scale = SCALES[(seed // 24 + seed) % len(SCALES)]  # each (op, dtype, backend) meets every scale

    def values(shape):
        x = rng.standard_normal(shape) * scale
        if rng.random() < 0.5:  # sprinkle special values
            where = rng.random(shape) < 0.2
            x[where] = rng.choice(SPECIALS, size=int(where.sum()))
        if seed % 3 == 1 or rng.random() < 0.2:  # a row of one value (-inf: nothing visible; 1e15: a tie at the max)
            x[(0,) * (x.ndim - 1)] = ROW_VALUES[(seed // 3) % len(ROW_VALUES)]
        with np.errstate(over="ignore"):
            return x.astype(dtype)

    case = dict(seed=seed, op=op, dtype=np.dtype(dtype).name, backend=backend, scale=scale)
    if op == "attention":
        case["inputs"] = [values((2, 4, 3)) for _ in range(3)]
        kind = rng.choice(["none", "bool", "float", "causal"])
        case["mask_kind"] = str(kind)
        if kind == "bool":
            case["mask"] = rng.random((4, 4)) < 0.4
        elif kind == "float":
            case["mask"] = np.where(rng.random((4, 4)) < 0.4, -1e9, 0.0)
    elif op == "cross_entropy":
        case["inputs"] = [values((4, 5))]
        case["target"] = rng.integers(0, 5, size=4)
    elif op == "masked_softmax":
        case["inputs"] = [values((3, 5))]
        case["mask"] = rng.random((3, 5)) < 0.4  # True hides
    elif op == "pow":  # bases with zeros, exponents with 0, negatives and fractions (at moderate
        base = (rng.standard_normal((3, 5)) * 3).astype(dtype)  # values: float32's range is attention's job)
        base[rng.random((3, 5)) < 0.4] = 0
        exponent = rng.choice([0.0, -1.0, -0.5, 0.5, 1.0, 2.0, 3.0], size=(3, 5)).astype(dtype)
        case["inputs"] = [base, exponent]
    elif op == "div":  # subnormals over zeros
        tiny = np.finfo(dtype).smallest_subnormal
        numerator, denominator = values((3, 5)), values((3, 5))
        numerator[rng.random((3, 5)) < 0.3] = tiny * rng.choice([-1, 1])
        denominator[rng.random((3, 5)) < 0.3] = 0
        case["inputs"] = [numerator, denominator]
    elif op == "relu":
        x = values((3, 5))
        x[rng.random((3, 5)) < 0.3] = rng.choice([-0.0, np.nan, 0.0])
        case["inputs"] = [x]
    elif op == "layer_norm":
        case["inputs"] = [values((3, 6)), rng.standard_normal(6).astype(dtype), rng.standard_normal(6).astype(dtype)]
    else:
        case["inputs"] = [values((3, 5))]
    out_shape = {"attention": (2, 4, 3), "cross_entropy": ()}.get(op, case["inputs"][0].shape)
    case["upstream"] = rng.standard_normal(out_shape).astype(dtype)
    return case


def _call(lib, case, tensors):
    """The case's op in minitensor (lib=mt) or PyTorch (lib=torch), on tensors of its library."""
    op = case["op"]
    if op == "softmax":
        return tensors[0].softmax(axis=-1) if lib is mt else torch.softmax(tensors[0], -1)
    if op == "log_softmax":
        return tensors[0].log_softmax(axis=-1) if lib is mt else torch.log_softmax(tensors[0], -1)
    if op == "masked_softmax":
        if lib is mt:
            return tensors[0].softmax(axis=-1, mask=case["mask"])
        # what a PyTorch user writes: hide with -inf, and keep the hidden weights at 0 (a row
        # with a visible NaN, or nothing visible, is NaN in torch.softmax; its hidden entries are not)
        hidden = torch.from_numpy(case["mask"])
        return torch.softmax(tensors[0].masked_fill(hidden, -np.inf), -1).masked_fill(hidden, 0)
    if op == "pow":
        return tensors[0] ** tensors[1]
    if op == "div":
        return tensors[0] / tensors[1]
    if op == "relu":
        return tensors[0].relu()
    if op == "gelu":
        return F.gelu(tensors[0]) if lib is mt else torch.nn.functional.gelu(tensors[0])
    if op == "layer_norm":
        if lib is mt:
            return layer_norm(*tensors)
        # PyTorch's primitives, not its fused F.layer_norm: on a constant row of -1e15 the fused
        # CPU kernel's variance comes out of rounding (y is not the bias); the definition's is 0
        x, weight, bias = tensors
        centered = x - x.mean(-1, keepdim=True)
        variance = (centered * centered).mean(-1, keepdim=True)
        return centered / torch.sqrt(variance + 1e-5) * weight + bias
    if op == "cross_entropy":
        if lib is mt:
            return F.cross_entropy(tensors[0], case["target"])
        return torch.nn.functional.cross_entropy(tensors[0], torch.from_numpy(case["target"]))
    mask, causal = case.get("mask"), case["mask_kind"] == "causal"
    if lib is mt:
        return F.scaled_dot_product_attention(*tensors, mask=mask, is_causal=causal)
    if mask is not None:
        mask = torch.from_numpy(~mask) if mask.dtype == bool else torch.from_numpy(mask.astype(case["dtype"]))
    return torch.nn.functional.scaled_dot_product_attention(*tensors, attn_mask=mask, is_causal=causal)


def run_minitensor(case):
    with mt.use_backend(case["backend"]), np.errstate(all="ignore"):
        tensors = [mt.tensor(a, requires_grad=True) for a in case["inputs"]]
        out = _call(mt, case, tensors)
        out.backward(case["upstream"])
    return [out.data] + [t.grad for t in tensors]


def run_torch(case, dtype=np.float64):
    """PyTorch in float64 (or dtype) on the case's values (as the case's dtype holds them)."""
    case = dict(case, dtype=np.dtype(dtype).name, mask=case.get("mask") if case.get("mask") is None or
                case["mask"].dtype == bool else case["mask"].astype(case["dtype"]).astype(dtype))
    tensors = [torch.from_numpy(a.astype(dtype)).requires_grad_() for a in case["inputs"]]
    out = _call(torch, case, tensors)
    out.backward(torch.from_numpy(case["upstream"].astype(dtype)))
    return [out.detach().numpy()] + [t.grad.numpy() for t in tensors]


def _scores(case, dtype):
    with np.errstate(all="ignore"):
        q, k = (a.astype(dtype) for a in case["inputs"][:2])
        return (q @ np.swapaxes(k, -1, -2)) * dtype(1 / np.sqrt(q.shape[-1]))


def _hidden_rows(case):
    """Rows (softmax-like ops) or queries (attention) with nothing visible: every entry -inf or
    hidden. Where there are some, minitensor's policy (zeros) and PyTorch's (NaN) differ."""
    op, x = case["op"], case["inputs"][0]
    if op in ("softmax",):
        return np.all(np.isneginf(x), axis=-1).any()
    if op == "attention":
        hidden = np.isneginf(_scores(case, np.dtype(case["dtype"]).type))
        if case.get("mask") is not None and case["mask"].dtype == bool:
            hidden |= case["mask"]
        if case["mask_kind"] == "causal":
            hidden |= np.triu(np.ones((4, 4), dtype=bool), 1)
        return np.all(hidden, axis=-1).any()
    return False


def _close(mine, theirs, dtype):
    """Close within the tolerance relative to the largest finite reference value, with NaN,
    +inf and -inf in the same places."""
    mine, theirs = np.asarray(mine, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    if mine.shape != theirs.shape:
        return False
    for special in (np.isnan, np.isposinf, np.isneginf):
        if not np.array_equal(special(mine), special(theirs)):
            return False
    finite = np.isfinite(theirs)
    if not finite.any():
        return True
    size = max(1.0, float(np.abs(theirs[finite]).max()))
    return bool(np.all(np.abs(mine[finite] - theirs[finite]) <= TOLERANCE[np.dtype(dtype).type] * size))


def _largest(case):
    return max((float(np.abs(a[np.isfinite(a)]).max()) for a in case["inputs"] if np.isfinite(a).any()), default=0.0)


def _past_float32_range(case):
    """Whether float32 cannot hold what the op computes on these inputs, judged from the inputs
    alone (no other library's float32 is the truth): an input within a factor of 2 of float32's
    largest value (a difference or sum of two overflows), or, where the op squares or multiplies
    inputs (layer norm's variance, attention's scores), one past the square root of it."""
    largest, limit = _largest(case), float(np.finfo(np.float32).max)
    if largest >= limit / 2:
        return True
    if case["op"] in ("layer_norm", "attention"):
        scale = largest * (np.sqrt(case["inputs"][0].shape[-1]) if case["op"] == "attention" else 1.0)
        return scale * largest >= limit
    return False


def compare(case):
    """(outcome, detail): agree, policy or differ (see the module docstring)."""
    try:
        ours = run_minitensor(case)
    except Exception as error:  # noqa: BLE001 (a case that raises is reported, not hidden)
        return "differ", f"minitensor raised {error!r}"
    theirs = run_torch(case)
    names = ["output"] + [f"grad {i}" for i in range(len(ours) - 1)]
    off = [name for name, a, b in zip(names, ours, theirs) if not _close(a, b, case["dtype"])]
    if case["op"] == "relu":  # the sign of a zero output too: 1 / relu(-1) is +inf in PyTorch
        zeros = (ours[0] == 0) & (theirs[0] == 0)
        if not np.array_equal(np.signbit(ours[0][zeros]), np.signbit(theirs[0][zeros])):
            off.append("output (the sign of a zero)")
    if not off:
        return "agree", None
    if _hidden_rows(case):
        return "policy", f"{off} differ; a row with nothing visible (zeros here, NaN in PyTorch)"
    inputs_finite = all(np.isfinite(a).all() for a in case["inputs"])
    if case["dtype"] == "float32" and _past_float32_range(case):
        return "range", f"{off} differ from float64 where float32's range runs out (inputs up to {_largest(case):.3g})"
    if case["op"] == "attention" and inputs_finite:
        q, k, v = (np.abs(a.astype(np.float64)).max() for a in case["inputs"])
        bound = 16 * np.finfo(case["dtype"]).eps * np.abs(case["upstream"]).max() * v * max(q, k)
        within = all(np.all(np.abs(np.asarray(a, np.float64) - b) <= bound) for a, b in zip(ours[1:], theirs[1:]))
        if "output" not in off and within:
            return "saturated", f"{off} differ by at most the documented bound {bound:.3g}"
    if not inputs_finite:
        return "nonfinite", f"{off} differ; the inputs hold inf or NaN"
    return "differ", "; ".join(f"{name}: ours {np.asarray(a).tolist()} PyTorch {np.asarray(b).tolist()}"
                               for name, a, b in zip(names, ours, theirs) if name in off)
