"""mt.debug.compare(model, torch_module, *inputs): your minitensor model against a PyTorch module
with the same module paths (ln1, attn.w_q, mlp.fc2, ...), judged module by module.

    result = mt.debug.compare(block, torch_block, x)   # torch_block's weights copied into block

The PyTorch side has no op graph to align with yours, so the unit here is the module call: the
torch module is run (on a copy, in your model's dtype) with a forward hook and a full backward hook
on each submodule, which keep, by module path and call order, the call's inputs, its output, the
gradient that reached its output and those it passed to its inputs, and every parameter's gradient.
Each of your modules is then judged on its own, as compare judges an op: it runs again alone on the
torch module's inputs, and backward from the torch module's upstream gradient, and its output, its
input gradients and its parameters' gradients are set against the torch module's. A module that
departs there while none of its submodules does is the culprit (the error is in its own code);
one that departs only because a submodule does, or only in the full run, inherited it. Inside the
culprit the ops are named by the module's boundary (the fallback, as the torch side has no ops):
the op that made its output when its own code made it, or the op that passed a departing gradient
on to that parameter or input, with the line of your code. Tolerances come from a float64 run of
the torch module, as in compare.

torch is imported only here, and only when the reference is a torch module: it is a test
dependency of minitensor, not a runtime one.
"""

import copy

import numpy as np

from ..nn.module import Module
from ..tensor import Tensor
from .compare_tolerance import NOISE_MARGIN, ROUNDING_UNITS, difference
from .compare_record import record
from .compare_report import Comparison, Row


def compare_with_torch(model, reference, inputs, seed=0, upstream=None, copy_weights=True):
    """See compare(): the model (a minitensor Module) against a torch.nn.Module of the same paths."""
    import torch  # only here: a torch module was passed, so torch is installed

    if not isinstance(model, Module):
        raise TypeError(f"compare: against a PyTorch module the model must be a minitensor Module, "
                        f"got {type(model).__name__}")
    _check_paths(model, reference)
    differing = _copy_or_check(model, reference, torch, copy_weights)
    floats = [np.asarray(_array(a)) for a in inputs]
    dtype = next((a.dtype for a in floats if a.dtype.kind == "f"), np.dtype(np.float32))
    paths = {path for path, _ in model.named_modules()}
    calls, out, upstream = _torch_calls(reference, inputs, upstream, seed, dtype, torch, paths)
    wide = None
    if dtype != np.float64:
        wide, _, _ = _torch_calls(reference, inputs, np.asarray(upstream, np.float64), seed, np.float64, torch, paths)
    training = {path: sub.training for path, sub in model.named_modules()}
    model.eval()  # as the torch copy: no dropout on either side, whose random masks could not agree
    try:
        mine = _full_run(model, inputs, upstream)
        rows = _judge(model, calls, wide, mine)
    finally:
        for path, sub in model.named_modules():
            object.__setattr__(sub, "training", training[path])
    comparison = Comparison(rows, dtype=dtype, copied_weights=0 if differing is not None else
                            len(list(model.named_parameters())))
    comparison.differing_weights = differing or []
    comparison.upstream = upstream
    return comparison


# ----------------------------------------------------------------------------
# Paths and weights
# ----------------------------------------------------------------------------


def _check_paths(model, reference):
    """The two must have the same parameters by path and shape: else say which differ, before
    anything is copied."""
    mine = {name: tuple(p.shape) for name, p in model.named_parameters()}
    theirs = {name: tuple(p.shape) for name, p in reference.named_parameters()}
    only_mine, only_theirs = sorted(set(mine) - set(theirs)), sorted(set(theirs) - set(mine))
    if only_mine or only_theirs:
        raise ValueError(f"compare: the model and the PyTorch module ({type(reference).__name__}) must have the "
                         f"same parameter paths; only in the model: {', '.join(only_mine) or '-'}; "
                         f"only in the PyTorch module: {', '.join(only_theirs) or '-'}")
    shapes = [f"{name} {mine[name]} vs {theirs[name]}" for name in sorted(mine) if mine[name] != theirs[name]]
    if shapes:
        raise ValueError(f"compare: parameters of other shapes in the model and the PyTorch module: "
                         f"{'; '.join(shapes)}")


def _copy_or_check(model, reference, torch, copy_weights):
    """With copy_weights, the torch module's parameters into the model, by name (None); else the
    names of the parameters whose values differ (the comparison would blame them otherwise)."""
    theirs = dict(reference.named_parameters())
    differing = []
    for name, parameter in model.named_parameters():
        value = theirs[name].detach().cpu().numpy()
        if copy_weights:
            parameter.data = value.astype(parameter.data.dtype, copy=True)
        elif not np.allclose(parameter.data, value, rtol=0, atol=0):
            differing.append(name)
    return None if copy_weights else differing


# ----------------------------------------------------------------------------
# The torch side: each module call's boundary values, by path and call order
# ----------------------------------------------------------------------------


def _numpy(value):
    return value.detach().cpu().numpy().copy() if value is not None else None


