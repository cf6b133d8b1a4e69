"""A pre-norm block as a student writes it (its attention op by op), with six bugs that can be
planted one at a time, for mt.debug.compare's tests.

The bugs in ops are planted as Function subclasses of the same name whose backward is written here
on plain arrays, so the planting does not depend on where the library keeps an op's derivative:
    softmax_backward      softmax's backward without the subtraction term: y * grad
    layer_norm_backward   layer norm's backward without the mean term (of g and of g * x_hat)
    bias_gradient         a Linear's bias gradient averaged over the rows instead of summed
and the bugs in the student's code:
    mask_shift            the causal mask shifted by one (each query also sees the next key)
    merge_heads           the heads merged in the wrong axis order (d_head before heads)
    residual              the residual added after the norm: LN(x) + MHA(LN(x))
"""

import numpy as np

import minitensor as mt
from minitensor import F, nn, ops

BUGS = ("softmax_backward", "layer_norm_backward", "mask_shift", "merge_heads", "residual", "bias_gradient")

# Where each bug shows first: (op, module, forward or backward)
EXPECTED = {
    "softmax_backward": ("Softmax", "attn", "backward"),
    "layer_norm_backward": ("LayerNormFunction", "ln2", "backward"),
    "mask_shift": ("Softmax", "attn", "forward"),
    "merge_heads": ("Transpose", "attn", "forward"),
    "residual": ("Add", "", "forward"),
    "bias_gradient": ("Add", "mlp.fc2", "backward"),
}


class Softmax(ops.Softmax):
    """Softmax whose backward forgets the subtraction term."""

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        dx = y * grad
        return np.where(ctx.mask, 0, dx) if ctx.mask is not None else dx


class LayerNormFunction(ops.LayerNormFunction):
    """Layer norm whose backward forgets that the mean and variance depend on every x of the row."""

    @staticmethod
    def backward(ctx, grad):
        x, weight, mean, rstd = ctx.saved_tensors
        x_hat = (x - mean) * rstd
        dx = grad * weight * rstd
        reduced = tuple(range(grad.ndim - 1))
        return dx, (grad * x_hat).sum(axis=reduced), grad.sum(axis=reduced)


class Add(ops.Add):
    """x + bias whose backward averages the bias's gradient over the rows."""

    @staticmethod
    def backward(ctx, grad):
        return grad, grad.mean(axis=tuple(range(grad.ndim - 1)))


class Linear(nn.Module):
    def __init__(self, d_in, d_out, averaged_bias=False):
        super().__init__()
        self.weight = nn.Parameter(mt.randn(d_out, d_in).data * 0.3)
        self.bias = nn.Parameter(mt.randn(d_out).data * 0.3)
        self.add = Add if averaged_bias else ops.Add

    def forward(self, x):
        return self.add.apply(x @ self.weight.T, self.bias)


class LayerNorm(nn.Module):
    def __init__(self, d, planted=False):
        super().__init__()
        self.weight = nn.Parameter(1 + mt.randn(d).data * 0.3)
        self.bias = nn.Parameter(mt.randn(d).data * 0.3)
        self.function = LayerNormFunction if planted else ops.LayerNormFunction

    def forward(self, x):
        return self.function.apply(x, self.weight, self.bias, eps=1e-5)


class Attention(nn.Module):
    def __init__(self, d, heads, bugs):
        super().__init__()
        self.heads, self.bugs = heads, bugs
        self.w_q, self.w_k, self.w_v, self.w_o = (Linear(d, d) for _ in range(4))

    def forward(self, x):
        B, T, d = x.shape
        H = self.heads
        q = self.w_q(x).reshape(B, T, H, d // H).transpose(1, 2)  # (B, H, T, dh)
        k = self.w_k(x).reshape(B, T, H, d // H).transpose(1, 2)
        v = self.w_v(x).reshape(B, T, H, d // H).transpose(1, 2)
        scores = (q @ k.swapaxes(-1, -2)) * (1.0 / np.sqrt(d // H))  # (B, H, T, T)
        hidden = np.triu(np.ones((T, T), dtype=bool), k=2 if "mask_shift" in self.bugs else 1)
        softmax = Softmax if "softmax_backward" in self.bugs else ops.Softmax
        weights = softmax.apply(scores, axis=-1, mask=np.broadcast_to(hidden, scores.shape))
        out = weights @ v  # (B, H, T, dh)
        if "merge_heads" in self.bugs:
            out = out.permute(0, 2, 3, 1)  # (B, T, dh, H): the heads' outputs interleaved
        else:
            out = out.transpose(1, 2)  # (B, T, H, dh)
        return self.w_o(out.reshape(B, T, d))


class MLP(nn.Module):
    def __init__(self, d, bugs):
        super().__init__()
        self.fc1 = Linear(d, 4 * d)
        self.fc2 = Linear(4 * d, d, averaged_bias="bias_gradient" in bugs)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class StudentBlock(nn.Module):
    """H = X + MHA(LN(X)), X' = H + MLP(LN(H)), with the given bugs planted."""

    def __init__(self, d, heads, bugs=()):
        super().__init__()
        self.bugs = tuple(bugs)
        self.ln1 = LayerNorm(d)
        self.ln2 = LayerNorm(d, planted="layer_norm_backward" in bugs)
        self.attn = Attention(d, heads, bugs)
        self.mlp = MLP(d, bugs)

    def forward(self, x):
        normed = self.ln1(x)
        if "residual" in self.bugs:
            h = normed + self.attn(normed)
        else:
            h = x + self.attn(normed)
        return h + self.mlp(self.ln2(h))


def blocks(bugs, dtype, d=8, heads=2, seed=0):
    """(the student's block with `bugs`, a correct one, an input x), in dtype."""
    previous = mt.get_default_dtype() if hasattr(mt, "get_default_dtype") else np.float32
    mt.set_default_dtype(dtype)
    try:
        mt.manual_seed(seed)
        student = StudentBlock(d, heads, bugs)
        reference = StudentBlock(d, heads)
    finally:
        mt.set_default_dtype(previous)
    x = np.random.default_rng(seed).standard_normal((2, 5, d)).astype(dtype)
    return student, reference, x
