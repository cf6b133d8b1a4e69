# %% [markdown]
# # Attention as soft alignment (seed 000, "Attention in encoder-decoder models": Bahdanau, Cho and Bengio, 2015; Luong's bilinear score as a switch).
#
# A bidirectional GRU encoder reads a sequence of 8 digits (so that state h_i is about digit i,
# as in Bahdanau et al.); a GRU decoder writes it reversed. At every output
# step the decoder state s_{t-1} queries all encoder states h_i,
#     e_ti = w^T tanh(W s_{t-1} + U h_i)     (additive, Bahdanau)   or   s_{t-1}^T W h_i  (bilinear, Luong),
# alpha_t = softmax(e_t), and the context c_t = sum_i alpha_ti h_i is fed to the decoder with the
# previous output digit. Nothing tells the model which input goes with which output; the matrix
# of weights alpha_ti it learns is the alignment: for reversal, the anti-diagonal.

# %%
import numpy as np

import minitensor as mt
from minitensor.nn import Embedding, Linear, Module
from models.recurrent import GRU
from models.training import train

from demos._common import QUICK, Checks, plt, save
from demos.tasks import digit_sequences

VOCAB, LENGTH, EMBED, HIDDEN = 10, 8, 32, 64
START = 0  # the decoder's first input token


class Seq2SeqAttention(Module):
    def __init__(self, score="additive"):
        super().__init__()
        if score not in ("additive", "bilinear"):
            raise ValueError(f"score must be 'additive' or 'bilinear', got {score!r}")
        self.score = score
        self.embed = Embedding(VOCAB, EMBED)
        self.forward_encoder, self.backward_encoder = GRU(EMBED, HIDDEN), GRU(EMBED, HIDDEN)
        self.decoder = GRU(EMBED + 2 * HIDDEN, HIDDEN)
        if score == "additive":
            self.W, self.U = Linear(HIDDEN, HIDDEN, bias=False), Linear(2 * HIDDEN, HIDDEN)
            self.w = Linear(HIDDEN, 1, bias=False)
        else:
            self.W = Linear(HIDDEN, 2 * HIDDEN, bias=False)
        self.out = Linear(3 * HIDDEN, VOCAB)

    def encode(self, source):
        """States (B, T, 2 hidden): the forward GRU's and the backward GRU's at each position."""
        embedded = self.embed(source)  # (B, T, embed)
        forward_states, h = self.forward_encoder(embedded)
        backward_states, _ = self.backward_encoder(embedded[:, ::-1])
        return mt.cat([forward_states, backward_states[:, ::-1]], axis=-1), h[0]

    def attend(self, s, H):
        """s (B, hidden) queries H (B, T, 2 hidden): weights (B, T) and context (B, 2 hidden)."""
        if self.score == "additive":
            e = self.w((self.W(s).unsqueeze(1) + self.U(H)).tanh()).squeeze(-1)  # (B, T)
        else:
            e = (H @ self.W(s).unsqueeze(-1)).squeeze(-1)  # (B, T): s^T W h_i
        alpha = e.softmax(axis=-1)
        context = (alpha.unsqueeze(1) @ H).squeeze(1)  # (B, 2 hidden)
        return alpha, context

    def forward(self, source, target_in):
        """Teacher forcing: logits (B, T_out, vocab) and the weights (B, T_out, T_in)."""
        H, s = self.encode(source)  # (B, T, 2 hidden), (B, hidden)
        logits, weights = [], []
        embedded = self.embed(target_in)  # (B, T_out, embed)
        for t in range(target_in.shape[1]):
            alpha, context = self.attend(s, H)
            x = mt.cat([embedded[:, t], context], axis=-1)
            s = self.decoder.cell(x @ self.decoder.weight_ih_l0.T + self.decoder.bias_ih_l0, s)
            logits.append(self.out(mt.cat([s, context], axis=-1)))
            weights.append(alpha)
        return mt.stack(logits, axis=1), mt.stack(weights, axis=1)

    def greedy(self, source):
        """Decode without teacher forcing: each step feeds the previous prediction."""
        with mt.no_grad():
            H, s = self.encode(source)
            token = np.full(source.shape[0], START)
            outputs, weights = [], []
            for _ in range(source.shape[1]):
                alpha, context = self.attend(s, H)
                x = mt.cat([self.embed(token), context], axis=-1)
                s = self.decoder.cell(x @ self.decoder.weight_ih_l0.T + self.decoder.bias_ih_l0, s)
                token = self.out(mt.cat([s, context], axis=-1)).data.argmax(axis=-1)
                outputs.append(token)
                weights.append(alpha.data)
        return np.stack(outputs, axis=1), np.stack(weights, axis=1)


# %%
checks = Checks()
score = "additive"  # or "bilinear": Luong's score s^T W h, the switch this demo offers
mt.manual_seed(0)
rng = np.random.default_rng(0)
model = Seq2SeqAttention(score)
steps = 20 if QUICK else 800


def teacher_forced_batch():
    source, target = digit_sequences(64, LENGTH, rng, VOCAB)
    return source, np.concatenate([np.full((64, 1), START), target[:, :-1]], axis=1), target


def reversal_loss(batch):
    source, target_in, target = batch
    logits, _ = model(source, target_in)
    return mt.F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))


loss, _ = train(model, reversal_loss, teacher_forced_batch, steps, desc=f"alignment ({score})")
source, target = digit_sequences(500, LENGTH, np.random.default_rng(1), VOCAB)
predicted, weights = model.greedy(source)  # weights (500, T_out, T_in)
accuracy = (predicted == target).mean()
aligned = (weights.argmax(axis=-1) == np.arange(LENGTH)[::-1][None, :]).mean()
print(f"{score} attention after {steps} steps: digit accuracy {accuracy:.1%}, training loss {loss:.3f}")
print(f"output t attends most to input {LENGTH} - 1 - t (the reversed position) in {aligned:.1%} of the steps")
if not QUICK:
    checks("the decoder reverses the sequences (digit accuracy above 90%)", accuracy > 0.9)
    checks("the learned weights are the alignment: output t looks at input T - 1 - t (over 80%)", aligned > 0.8)
else:
    checks("training runs and the weights are distributions", np.allclose(weights.sum(axis=-1), 1))

fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
for ax, index in zip(axes, (0, 1)):
    image = ax.imshow(weights[index], cmap="Greys", vmin=0, vmax=1)
    ax.set_xticks(range(LENGTH), [str(d) for d in source[index]])
    ax.set_yticks(range(LENGTH), [str(d) for d in predicted[index]])
    ax.set(xlabel="input digits", ylabel="output digits", title=f"{score} attention weights, example {index + 1}")
fig.colorbar(image, ax=axes, fraction=0.03, label="alpha_ti")
fig.suptitle("reversing digits: the learned alignment (no alignment supervision)")
save(fig, "alignment")