def _torch_calls(reference, inputs, upstream, seed, dtype, torch, paths):
    """Run a copy of the torch module in dtype, in eval mode: ({(path, call number): call}, output,
    upstream), for the modules whose path your model has too (a Dropout or an activation module of
    the torch side that yours does without is passed through). A call is {"inputs", "output",
    "grad_output", "grad_inputs", "module", "parameter_grads", "once"}; of a module that returns a
    tuple (nn.MultiheadAttention), its first element."""
    module = copy.deepcopy(reference).to(getattr(torch, np.dtype(dtype).name)).eval()
    calls, order, handles = {}, [], []

    def hooks(path, sub):
        def before(_, args):
            key = (path, sum(1 for p, _ in order if p == path))
            order.append(key)
            calls[key] = {"module": sub, "order": len(order) - 1}

        def after(_, args, output):
            key = [k for k in order if k[0] == path][-1]
            calls[key]["inputs"] = [_numpy(a) if torch.is_tensor(a) else a for a in args]
            calls[key]["output"] = _numpy(output[0] if isinstance(output, tuple) else output)

        def backward(_, grad_inputs, grad_outputs):
            pending = [k for k in order if k[0] == path and "grad_output" not in calls[k]]
            key = pending[-1]  # backward meets a module's calls in reverse order
            calls[key]["grad_output"] = _numpy(grad_outputs[0])
            calls[key]["grad_inputs"] = [_numpy(g) for g in grad_inputs]

        return before, after, backward

    for path, sub in module.named_modules():
        if path not in paths:
            continue
        before, after, backward = hooks(path, sub)
        handles += [sub.register_forward_pre_hook(before), sub.register_forward_hook(after),
                    sub.register_full_backward_hook(backward)]
    try:
        args = [_to_torch(a, dtype, torch) for a in inputs]
        output = module(*args)
        output = output[0] if isinstance(output, tuple) else output
        if upstream is None:
            upstream = np.random.default_rng(seed).standard_normal(tuple(output.shape)).astype(dtype)
        output.backward(torch.from_numpy(np.asarray(upstream, dtype=dtype).copy()))
    finally:
        for handle in handles:
            handle.remove()
    for call in calls.values():
        call["parameter_grads"] = {name: _numpy(p.grad) for name, p in call["module"].named_parameters()}
    counts = {}
    for path, _ in calls:
        counts[path] = counts.get(path, 0) + 1
    for (path, _), call in calls.items():
        call["once"] = counts[path] == 1
    return calls, _numpy(output), np.asarray(upstream)


def _array(value):
    """A Tensor's array; anything else as it is (an ndarray's own .data is a memoryview)."""
    return value.data if isinstance(value, Tensor) else value


def _to_torch(value, dtype, torch):
    data = _array(value)
    if isinstance(data, np.ndarray):
        tensor = torch.from_numpy(data.astype(dtype) if data.dtype.kind == "f" else data.copy())
        return tensor.requires_grad_(data.dtype.kind == "f")
    return value


# ----------------------------------------------------------------------------
# Your side: the full run's module outputs and the gradients that reached them
# ----------------------------------------------------------------------------


def _full_run(model, inputs, upstream):
    """{(path, call number): {"output", "grad_output"}} of your model run forward and backward in full."""
    seen = {}
    wrapped = []
    for path, sub in model.named_modules():
        def forward(*args, _path=path, _forward=sub.forward, **kwargs):
            output = _forward(*args, **kwargs)
            key = (_path, sum(1 for p, _ in seen if p == _path))
            seen[key] = {"output": np.array(getattr(output, "data", output), copy=True), "grad_output": None}
            if isinstance(output, Tensor) and output.requires_grad:
                def keep(grad, _key=key):
                    seen[_key]["grad_output"] = np.array(grad, copy=True)
                output.register_hook(keep)
            return output
        object.__setattr__(sub, "forward", forward)
        wrapped.append(sub)
    try:
        tensors = [Tensor(np.array(_array(a)), requires_grad=True)
                   if np.asarray(_array(a)).dtype.kind == "f" else a for a in inputs]
        output = model(*tensors)
        output.backward(np.asarray(upstream, dtype=output.dtype))
    finally:
        for sub in wrapped:
            object.__delattr__(sub, "forward")
    return seen


# ----------------------------------------------------------------------------
# Judging each module on its own
# ----------------------------------------------------------------------------


def _noise(array, wide, floor=0.0):
    """The torch module's own error on one array (its distance from the float64 run's), at least
    `floor`: a few roundings of the call's largest value, as torch and minitensor round apart even
    in float64 (a gradient that is zero in exact arithmetic, as a key bias's, is rounding only)."""
    if wide is None or array is None or np.shape(array) != np.shape(wide):
        return floor
    return max(floor, float(np.max(np.abs(np.asarray(array, np.float64) - wide), initial=0.0)))


def _floor(call):
    arrays = [call["output"], call["grad_output"], *(call.get("grad_inputs") or []),
              *call["parameter_grads"].values()]
    floats = [np.asarray(a) for a in arrays if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size]
    if not floats:
        return 0.0
    return ROUNDING_UNITS / NOISE_MARGIN * np.finfo(floats[0].dtype).eps * max(float(np.abs(a).max()) for a in floats)


