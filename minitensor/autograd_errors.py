"""The errors the engine (autograd.py) raises, each naming the op and the shapes involved and
saying what to do. Each function builds the exception; the engine raises it where the check is."""

import numpy as np


def not_a_tensor(function, inputs, argument):
    position = next(i for i, x in enumerate(inputs) if x is argument)
    return TypeError(
        f"{function.__name__}.apply: argument {position} is a {type(argument).__name__}, not a "
        f"Tensor. Wrap arrays with mt.tensor(...); pass options such as axis= as keywords."
    )


def check_broadcast(op, shapes):
    """Raise the error that names op and the shapes, if the shapes do not broadcast together."""
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        listed = " and ".join(str(tuple(shape)) for shape in shapes)
        raise ValueError(
            f"{op}: shapes {listed} do not broadcast together (axes are compared "
            f"from the right; each pair must be equal, or one of them 1)"
        ) from None


def complex_result(function, output):
    return TypeError(
        f"{function.__name__}: the result is complex ({output.dtype}, shape {output.shape}) and an "
        f"input requires grad; minitensor differentiates real functions only, so complex "
        f"gradients would be wrong. Keep real and imaginary parts as two float tensors."
    )


def saved_arrays_freed(ctx):
    return RuntimeError(
        f"Trying to backward through the graph a second time: {ctx.name}'s saved "
        f"arrays were freed by the first backward() to save memory. If you need to "
        f"call backward twice, pass retain_graph=True to the first call."
    )


def nothing_saved(ctx):
    return RuntimeError(
        f"{ctx.name}.backward reads ctx.saved_tensors, but {ctx.name}.forward never "
        f"called ctx.save_for_backward(...): save there the arrays backward needs."
    )


def nothing_to_differentiate(root):
    return RuntimeError(
        f"backward(): this tensor (shape {root.shape}) does not require grad and has no "
        f"grad_fn, so there is nothing to differentiate. Create the inputs with "
        f"requires_grad=True, outside mt.no_grad()."
    )


def not_a_scalar(root):
    return RuntimeError(
        f"backward() without a gradient needs a scalar (one-element) tensor, but this "
        f"one has shape {root.shape}. Reduce it first (loss = y.sum()), or pass dL/dy "
        f"of shape {root.shape}: y.backward(grad)."
    )


def wrong_first_gradient(grad, root):
    return ValueError(f"backward(grad): grad has shape {grad.shape} but the tensor has shape {root.shape}")


def complex_first_gradient(grad, root):
    return TypeError(
        f"backward(): the gradient given is complex ({grad.dtype}, shape {grad.shape}) for a real tensor of "
        f"dtype {root.dtype}; its imaginary part would be dropped silently. minitensor differentiates real "
        f"functions only: pass the real part (grad.real), or backward the real and imaginary parts separately."
    )


def wrong_gradient_count(node, grad_inputs):
    return RuntimeError(
        f"{node.name}.backward returned {len(grad_inputs)} gradient(s) for "
        f"{len(node.edges)} input(s); return one per input (None where not needed)"
    )


def not_an_array(node, grad_inputs, grad_input):
    position = next(i for i, g in enumerate(grad_inputs) if g is grad_input)
    return TypeError(
        f"{node.name}.backward returned a {type(grad_input).__name__} as the gradient of input "
        f"{position}; return an array of the input's shape {node.input_shapes[position]} (or None)"
    )


class GradientShapeError(RuntimeError):
    """An op's backward returned a gradient whose shape its input's shape does not broadcast to, so
    no summing can make it fit: the op's backward is wrong (op, input, shapes and node are kept)."""

    def __init__(self, message, node, position, returned, expected):
        super().__init__(message)
        self.node, self.position, self.returned, self.expected = node, position, returned, expected
        self.plain = message  # the message without where the node was made


class UnbroadcastError(RuntimeError):
    """unbroadcast itself failed to sum a gradient down to a shape it broadcasts to (summed_axes,
    the homework task unbroadcast, gave the wrong axes): not the op's fault."""


def wrong_gradient_shape(node, position, returned, expected, where):
    """The error for node's backward returning a gradient of shape `returned` for its input
    `position`, of shape `expected`. where: (made at, module path, the input's source) of node, or Nones."""
    returned, expected = tuple(returned), tuple(expected)
    names = node.input_names
    name = names[position] if position < len(names) else f"input {position}"
    made_at, module, source = where
    try:
        broadcasts = np.broadcast_shapes(expected, returned) == returned
    except ValueError:
        broadcasts = False
    why = (f"its leading axes {returned[:len(returned) - len(expected)]} are not the output's "
           f"{tuple(node.output_shape)}, so no broadcasting in forward made them" if broadcasts else
           f"{expected} does not broadcast to {returned}, so no summing can make it fit")
    lines = [f"{node.name}.backward returned a gradient of shape {returned} for its input {name} "
             f"(input {position}{', ' + source if source else ''}), which has shape {expected}: {why}"]
    if module:
        lines.append(f"  in module {module}")
    if made_at:
        lines.append(f"  made at {made_at}")
    if len(returned) >= 2 and returned[:-2] + returned[-2:][::-1] == expected:
        lines.append(f"  {returned} is {expected} transposed: does the backward compute the transpose of "
                     f"d{name} (a .T or swapaxes missing, or the factors of a product swapped)?")
    lines.append("  the backward of an op must return, for each input, a gradient of that input's shape "
                 "(or of the output's broadcast shape, which the engine sums down)")
    error = GradientShapeError("\n".join(lines), node, position, returned, expected)
    error.plain = "\n".join(line for line in lines if not line.startswith(("  in module", "  made at")))
    return error


def unbroadcast_failed(grad_shape, shape, axes, summed_shape):
    result = ("are not axes of it" if summed_shape is None else
              f"gives shape {tuple(summed_shape)}, which does not become {tuple(shape)} by dropping leading axes "
              f"of size 1")
    return UnbroadcastError(
        f"unbroadcast: summing a gradient of shape {tuple(grad_shape)} down to shape {tuple(shape)} over "
        f"the axes {tuple(axes)} that summed_axes returned {result}: summed_axes (the homework task "
        f"unbroadcast) returned the wrong axes; the op whose gradient it was is not at fault")
