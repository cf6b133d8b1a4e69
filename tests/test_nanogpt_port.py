"""A nanoGPT-style model ported from PyTorch with only the README's porting table (issue 32): a
fused qkv Linear split with .split(d, dim=2), heads by view + transpose, F.scaled_dot_product_attention
with is_causal=True, tied embeddings, nn.LayerNorm, AdamW with two parameter groups,
clip_grad_norm_. The two programs are the same text but for the module names; three training
steps in float64 must agree with PyTorch's."""

import numpy as np
import torch

import minitensor as mt


def build(lib, vocab=11, context=8, d=12, heads=3, layers=2):
    """The same model in torch (lib=torch) or minitensor (lib=mt): nanoGPT's model.py, shortened."""
    nn, F = lib.nn, lib.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(x).split(d, dim=2)
            q = q.view(B, T, heads, C // heads).transpose(1, 2)  # (B, nh, T, hs)
            k = k.view(B, T, heads, C // heads).transpose(1, 2)
            v = v.view(B, T, heads, C // heads).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(d), CausalSelfAttention()
            self.ln_2, self.fc, self.proj = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.proj(F.gelu(self.fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied

        def forward(self, idx, targets):
            B, T = idx.shape
            x = self.wte(idx) + self.wpe(lib.arange(0, T))
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))  # size(-1): shape[-1]

    return GPT()


def train(lib, model, idx, targets, steps=3):
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    optimizer = lib.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                lr=1e-2, betas=(0.9, 0.95))
    clip = torch.nn.utils.clip_grad_norm_ if lib is torch else mt.optim.clip_grad_norm_
    losses = []
    for _ in range(steps):
        loss = model(idx, targets)
        optimizer.zero_grad()
        loss.backward()
        clip(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_a_nanogpt_port_trains_as_pytorch_for_three_steps_in_float64():
    torch.manual_seed(0)
    theirs = build(torch).double()
    mt.set_default_dtype(np.float64)
    try:
        ours = build(mt)
    finally:
        mt.set_default_dtype(np.float32)
    ours.load_state_dict(theirs.state_dict())  # a PyTorch state dict, as it comes
    assert ours.lm_head.weight is ours.wte.weight
    rng = np.random.default_rng(0)
    idx, targets = rng.integers(0, 11, size=(2, 8)), rng.integers(0, 11, size=(2, 8))
    their_losses = train(torch, theirs, torch.from_numpy(idx), torch.from_numpy(targets))
    our_losses = train(mt, ours, mt.tensor(idx), mt.tensor(targets))
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-10)
    ours_after = dict(ours.named_parameters(remove_duplicate=False))
    for name, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours_after[name].data, value.numpy(), rtol=1e-8, atol=1e-10, err_msg=name)