def _submodule(model, path):
    return dict(model.named_modules())[path]


def _judge(model, calls, wide, mine):
    """One Row per module call, in the order the calls began."""
    rows = []
    for index, key in enumerate(sorted(calls, key=lambda k: calls[k]["order"])):
        call, call64 = calls[key], (wide or {}).get(key)
        path = key[0]
        sub = _submodule(model, path)
        row = Row(index=index, op=type(sub).__name__, module=path, made_at=_forward_site(sub),
                  input_shapes=[tuple(np.shape(a)) for a in call["inputs"]],
                  output_shape=tuple(np.shape(call["output"])))
        row.reference_index = index
        row.own = _rerun(sub, call, call64)
        full = mine.get(key)
        if full is None:
            row.verdict, row.where = "no counterpart", None
        else:
            out_noise = _noise(call["output"], call64 and call64["output"], _floor(call))
            row.output_difference = difference(full["output"], call["output"], out_noise)
            if full["grad_output"] is not None and call["grad_output"] is not None:
                grad_noise = _noise(call["grad_output"], call64 and call64["grad_output"], _floor(call))
                row.grad_difference = difference(full["grad_output"], call["grad_output"], grad_noise)
        rows.append(row)
    for row in rows:
        if row.own is None:
            if row.output_difference is not None:
                row.verdict, row.where, row.worst = "inherited", "forward", row.output_difference
            elif row.grad_difference is not None:
                row.verdict, row.where, row.worst = "inherited", "backward", row.grad_difference
                row.input_position = "the gradient reaching its output"
            continue
        where, position, worst, records = row.own
        inside = [r for r in rows if r is not row and r.own is not None
                  and (row.module == "" or r.module.startswith(row.module + "."))]
        row.worst, row.input_position = worst, position
        if inside:  # a submodule departs on its own: this module only carries its error
            row.verdict, row.where = "inherited", where
            continue
        row.verdict, row.where = "culprit", where
        op = _boundary_op(records, where, position, row, calls)
        if op is not None:
            row.op, row.made_at = op["op"], op["site"] or row.made_at
    return rows


def _rerun(sub, call, call64):
    """Your module alone on the torch call's inputs and upstream gradient: None when it agrees, else
    (forward or backward, what departs, worst element, your records of the rerun)."""
    inputs = [np.asarray(a) if isinstance(a, np.ndarray) else a for a in call["inputs"]]
    try:
        records, output, _, grads = record(sub, inputs, call["grad_output"])
    except Exception as error:  # it cannot run on the torch module's inputs: it departs there
        return "forward", None, ((), f"{type(error).__name__}: {error}", "", np.inf, 0.0), []
    floor = _floor(call)
    found = difference(output, call["output"], _noise(call["output"], call64 and call64["output"], floor))
    if found is not None:
        return "forward", None, found, records
    if call["grad_output"] is None:
        return None
    for i, grad in enumerate(call.get("grad_inputs") or []):
        mine = grads.get(f"input {i}")
        if grad is not None and mine is not None:
            wide = call64["grad_inputs"][i] if call64 else None
            found = difference(mine, grad, _noise(grad, wide, floor))
            if found is not None:
                return "backward", f"input {i}", found, records
    if not call["once"]:
        return None  # a parameter's gradient sums every call of the module: not one call's to judge
    for name, grad in call["parameter_grads"].items():
        mine = grads.get(name)
        if grad is not None and mine is not None:
            wide = call64["parameter_grads"].get(name) if call64 else None
            found = difference(mine, grad, _noise(grad, wide, floor))
            if found is not None:
                return "backward", name, found, records
    return None


def _boundary_op(records, where, position, row, calls):
    """The op of your module's own code (not a submodule's) that stands at the departing boundary.
    In backward, the one that passed the departing gradient on to that parameter or input. In
    forward, the first that hands a submodule a value departing from every input the torch module
    handed that submodule (so the line where a wrong value leaves your code), else the one that made
    the module's output."""
    if where != "forward":
        return next((r for r in records if r["module"] == "" and position in (r["input_from"] or [])), None)
    prefix = row.module + "." if row.module else ""
    noise = _floor(calls[(row.module, 0)]) if (row.module, 0) in calls else 0.0
    for i, r in enumerate(records):
        if r["module"] != "":
            continue
        children = {prefix + c["module"].split(".")[0] for c in records[i + 1:]
                    if c["module"] != "" and i in (c["input_from"] or [])}
        given = [a for (path, _), call in calls.items() if path in children for a in call["inputs"]
                 if isinstance(a, np.ndarray) and a.shape == r["output"].shape]
        if given and all(difference(r["output"], a, noise) is not None for a in given):
            return r
    return records[-1] if records and records[-1]["module"] == "" else None


def _forward_site(sub):
    code = type(sub).forward.__code__
    return f"{code.co_filename}:{code.co_firstlineno}: def forward"
