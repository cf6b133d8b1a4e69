"""Cheats that get the values without doing the work (issue 30, point 6): every backward by central
differences of the op's own forward; softmax's and layer norm's backward through the engine,
attention with its (T, T) scores, the demo's counts stored. Each copy scores what it earns without
its cheat."""

from round_trip import grade

import homework



# ----------------------------------------------------------------------------
# Cheats that get the values without doing the work (issue 30, point 6)
# ----------------------------------------------------------------------------

# Every backward of an op taken by central differences of the op's own forward, one input
# element at a time (what a student who skipped the derivation writes); exact enough for every
# value test, and O(size^2).
NUMERICAL_BACKWARD = '''
import numpy as _np
from minitensor import autograd as _ag
from minitensor.ops import elementwise as _el, linalg as _la, reduce as _re, softmax as _sm
from models import layernorm as _ln

_plain_apply = _ag.Function.__dict__["apply"].__func__


def _remembering_apply(cls, *inputs, **options):
    out = _plain_apply(cls, *inputs, **options)
    if out.grad_fn is not None and cls in _NUMERICAL:
        out.grad_fn.__dict__["_inputs"] = ([_np.array(t.data, copy=True) for t in inputs], options)
    return out


_ag.Function.apply = classmethod(_remembering_apply)


def _numerical(cls):
    def backward(ctx, grad):
        arrays, options = ctx.__dict__["_inputs"]

        def f(values):
            return _np.asarray(cls.forward(_ag.Context(cls, ctx.needs_input_grad), *values, **options))

        grads = []
        for i, a in enumerate(arrays):
            if not ctx.needs_input_grad[i] or a.dtype.kind != "f":
                grads.append(None)
                continue
            g = _np.zeros_like(a)
            for j in range(a.size):
                h = 1e-6 * max(1.0, abs(float(a.flat[j])))
                plus, minus = [v.copy() for v in arrays], [v.copy() for v in arrays]
                plus[i].flat[j] += h
                minus[i].flat[j] -= h
                g.flat[j] = _np.sum((f(plus) - f(minus)) * grad) / (2 * h)
            grads.append(g)
        return tuple(grads) if len(grads) > 1 else grads[0]

    cls.backward = staticmethod(backward)


_NUMERICAL = (_el.Mul, _el.Div, _el.Exp, _el.Tanh, _la.MatMul, _re.Sum, _re.Mean, _re.Var, _re.Max, _re.Min,
              _sm.Softmax, _ln.LayerNormFunction)
for _cls in _NUMERICAL:
    _numerical(_cls)
'''

# Softmax's and layer norm's backward through the engine's autograd of the composed forward (the
# kernels too, rebuilding the input from what they are given); attention materialised, (T, T)
# scores and all, its backward through the engine; the demo's counts stored for the seed's model.
ENGINE_BACKWARD = '''
import numpy as _np
import minitensor as _mt
from minitensor.ops import attention as _at
from minitensor.ops import normalization as _lnf
from minitensor.ops import softmax as _sm


def _softmax_grad(y, dy, axis):
    with _mt.enable_grad():
        x = _mt.tensor(_np.log(y), requires_grad=True)
        e = x.exp()
        (e / e.sum(axis=axis, keepdims=True)).backward(dy)
    return x.grad


_sm.Softmax.backward = staticmethod(lambda ctx, grad: _softmax_grad(ctx.saved_tensors[0], grad, ctx.axis))


def _layer_norm_grad(dy, x, weight, mean, rstd):
    from models import layernorm as _ln

    eps = float(_np.mean(1 / rstd**2 - x.var(axis=-1, keepdims=True)))
    with _mt.enable_grad():
        tensors = [_mt.tensor(a, requires_grad=True) for a in (x, weight, _np.zeros_like(weight))]
        _ln.layer_norm_composed(*tensors, eps=eps).backward(dy)
    return tensors[0].grad, tensors[1].grad, tensors[2].grad


def _layer_norm_backward(ctx, grad):
    x, weight, mean, rstd = ctx.saved_tensors
    dx, dweight, dbias = _layer_norm_grad(grad, x, weight, mean, rstd)
    return dx if weight is None else (dx, dweight, dbias)


_lnf.LayerNormFunction.backward = staticmethod(_layer_norm_backward)


def _scores(q, k, mask, scale, is_causal):
    scale = 1 / _np.sqrt(q.shape[-1]) if scale is None else scale
    hidden = _np.zeros((q.shape[-2], k.shape[-2]), bool) if mask is None else _np.asarray(mask, bool)
    if is_causal:
        hidden = hidden | (_np.arange(k.shape[-2])[None, :] - _np.arange(q.shape[-2])[:, None]
                           > k.shape[-2] - q.shape[-2])
    return scale, hidden


def _full_attention(q, k, v, mask=None, scale=None, is_causal=False):
    scale, hidden = _scores(q, k, mask, scale, is_causal)
    s = _np.where(hidden, -_np.inf, q @ k.swapaxes(-1, -2) * scale)
    m = s.max(axis=-1)
    w = _np.exp(s - m[..., None])
    return (w / w.sum(axis=-1, keepdims=True)) @ v, (m, w.sum(axis=-1))


def _full_attention_backward(q, k, v, out, stats, dout, mask=None, scale=None, is_causal=False):
    scale, hidden = _scores(q, k, mask, scale, is_causal)
    with _mt.enable_grad():
        tq, tk, tv = (_mt.tensor(a, requires_grad=True) for a in (q, k, v))
        weights = ((tq @ tk.swapaxes(-1, -2)) * scale).softmax(axis=-1, mask=_np.broadcast_to(hidden, q.shape[:-1] + k.shape[-2:-1]))
        (weights @ tv).backward(dout)
    return tq.grad, tk.grad, tv.grad


def _attention_forward(ctx, q, k, v, mask=None, scale=None, is_causal=False):
    out, stats = _full_attention(q, k, v, mask, scale, is_causal)
    ctx.save_for_backward(q, k, v, out, stats)
    ctx.mask, ctx.scale, ctx.is_causal = mask, scale, is_causal
    return out


def _attention_backward(ctx, grad):
    q, k, v, out, stats = ctx.saved_tensors
    return _full_attention_backward(q, k, v, out, stats, grad, ctx.mask, ctx.scale, ctx.is_causal)


_at.Attention.forward, _at.Attention.backward = staticmethod(_attention_forward), staticmethod(_attention_backward)
'''

