"""References for tests/test_compare_torch.py: the pre-norm block of tests/compare_blocks.py written
in PyTorch with the same module paths (ln1, ln2, attn.w_q .. attn.w_o, mlp.fc1, mlp.fc2); and a
student's pre-norm encoder layer in minitensor with the paths of torch's nn.TransformerEncoderLayer
(self_attn.in_proj_weight, self_attn.out_proj, linear1, linear2, norm1, norm2)."""

import math

import numpy as np
import torch
from torch import nn

import minitensor as mt
from minitensor import F
from minitensor import nn as mnn


class TorchAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        B, T, d = x.shape
        H = self.heads
        q = self.w_q(x).reshape(B, T, H, d // H).transpose(1, 2)
        k = self.w_k(x).reshape(B, T, H, d // H).transpose(1, 2)
        v = self.w_v(x).reshape(B, T, H, d // H).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // H)
        hidden = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
        return self.w_o((weights @ v).transpose(1, 2).reshape(B, T, d))


class TorchMLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


class TorchBlock(nn.Module):
    """H = X + MHA(LN(X)), X' = H + MLP(LN(H))."""

    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = TorchAttention(d, heads)
        self.mlp = TorchMLP(d)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.mlp(self.ln2(h))


def torch_block(d=8, heads=2, seed=0):
    torch.manual_seed(seed)
    block = TorchBlock(d, heads)
    with torch.no_grad():  # weights and biases off their defaults, so a wrong bias or scale shows
        for parameter in block.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    return block


class SelfAttention(mnn.Module):
    """nn.MultiheadAttention's parameters: the three projections packed in in_proj_weight."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.in_proj_weight = mnn.Parameter(mt.randn(3 * d, d).data * 0.3)
        self.in_proj_bias = mnn.Parameter(mt.randn(3 * d).data * 0.3)
        self.out_proj = mnn.Linear(d, d)

    def forward(self, query, key, value):
        B, T, d = query.shape
        H = self.heads
        w, b = self.in_proj_weight, self.in_proj_bias
        q, k, v = (x @ w[i * d:(i + 1) * d].T + b[i * d:(i + 1) * d] for i, x in enumerate((query, key, value)))
        q, k, v = (t.reshape(B, T, H, d // H).transpose(1, 2) for t in (q, k, v))
        weights = F.softmax((q @ k.swapaxes(-1, -2)) * (1.0 / np.sqrt(d // H)), axis=-1)
        return self.out_proj((weights @ v).transpose(1, 2).reshape(B, T, d))


class EncoderLayer(mnn.Module):
    """nn.TransformerEncoderLayer(d, heads, 4 * d, activation="gelu", batch_first=True,
    norm_first=True) as a student writes it; residual_bug adds the residual after the norm."""

    def __init__(self, d, heads, residual_bug=False):
        super().__init__()
        self.self_attn = SelfAttention(d, heads)
        self.linear1, self.linear2 = mnn.Linear(d, 4 * d), mnn.Linear(4 * d, d)
        self.norm1, self.norm2 = mnn.LayerNorm(d), mnn.LayerNorm(d)
        self.residual_bug = residual_bug

    def forward(self, x):
        h = self.norm1(x)
        x = (h if self.residual_bug else x) + self.self_attn(h, h, h)
        return x + self.linear2(F.gelu(self.linear1(self.norm2(x))))


def encoder_layers(dtype, residual_bug=False, d=8, heads=2):
    """(the student's layer in dtype, torch's nn.TransformerEncoderLayer with dropout, x)."""
    previous = mt.get_default_dtype()
    mt.set_default_dtype(dtype)
    try:
        student = EncoderLayer(d, heads, residual_bug)
    finally:
        mt.set_default_dtype(previous)
    torch.manual_seed(0)
    reference = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)
    x = np.random.default_rng(0).standard_normal((2, 5, d)).astype(dtype)
    return student, reference, x
