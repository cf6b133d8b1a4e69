"""The seeds' PyTorch models, written once: the tests hold our models against them
(tests/test_models.py) and the block benchmark times them (benchmarks/block.py).

Importing this module imports torch; minitensor itself never does, so only code that
compares with PyTorch imports it."""

import torch
from torch import nn


class TorchBlock(nn.TransformerEncoderLayer):
    """The seed's pre-normalization block: PyTorch's own encoder layer with norm_first=True,
    an MLP of width 4d with GELU, and no dropout. It answers to the seed's names (ln1, ln2,
    attn, and mlp[0], mlp[2] for the MLP's two linear layers), which Block.from_torch reads."""

    def __init__(self, d, heads):
        super().__init__(d, heads, dim_feedforward=4 * d, dropout=0.0, activation="gelu", batch_first=True,
                         norm_first=True)

    ln1 = property(lambda self: self.norm1)
    ln2 = property(lambda self: self.norm2)
    attn = property(lambda self: self.self_attn)
    mlp = property(lambda self: (self.linear1, self.activation, self.linear2))

    def forward(self, x, mask=None):
        return super().forward(x, src_mask=mask)


class TorchGPT(nn.Module):
    """The seed's GPT: token and position embeddings, causal blocks, a tied output layer."""

    def __init__(self, vocab, context, d, heads, layers):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList(TorchBlock(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T))
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln(x))
