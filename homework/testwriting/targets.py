"""The ops students write tests for: where each lives in the copy (the name the worker substitutes)
and which task grades the tests. The substitution is made on the op's Function class (its
forward and backward) or on the public function itself, never on a backend, so every public route
to the op (`a + b`, `mt.softmax`, `F.layer_norm`, `t[index]`) reaches the implementation under test."""

from typing import NamedTuple


class Target(NamedTuple):
    op: str  # the op's short name: tests/student/test_<op>.py, task tests_<op>
    module: str  # where the name lives in the copy
    name: str  # a Function subclass (kind "function_class") or a plain function (kind "function")
    kind: str
    says: str  # what the student tests, as the task's hint and the starter file say it


TARGETS = {
    target.op: target for target in [
        Target("add", "minitensor.ops", "Add", "function_class",
               "a + b with broadcasting (minitensor.ops.Add): the output and both gradients"),
        Target("matmul", "minitensor.ops", "MatMul", "function_class",
               "a @ b, 2-D, batched and with 1-D operands (minitensor.ops.MatMul): the output and both gradients"),
        Target("softmax", "minitensor.ops", "Softmax", "function_class",
               "mt.softmax / x.softmax(axis) (minitensor.ops.Softmax): the output and the gradient"),
        Target("layer_norm", "minitensor.ops", "LayerNormFunction", "function_class",
               "mt.nn.functional.layer_norm / mt.nn.LayerNorm over the last axis (minitensor.ops.LayerNormFunction): "
               "the output and the gradients of the input, the weight and the bias"),
        Target("index", "minitensor.ops", "Index", "function_class",
               "t[index] with basic and advanced indices, repeated ones among them (minitensor.ops.Index): the "
               "output and the gradient"),
        Target("causal_mask", "models.attention", "causal_mask", "function",
               "models.attention.causal_mask(T, S=None), the boolean causal mask (True hides), as attention uses it"),
    ]
}


def task_of(op):
    return f"tests_{op}"


def test_file(op):
    """Where the student's tests for `op` are, relative to the copy."""
    return f"tests/student/test_{op}.py"