STORED_COUNTS = ("    return {f'multi-head ({heads} KV heads)': 2621440, 'grouped-query (8 KV heads)': 327680, "
                 "'multi-query (1 KV head)': 40960, 'latent (512 + 64 numbers, MLA)': 92160}")


def _plant_code(copy, code):
    init = copy / "minitensor" / "__init__.py"
    init.write_text(init.read_text() + "\n# a cheat\n" + code)


def test_backwards_taken_numerically_earn_nothing(tmp_path, worker_python):
    """Five backward tasks by central differences of each op's own forward: the copy's score
    without them (each task's work test stops the call at its budget, and the task's other
    tests do not count)."""
    tasks = ["topological_order", "elementwise_backward", "matmul_backward", "reductions", "softmax_backward",
             "layer_norm_backward"]
    copy = homework.strip(tmp_path / "student", keep=tasks[:1])
    _plant_code(copy, NUMERICAL_BACKWARD)
    ok, rows, table = grade(copy, tasks=tasks, python=worker_python, timeout=30,
                            verbose=True)
    assert [row.points for row in rows] == [10.0] + [0.0] * 5, table
    assert "the budget of this call" in table and "not counted: this task's work test failed" in table


def test_backwards_through_the_engine_full_attention_and_stored_counts_earn_nothing(tmp_path, worker_python):
    """Softmax's and layer norm's backward through the engine's autograd of their composed
    forward, attention with its (T, T) scores, and the seed's counts stored: the score of the copy
    without them (the earlier tasks the cheats lean on solved)."""
    solved = ["topological_order", "elementwise_backward", "unbroadcast", "matmul_backward", "reductions"]
    tasks = solved + ["softmax_backward", "layer_norm_backward", "tiled_attention", "demo_kv_cache"]
    copy = homework.strip(tmp_path / "student", keep=solved)
    _plant_code(copy, ENGINE_BACKWARD)
    demo = copy / "demos" / "kv_cache.py"
    stub = next(line for line in demo.read_text().splitlines() if "NotImplementedError" in line)
    demo.write_text(demo.read_text().replace(stub, STORED_COUNTS))  # the seed's numbers, whatever the model
    ok, rows, table = grade(copy, tasks=tasks, python=worker_python, timeout=30,
                            verbose=True)
    assert [row.points for row in rows] == [10.0] * 5 + [0.0] * 4, table
    assert "rows that do not sum to 1" in table and "not counted: this task's work test failed" in table, table
    assert "MemoryError" in table


# Softmax's and layer norm's backward by one complex step along the upstream gradient: both
# Jacobians are symmetric, so Im f(x + i h g) / h = J g = J^T g is the backward, O(n), no engine
# op; the input rebuilt from what forward saved (log y; x itself, eps recovered from rstd).
COMPLEX_STEP = '''
import numpy as _np
from minitensor.ops import normalization as _lnf
from minitensor.ops import softmax as _sm

_H = 1e-30


def _softmax_of(x, axis):
    e = _np.exp(x - x.real.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_backward(ctx, grad):
    (y,) = ctx.saved_tensors
    axis = getattr(ctx, "axis", -1)
    return _softmax_of(_np.log(y) + 1j * _H * grad, axis).imag / _H


def _layer_norm_backward(ctx, grad):
    x, weight, mean, rstd = ctx.saved_tensors
    eps = float(_np.mean(1 / rstd**2 - x.var(axis=-1, keepdims=True)))
    g = grad if weight is None else grad * weight
    z = x + 1j * _H * g
    centred = z - z.mean(axis=-1, keepdims=True)
    x_hat = centred / _np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
    dx = x_hat.imag / _H
    if weight is None:
        return dx
    plain = (x - mean) * rstd
    return dx, (grad * plain).reshape(-1, x.shape[-1]).sum(0), grad.reshape(-1, x.shape[-1]).sum(0)


_sm.Softmax.backward = staticmethod(_softmax_backward)
_lnf.LayerNormFunction.backward = staticmethod(_layer_norm_backward)
'''


def test_a_backward_by_one_complex_step_earns_nothing(tmp_path, worker_python):
    """Right on every forward's image (so it passes the public tests, and is O(n): timed ones too),
    wrong off it, where the teacher's work tests judge the kernels: the tasks earn nothing."""
    solved = ["topological_order", "elementwise_backward", "unbroadcast", "matmul_backward", "reductions"]
    copy = homework.strip(tmp_path / "student", keep=solved)
    _plant_code(copy, COMPLEX_STEP)
    ok, rows, table = grade(copy, tasks=solved + ["softmax_backward", "layer_norm_backward"], python=worker_python,
                            timeout=30, verbose=True)
    assert [row.points for row in rows] == [10.0] * 5 + [0.0] * 2, table
    public = [line for line in table.splitlines() if "test_softmax_backward" in line or "test_layer_norm_backward" in line]
    assert public and "not counted: this task's work test failed" in table, table
