"""The training loop the demos, the tests and the benchmarks share: Adam on a fresh batch each
step, with the gradient norm clipped, as the seed's adding-problem and alignment experiments train."""

from tqdm import tqdm

import minitensor as mt


def train(model, loss_of, next_batch, steps, lr=3e-3, max_norm=1.0, evaluate=None, every=25, desc="training",
          stop=None):
    """Train `model` for `steps` steps; return (the last training loss, the evaluation curve).

    next_batch() -> a batch; loss_of(batch) -> the scalar loss Tensor of `model` on it.
    evaluate() -> a number, computed without recording a graph at step 0, every `every` steps
    and after the last step; the curve is a list of (step, value), empty without `evaluate`.
    stop(curve) -> True ends training early, asked after each evaluation.
    """
    opt = mt.optim.Adam(model.parameters(), lr=lr)
    curve, loss = [], None
    for step in tqdm(range(steps + 1), desc=desc, leave=False, mininterval=1.0):
        if evaluate is not None and (step % every == 0 or step == steps):
            with mt.no_grad():
                curve.append((step, float(evaluate())))
            if stop is not None and stop(curve):
                break
        if step == steps:
            break
        loss = train_step(model, opt, loss_of, next_batch(), max_norm)
    return (None if loss is None else loss.item()), curve


def train_step(model, opt, loss_of, batch, max_norm=1.0):
    """One step of the loop above: the loss on `batch` (loss_of(batch), a scalar Tensor), its
    gradients, the gradient norm clipped to max_norm, one step of `opt`. Returns the loss.
    benchmarks/train.py times this step against PyTorch's."""
    loss = loss_of(batch)
    opt.zero_grad()
    loss.backward()
    mt.optim.clip_grad_norm_(model.parameters(), max_norm)
    opt.step()
    return loss
