"""Graded tests that stay out of the student copy (NOT_IN_STUDENT_COPY): their references
would state a task's answer (a mask's offset, a cache's size formula), so a student's own
`grade` runs without them, and the teacher's `grade` and the autograder run them too. They call
the student's code the same way as tests/test_homework_tasks.py, through its probes."""

import numpy as np
import pytest
import torch

from _grading import array_of, assert_close, attention
from test_homework_tasks import probe_causal_mask, probe_demo, probe_tiled_attention

task = pytest.mark.task


def _hidden(queries, keys):
    """The causal rule when the queries are the last `queries` of `keys` positions: query i is
    at position keys - queries + i and may not see a key after it."""
    return np.arange(keys)[None, :] > (keys - queries) + np.arange(queries)[:, None]


@task("attention_masks")
@pytest.mark.parametrize("T, S", [(4, 6), (1, 5), (3, 8)])
def test_the_causal_mask_of_fewer_queries_than_keys(student, T, S):
    mask = array_of(student.call(probe_causal_mask, T, S), "mask", shape=(T, S), dtype=bool)
    expected = _hidden(T, S)
    assert np.array_equal(mask, expected), f"causal_mask({T}, {S}): yours\n{mask.astype(int)}\nexpected\n{expected.astype(int)}"


@task("tiled_attention")
def test_tiled_causal_attention_of_fewer_queries_than_keys(student):
    generator = np.random.default_rng()
    q, k, v = generator.standard_normal((2, 200, 4)), generator.standard_normal((2, 300, 4)), generator.standard_normal((2, 300, 3))
    mask = generator.random((200, 300)) < 0.2
    hidden = mask | _hidden(200, 300)
    answer = student.call(probe_tiled_attention, q, k, v, mask, True)
    assert_close("out", answer.get("out"), attention(q, k, v, hidden)[0], 1e-9, 1e-10)
    scores = (torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) / 2.0).masked_fill(torch.from_numpy(hidden), float("-inf"))
    row_max, row_sum = array_of(answer, "row_max", (2, 200)), array_of(answer, "row_sum", (2, 200))
    assert_close("row_max + log(row_sum)", row_max + np.log(row_sum), torch.logsumexp(scores, dim=-1).numpy(), 1e-9, 1e-10)


@task("demo_kv_cache")
def test_cache_sizes_of_any_model(student):
    generator = np.random.default_rng()
    for _ in range(3):
        layers, groups, d_head = int(generator.integers(1, 100)), int(generator.integers(1, 9)), int(generator.integers(8, 257))
        heads = 8 * groups
        sizes = student.call(probe_demo, "kv_cache", "cache_sizes", layers, heads, d_head)
        per_layer = {f"multi-head ({heads} KV heads)": heads * d_head, "grouped-query (8 KV heads)": 8 * d_head,
                     "multi-query (1 KV head)": d_head}
        expected = {name: 2 * 2 * layers * width for name, width in per_layer.items()}  # a key and a value, 2 bytes
        expected["latent (512 + 64 numbers, MLA)"] = 2 * layers * (512 + 64)
        assert sizes == expected, f"cache_sizes({layers}, {heads}, {d_head}): yours {sizes}, expected {expected}"
