"""The pre-norm block of tests/compare_blocks.py written in PyTorch with the same module paths
(ln1, ln2, attn.w_q .. attn.w_o, mlp.fc1, mlp.fc2), the reference of tests/test_compare_torch.py."""

import math

import torch
from torch import nn


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
