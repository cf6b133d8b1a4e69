"""Recurrent baselines for the adding problem: RNN and GRU, shaped as torch.nn.RNN and
torch.nn.GRU (one layer, batch first, two bias vectors), and a regressor with a linear head."""

import math

import numpy as np

import minitensor as mt
from minitensor.nn import Linear, Module, Parameter, init


class _Recurrent(Module):
    """Shared by RNN and GRU: the weights as torch names them, initialised U(-1/sqrt(h), 1/sqrt(h))."""

    gates = 1

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        dtype = mt.get_default_dtype()
        rows = self.gates * hidden_size
        self.weight_ih_l0 = Parameter(np.empty((rows, input_size), dtype=dtype))
        self.weight_hh_l0 = Parameter(np.empty((rows, hidden_size), dtype=dtype))
        self.bias_ih_l0 = Parameter(np.empty(rows, dtype=dtype))
        self.bias_hh_l0 = Parameter(np.empty(rows, dtype=dtype))
        bound = 1 / math.sqrt(hidden_size)
        for p in (self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0):
            init.uniform_(p, -bound, bound)

    def forward(self, x, h0=None):
        """x (B, T, input_size) -> outputs (B, T, hidden), final state (1, B, hidden)."""
        B, T, _ = x.shape
        h = mt.zeros(B, self.hidden_size, dtype=x.dtype) if h0 is None else h0.reshape(B, self.hidden_size)  # (B, H)
        outputs = []
        # Transposed once, not at every step: each transpose is a node of the graph, and a GRU
        # step's cost is its number of nodes (the arrays are small).
        weight_ih, weight_hh = self.weight_ih_l0.T, self.weight_hh_l0.T  # (g*hidden, in) -> (in, g*hidden)
        for t in range(T):
            # One step's input projection at a time: projecting all T steps at once and slicing
            # would send a full (B, T, gates*hidden) gradient back through every one of T slices.
            input_part = x[:, t] @ weight_ih + self.bias_ih_l0  # x[:, t]: (B, in); (B, g*hidden)
            h = self.cell(input_part, h, weight_hh)
            outputs.append(h)
        return mt.stack(outputs, axis=1), h.unsqueeze(0)  # (B, T, hidden), (1, B, hidden)

    @classmethod
    def from_torch(cls, module):
        ours = cls(module.input_size, module.hidden_size)
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            setattr(ours, name, Parameter(getattr(module, name).detach().numpy().copy()))
        return ours

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}"


class RNN(_Recurrent):
    """h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)."""

    def cell(self, input_part, h, weight_hh=None):
        """One step: input_part = W_ih x_t + b_ih; weight_hh = W_hh.T when the caller made it once."""
        weight_hh = self.weight_hh_l0.T if weight_hh is None else weight_hh  # (hidden, hidden) transposed
        return (input_part + h @ weight_hh + self.bias_hh_l0).tanh()


class GRU(_Recurrent):
    """torch.nn.GRU's equations (gates stacked r, z, n):
        r = sigmoid(W_ir x + b_ir + W_hr h + b_hr),   z = sigmoid(W_iz x + b_iz + W_hz h + b_hz),
        n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),   h' = (1 - z) * n + z * h.
    """

    gates = 3

    def cell(self, input_part, h, weight_hh=None):
        """One step: input_part = W_ih x_t + b_ih; weight_hh = W_hh.T when the caller made it once."""
        weight_hh = self.weight_hh_l0.T if weight_hh is None else weight_hh  # (3H, H) -> (H, 3H)
        H = self.hidden_size
        hidden_part = h @ weight_hh + self.bias_hh_l0  # (B, 3H)
        gates = (input_part[:, : 2 * H] + hidden_part[:, : 2 * H]).sigmoid()  # r and z in one op: (B, 3H) -> (B, 2H)
        r, z = gates[:, :H], gates[:, H:]  # (B, 2H) -> (B, H) each
        n = (input_part[:, 2 * H :] + r * hidden_part[:, 2 * H :]).tanh()  # the n parts: (B, 3H) -> (B, H)
        return n + z * (h - n)  # = (1 - z) * n + z * h, in three ops instead of four


class RecurrentRegressor(Module):
    """A recurrent network whose final state goes through a linear head. With a GRU of 64
    units on 2 inputs this is the seed's adding-problem baseline: 13,121 parameters."""

    def __init__(self, input_size, hidden_size, cell="gru", outputs=1):
        super().__init__()
        self.rnn = {"gru": GRU, "rnn": RNN}[cell](input_size, hidden_size)
        self.head = Linear(hidden_size, outputs)

    def forward(self, x):
        _, h = self.rnn(x)
        return self.head(h[0])
