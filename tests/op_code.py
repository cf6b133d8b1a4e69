"""The ops' own code on plain arrays, called as an accelerator's kernels are: what every kernel is
tested against. Each function runs its op's forward or backward with no accelerator active
(mt.testing.op_forward, op_backward), so the lines that run are the ones in minitensor/ops/."""

import minitensor as mt
from minitensor.ops import GELU, Attention, LayerNormFunction, LogSoftmax, Softmax
from minitensor.testing import op_backward as _backward
from minitensor.testing import op_forward as _forward


def softmax(x, axis=-1, mask=None):
    return _forward(Softmax, x, axis=axis, mask=mask)[0]


def softmax_backward(y, grad, axis=-1):
    return _backward(Softmax, grad, (y,), axis=axis, mask=None)


def log_softmax(x, axis=-1):
    return _forward(LogSoftmax, x, axis=axis)[0]


def log_softmax_backward(y, grad, axis=-1):
    return _backward(LogSoftmax, grad, (y,), axis=axis)


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """(y, mean, rstd), as an accelerator's layer_norm returns them."""
    y, node = _forward(LayerNormFunction, x, weight, bias, eps=eps)
    _, _, mean, rstd = node.saved_tensors
    return y, mean, rstd


def layer_norm_backward(dy, x, weight, mean, rstd):
    """(dx, dweight, dbias); dweight and dbias are None without a weight."""
    grads = _backward(LayerNormFunction, dy, (x, weight, mean, rstd))
    return (grads, None, None) if weight is None else grads


def gelu(x, approximate="none"):
    return _forward(GELU, x, approximate=approximate)[0]


def gelu_backward(x, dy, approximate="none"):
    return _backward(GELU, dy, (x,), approximate=approximate)


def attention(q, k, v, mask=None, scale=None, is_causal=False):  # (the signature of an accelerator's kernel)
    """(out, (row_max, row_sum)), as an accelerator's attention returns them."""
    out, node = _forward(Attention, q, k, v, mask=mask, scale=scale, is_causal=is_causal)
    return out, node.saved_tensors[4]


def attention_backward(q, k, v, out, softmax_stats, dout, mask=None, scale=None, is_causal=False):  # (likewise)
    scale = mt.F.attention_scale(q.shape[-1]) if scale is None else scale
    return _backward(Attention, dout, (q, k, v, out, softmax_stats), mask=mask, scale=scale, is_causal=is_causal)
