"""The course: the homework's tasks in order, each with the hint its stub shows, and the points."""

# The course, in order: (task, the hint a student sees in the NotImplementedError). A hint says
# what to derive and what is at hand, never the result.
TASKS = [
    ("topological_order", "list the nodes reachable from the output so that each comes before the nodes it "
                          "sends gradient to, without recursion (a 20,000-op chain must work); autograd.py"),
    ("elementwise_backward", "derive d(output)/d(input) of Mul, Div, Exp and Tanh by hand and apply it to grad, "
                             "using what forward saved (an array no wanted gradient reads is saved as None: mind "
                             "ctx.needs_input_grad); ops/elementwise.py"),
    ("unbroadcast", "compare the two shapes, aligned on the right: which axes did broadcasting add or stretch "
                    "from size 1?; autograd.summed_axes"),
    ("matmul_backward", "write C = A B with indices, differentiate with respect to one element of A and of B, "
                        "and check the shapes; mind 1-D operands and shared weights; ops/linalg.py"),
    ("reductions", "each input element's share of the reduced output: restore the reduced axes, then spread "
                   "grad over them (Sum, Mean, Var; Max and Min between ties); ops/reduce.py"),
    ("gradcheck_central_difference", "estimate one partial derivative from f on both sides of x (an error "
                                     "of order eps squared), and leave x as you found it; gradcheck.py"),
    ("demo_attention_cost", "count the multiply-adds of one layer: the projections and MLP against the scores "
                            "and the weighted sum, as functions of T and d (seed 000, 'Efficient attention'); "
                            "demos/attention_cost.py: weight_operations and attention_operations"),
    ("softmax_backward", "write the Jacobian of softmax along the axis, then its product with grad without "
                         "building the matrix; you have y (ctx.saved_tensors) and grad; set dx, and return the "
                         "gradient of log-softmax too; ops/softmax.py: Softmax.backward, LogSoftmax.backward"),
    ("demo_scaling", "measure, per width d_k, the statistics the seed tabulates for raw and scaled scores "
                     "(seed 000, 'Scaled dot-product attention'): the softmax Jacobian of a row and its norm, "
                     "then the six numbers of a row of the table; demos/scaling.py: jacobian_norm, score_statistics"),
    ("layer_norm_backward", "differentiate x_hat = (x - mean) * rstd remembering that the mean and the "
                            "variance depend on every x of the row; you have grad and what forward saved (x, weight, "
                            "mean, rstd); return dx, or (dx, dweight, dbias) with a weight; ops/normalization.py: "
                            "LayerNormFunction.backward"),
    ("attention_masks", "which (query, key) pairs may a causal model use? Build that boolean mask (True hides) "
                        "and the masked softmax attention of the seed; models/attention.py"),
    ("demo_stacking", "write out two attention layers without a nonlinearity and regroup the products "
                      "into one mixing matrix and one value map (seed 001); demos/stacking.py: collapse"),
    ("multihead_split_merge", "one (T, d_head) matrix per head from (B, T, H*d_head), and back: which axes "
                              "move, in which order?; models/attention.py"),
    ("pre_norm_block", "the seed's pre-norm block: each sublayer reads a normalised copy of the residual "
                       "stream and adds its output to it; models/transformer.py"),
    ("tiled_attention", "visit the keys a tile at a time, keeping per query only what finishes the softmax "
                        "exactly at the end; work out how to correct it when a larger score arrives; then backward, "
                        "a tile at a time from what forward saved; ops/attention.py: Attention.forward, .backward"),
    ("demo_multihead", "count every weight and bias of the four projections of nn.MultiheadAttention as a "
                       "function of d (seed 000, 'Multi-head attention'); demos/multihead.py: count_by_hand"),
    ("demo_causal_self_attention", "the scores, the causal mask as the seed's figure shows it, the weights and "
                                   "the outputs, each as the seed defines it (seed 000, 'Self-attention'); "
                                   "demos/causal_self_attention.py: causal_self_attention"),
    ("kv_cache", "what must a decoding step remember of the tokens before it, and along which axis does it "
                 "grow?; models/attention.py"),
    ("demo_kv_cache", "the numbers one token adds to the cache in each layer, for each way of sharing key and "
                      "value heads, in 16-bit numbers (seed 001, 'The KV cache'); demos/kv_cache.py: cache_sizes, "
                      "with models/attention.py: KVCache.bytes_per_token"),
]
# Test-writing tasks (testwriting/): the student writes tests/student/test_<op>.py, graded by the buggy
# implementations it catches among correct ones it must pass; the hint says what to vary, never the bugs.
_WRITE_TESTS = ("write tests that pass on any correct implementation and fail on buggy ones: check values and "
                "gradients (mt.gradcheck or your own reference) with random inputs and upstream gradients, several "
                "shapes, float32 and float64, more than one backward; tests/student/test_{op}.py, tried with "
                "`python -m homework practice --op {op}`")
TEST_WRITING = {f"tests_{op}": op for op in ("add", "matmul", "softmax", "layer_norm", "index", "causal_mask")}
TASKS += [(task, _WRITE_TESTS.format(op=op)) for task, op in TEST_WRITING.items()]
TASK_NAMES = [name for name, _ in TASKS]
HINTS = dict(TASKS)
POINTS_PER_TASK = 10.0


class HomeworkError(ValueError):
    """Bad input to strip, grade or bundle: the message names the file (and line) and the fix."""


def check_task_names(names, where):
    unknown = [name for name in names if name not in HINTS]
    if unknown:
        raise HomeworkError(f"{where}: unknown task(s) {', '.join(map(repr, unknown))}; known: {', '.join(TASK_NAMES)}")

