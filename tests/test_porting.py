"""Issue 32: a PyTorch user's code gives PyTorch's answer or a clear error. Each silent difference
the issue lists, held against torch on the same inputs, and each PyTorch habit minitensor accepts
(dim=, split, chunk, contiguous, argmax, nn.LayerNorm, padding_idx, amsgrad, norm_type, a PyTorch
state dict) or refuses with an error that says what to write."""

import math

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor import F

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def mt64(values, requires_grad=True):
    return mt.tensor(np.array(values, dtype=np.float64), requires_grad=requires_grad)


def torch64(values, requires_grad=True):
    return torch.tensor(np.array(values, dtype=np.float64), requires_grad=requires_grad)


def assert_same(ours, theirs):
    """Equal to PyTorch's values, NaN, inf and the sign of zero included."""
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    np.testing.assert_array_equal(np.asarray(ours), theirs)
    numbers = ~np.isnan(theirs)  # a NaN's sign bit means nothing
    np.testing.assert_array_equal(np.signbit(np.asarray(ours))[numbers], np.signbit(theirs)[numbers])


# -- silent differences, now PyTorch's answer -----------------------------------------------------


def test_a_0d_parameter_keeps_an_array_grad_and_is_clipped():
    ours, theirs = mt.nn.Parameter(np.array(2.0)), torch.nn.Parameter(torch.tensor(2.0, dtype=torch.float64))
    for p in (ours, theirs):
        (p * 3).backward()
        (p * 3).backward()
    assert type(ours.grad) is np.ndarray and ours.grad.shape == ()
    mt.optim.clip_grad_norm_([ours], 1.0)
    torch.nn.utils.clip_grad_norm_([theirs], 1.0)
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("base, exponent", [(0.0, 0.0), (0.0, -1.0), (0.0, 2.0), (2.0, 0.0), (0.0, 0.5)])
def test_power_gradients_at_zero(base, exponent):
    a, b = mt64([base]), mt64([exponent])
    ta, tb = torch64([base]), torch64([exponent])
    (a**b).sum().backward()
    (ta**tb).sum().backward()
    assert_same(a.grad, ta.grad)
    assert_same(b.grad, tb.grad)


def test_x_to_the_zero_by_a_python_number_has_zero_gradient_at_zero():
    x, tx = mt64([0.0, 1.0]), torch64([0.0, 1.0])
    (x**0).sum().backward()
    (tx**0).sum().backward()
    assert_same(x.grad, tx.grad)


def test_a_subnormal_over_zero_has_pytorchs_gradient():
    a, b, ta, tb = mt64([5e-324]), mt64([0.0]), torch64([5e-324]), torch64([0.0])
    (a / b * 0.5).sum().backward()
    (ta / tb * 0.5).sum().backward()
    assert_same(a.grad, ta.grad)
    assert_same(b.grad, tb.grad)


def test_relu_at_negative_zero_nan_and_its_gradient():
    values = [-1.0, -0.0, 0.0, np.nan, 2.0]
    x, tx = mt64(values), torch64(values)
    y, ty = x.relu(), torch.relu(tx)
    assert_same(y.data, ty)
    y.sum().backward()
    ty.sum().backward()
    assert_same(x.grad, tx.grad)


def test_clone_keeps_the_strides_so_a_later_reshape_copies_where_pytorchs_does():
    x = mt.tensor(np.arange(6.0).reshape(2, 3)).T
    tx = torch.arange(6.0, dtype=torch.float64).reshape(2, 3).T
    c, tc = x.clone(), tx.clone()
    assert c.data.strides == tuple(s * 8 for s in tc.stride())
    flat, tflat = c.reshape(6), tc.reshape(6)
    flat += 100
    tflat += 100
    assert_same(c.data, tc)  # a copy in both: the clone is untouched


def test_view_refuses_where_pytorch_refuses_and_reshape_still_copies():
    x = mt.tensor(np.arange(6.0).reshape(2, 3)).T
    with pytest.raises(RuntimeError, match=r"view\(6,\): a tensor of shape \(3, 2\).*use \.reshape"):
        x.view(6)
    with pytest.raises(RuntimeError):
        torch.arange(6.0).reshape(2, 3).T.view(6)
    assert x.reshape(6).shape == (6,)
    assert x.contiguous().view(6).shape == (6,)
    v = mt.tensor(np.zeros((2, 3))).view(3, 2)  # a view where the layout allows it
    assert v.shape == (3, 2)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_along_a_leading_axis_is_contiguous_so_an_inplace_change_through_a_reshape_reaches_it(backend, op):
    with mt.use_backend(backend):
        y = getattr(mt.tensor(np.random.default_rng(0).standard_normal((3, 4))), op)(axis=0)
    assert y.data.flags.c_contiguous
    flat = y.reshape(12)
    flat += 1
    assert np.shares_memory(flat.data, y.data)


def test_retain_grad_then_an_inplace_change_gives_the_new_values_gradient():
    x, tx = mt64([1.0, 2.0, 3.0]), torch64([1.0, 2.0, 3.0])
    y, ty = x * 2, tx * 2
    y.retain_grad()
    ty.retain_grad()
    y *= 3
    ty *= 3
    (y * mt64([1.0, 2.0, 3.0], False)).sum().backward()
    (ty * torch64([1.0, 2.0, 3.0], False)).sum().backward()
    assert_same(y.grad, ty.grad)
    assert_same(x.grad, tx.grad)


@pytest.mark.parametrize("kind", ["hook", "retain_grad"])
def test_a_hook_on_a_view_later_changed_in_place_is_never_called(kind):
    results = []
    for lib, make in ((mt, mt64), (torch, torch64)):
        x = make([1.0, 2.0, 3.0])
        y = x * 2
        view, calls = y[:2], []
        if kind == "hook":
            view.register_hook(lambda g: calls.append(1) or g * 100)
        else:
            view.retain_grad()
        view *= 3
        (y * make([1.0, 2.0, 3.0], False)).sum().backward()
        results.append((calls, np.asarray(x.grad)))
    assert results[0][0] == results[1][0] == []
    assert_same(results[0][1], results[1][1])


@pytest.mark.parametrize("queries, keys", [(2, 5), (5, 2), (3, 3)])
@pytest.mark.parametrize("mask_kind", [None, "bool", "float"])
def test_sdpa_is_causal_with_other_lengths_aligns_top_left_as_pytorch(queries, keys, mask_kind):
    rng = np.random.default_rng(queries * 10 + keys)
    q, k, v = (rng.standard_normal((2, n, 3)) for n in (queries, keys, keys))
    tril = torch.ones(queries, keys, dtype=torch.bool).tril()
    mask, torch_mask = None, None
    if mask_kind == "bool":
        mask = rng.random((queries, keys)) < 0.3  # PyTorch's meaning: True takes part
        mask[:, 0] = True
        torch_mask = torch.from_numpy(mask) & tril
    elif mask_kind == "float":
        mask = np.where(rng.random((queries, keys)) < 0.3, -1e9, 0.0)
        torch_mask = torch.from_numpy(mask).masked_fill(~tril, float("-inf"))
    ours = F.scaled_dot_product_attention(mt.tensor(q), mt.tensor(k), mt.tensor(v), attn_mask=mask, is_causal=True)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    if torch_mask is None:
        theirs = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    else:  # torch refuses attn_mask with is_causal; the same mask, written out
        theirs = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch_mask)
    np.testing.assert_allclose(ours.data, theirs.numpy(), atol=1e-12)


def test_the_models_attention_keeps_the_kv_cache_alignment():
    from models.attention import causal_mask, scaled_dot_product_attention

    rng = np.random.default_rng(1)
    q, k, v = (mt.tensor(rng.standard_normal((1, n, 3))) for n in (2, 5, 5))
    fused = scaled_dot_product_attention(q, k, v, is_causal=True)
    explicit = F.scaled_dot_product_attention(q, k, v, mask=causal_mask(2, 5))
    np.testing.assert_allclose(fused.data, explicit.data, atol=1e-12)
    with pytest.raises(ValueError, match="causal_alignment must be"):
        F.scaled_dot_product_attention(q, k, v, is_causal=True, causal_alignment="left")


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_float32_attention_scales_before_the_product_as_pytorch(backend):
    q = np.full((1, 2, 4), 1e19, np.float32)  # q k^T = 4e38 overflows float32; scaled, 2e38 does not
    v = np.random.default_rng(2).standard_normal((1, 2, 4)).astype(np.float32)
    # the truth in float64, where nothing overflows (PyTorch's float32 is no reference: tests/test_default_path.py)
    theirs = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a.astype(np.float64)) for a in (q, q, v)))
    with mt.use_backend(backend):
        qt = mt.tensor(q, requires_grad=True)
        ours = F.scaled_dot_product_attention(qt, mt.tensor(q), mt.tensor(v))
        ours.sum().backward()
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours.data, theirs.numpy(), rtol=2e-7, atol=2e-7)  # float32 rounding of values ~1
    assert np.isfinite(qt.grad).all()


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_float64_layer_norm_past_the_variances_range_is_nan_as_pytorch(backend):
    values = [[1e200, -1e200, 3e199]]
    x, w, b = mt64(values), mt64(np.ones(3)), mt64(np.full(3, 0.5))
    tx, tw, tb = torch64(values), torch64(np.ones(3)), torch64(np.full(3, 0.5))
    with mt.use_backend(backend):
        y = F.layer_norm(x, (3,), w, b)
        y.sum().backward()
    ty = torch.nn.functional.layer_norm(tx, (3,), tw, tb)
    ty.sum().backward()
    assert_same(y.data, ty)
    assert_same(w.grad, tw.grad)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("special", [np.inf, np.nan])
def test_a_visible_inf_or_nan_in_a_masked_softmax_leaves_the_hidden_positions_alone(backend, special):
    x = mt64([[1.0, special, 2.0, 0.5]])
    hidden = np.array([[False, False, True, True]])
    with mt.use_backend(backend):
        y = x.softmax(axis=-1, mask=hidden)
        (y * mt64([[1.0, 2.0, 3.0, 4.0]], False)).sum().backward()
    assert (y.data[hidden] == 0).all() and (x.grad[hidden] == 0).all()
    assert np.isnan(y.data[~hidden]).all()  # the visible ones are NaN, as in PyTorch


def test_cat_and_stack_of_one_tensor_are_refused_as_pytorch():
    x = mt.tensor(np.ones((2, 3)))
    for join in (mt.cat, mt.stack):
        with pytest.raises(TypeError, match=r"expects a list or tuple of tensors, got one Tensor of shape \(2, 3\)"):
            join(x)
    with pytest.raises(TypeError):
        torch.cat(torch.ones(2, 3))
    with pytest.raises(TypeError, match="item 1 of the list is None"):
        mt.cat([x, None])


@pytest.mark.parametrize("data", [None, ["a"], {}, "text"])
def test_tensor_of_no_numbers_is_refused(data):
    with pytest.raises(TypeError, match=r"tensor\(\).*not numbers"):
        mt.tensor(data)


def test_a_ragged_list_names_the_op():
    with pytest.raises(ValueError, match=r"tensor\(\): the nested lists are ragged"):
        mt.tensor([[1.0, 2.0], [3.0]])


def test_full_with_none_is_refused():
    with pytest.raises(TypeError, match=r"full\(2, 3\): fill_value must be a number, got None"):
        mt.full((2, 3), None)


def test_backward_with_a_complex_gradient_is_refused_before_anything_changes():
    x = mt64([1.0, 2.0])
    with pytest.raises(TypeError, match=r"the gradient given is complex \(complex128, shape \(2,\)\)"):
        (x * 2).backward(np.array([1 + 1j, 1]))
    assert x.grad is None


# -- malformed calls: errors that name the op -----------------------------------------------------


@pytest.mark.parametrize("call, error, message", [
    (lambda x: F.linear(x, None), TypeError, r"linear: weight must be a Tensor of shape \(out_features, 3\)"),
    (lambda x: mt.arange(0, 1, 0), ValueError, r"arange\(start=0, stop=1, step=0\)"),
    (lambda x: x @ None, TypeError, r"an operand is None.*shape \(2, 3\)"),
    (lambda x: x.register_hook(None), TypeError, r"register_hook\(\): the hook must be callable"),
    (lambda x: x.reshape(2.0, 3), TypeError, r"reshape: a shape holds ints, got \(2.0, 3\)"),
    (lambda x: mt.zeros(-1), ValueError, r"zeros: a shape holds sizes >= 0"),
    (lambda x: F.layer_norm(x, (3,), mt.tensor(np.ones(4)), mt.tensor(np.zeros(4))), ValueError,
     r"layer_norm: weight has shape \(4,\); it must be the input's last axis, \(3,\)"),
    (lambda x: x.sum(axis=0, dim=1), TypeError, r"sum: give axis= or dim="),
    (lambda x: x.split([1, 1], dim=1), ValueError, r"split: sizes \[1, 1\] do not add up to axis 1's length 3"),
])
def test_malformed_calls_name_the_op_and_the_values(call, error, message):
    x = mt.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(error, match=message):
        call(x)
    assert x.grad is None and x.version == 0


def test_numba_layer_norm_with_an_empty_last_axis_and_float16_kernels():
    for backend in ("numpy", "numba"):
        with mt.use_backend(backend):
            empty = F.layer_norm(mt.tensor(np.ones((2, 0))), (0,))
            assert empty.shape == (2, 0)
            x16 = mt.tensor(np.linspace(-2, 2, 12, dtype=np.float16).reshape(3, 4), requires_grad=True)
            for y in (x16.softmax(axis=-1), F.gelu(x16), F.layer_norm(x16, (4,)),
                      F.scaled_dot_product_attention(x16[None], x16[None], x16[None])):
                assert y.dtype == np.float16
                y.sum().backward()


# -- PyTorch's spellings --------------------------------------------------------------------------


def test_dim_and_keepdim_are_axis_and_keepdims():
    data = np.random.default_rng(3).standard_normal((2, 3, 4))
    x, tx = mt.tensor(data), torch.from_numpy(data)
    for name in ("sum", "mean", "softmax", "log_softmax"):
        ours = getattr(x, name)(dim=1) if name.endswith("softmax") else getattr(x, name)(dim=1, keepdim=True)
        theirs = getattr(tx, name)(dim=1) if name.endswith("softmax") else getattr(tx, name)(dim=1, keepdim=True)
        np.testing.assert_allclose(ours.data, theirs.numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.max(dim=-1).values.data, tx.max(dim=-1).values.numpy())
    np.testing.assert_allclose(x.amax(dim=-1).data, tx.amax(dim=-1).numpy())
    np.testing.assert_allclose(F.softmax(x, dim=0).data, torch.softmax(tx, dim=0).numpy(), rtol=1e-12)
    np.testing.assert_allclose(mt.cat([x, x], dim=2).data, torch.cat([tx, tx], dim=2).numpy())
    np.testing.assert_allclose(mt.stack([x, x], dim=1).data, torch.stack([tx, tx], dim=1).numpy())
    assert x.unsqueeze(dim=0).shape == (1, 2, 3, 4) and x[:, :1].squeeze(dim=1).shape == (2, 4)


@pytest.mark.parametrize("size", [1, 2, 3, 4, [1, 3], [0, 4]])
def test_split_as_pytorch(size):
    data = np.arange(24.0).reshape(2, 4, 3)
    ours = mt.tensor(data, requires_grad=True)
    pieces = ours.split(size, dim=1)
    theirs = torch.from_numpy(data).split(size, dim=1)
    assert [p.shape for p in pieces] == [tuple(t.shape) for t in theirs]
    for p, t in zip(pieces, theirs):
        np.testing.assert_array_equal(p.data, t.numpy())
    sum(p.sum() * (i + 1) for i, p in enumerate(pieces)).backward()
    assert ours.grad.shape == data.shape


@pytest.mark.parametrize("chunks", [1, 2, 3, 5, 7])
def test_chunk_as_pytorch(chunks):
    data = np.arange(10.0).reshape(5, 2)
    ours, theirs = mt.tensor(data).chunk(chunks), torch.from_numpy(data).chunk(chunks)
    assert [p.shape for p in ours] == [tuple(t.shape) for t in theirs]


def test_argmax_argmin_as_pytorch_and_without_gradient():
    data = np.random.default_rng(4).standard_normal((3, 4))
    x, tx = mt.tensor(data, requires_grad=True), torch.from_numpy(data)
    for name in ("argmax", "argmin"):
        assert getattr(x, name)().item() == getattr(tx, name)().item()
        np.testing.assert_array_equal(getattr(x, name)(-1).data, getattr(tx, name)(-1).numpy())
        np.testing.assert_array_equal(getattr(x, name)(dim=0, keepdim=True).data,
                                      getattr(tx, name)(dim=0, keepdim=True).numpy())
        assert not getattr(x, name)(1).requires_grad and getattr(x, name)(1).dtype == np.int64


def test_contiguous_is_self_or_a_c_ordered_copy_in_the_graph():
    x = mt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert x.contiguous() is x
    c = x.T.contiguous()
    assert c.data.flags.c_contiguous and c.requires_grad
    c.sum().backward()
    np.testing.assert_array_equal(x.grad, np.ones((2, 3)))


def test_nn_layernorm_and_rmsnorm_match_pytorch_and_share_the_models_op():
    from models.layernorm import LayerNormFunction

    assert LayerNormFunction is mt.nn.LayerNormFunction
    data = np.random.default_rng(5).standard_normal((2, 3, 6))
    for ours, theirs in ((mt.nn.LayerNorm(6), torch.nn.LayerNorm(6)), (mt.nn.LayerNorm((6,), bias=False),
                         torch.nn.LayerNorm((6,), bias=False)), (mt.nn.RMSNorm(6), torch.nn.RMSNorm(6))):
        theirs = theirs.double()
        ours.load_state_dict(theirs.state_dict())
        x, tx = mt.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        y, ty = ours(x), theirs(tx)
        np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-10, atol=1e-12)
        (y * y).sum().backward()
        (ty * ty).sum().backward()
        np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-9, atol=1e-11)
    layer = mt.nn.LayerNorm(6)
    assert layer(mt.tensor(data)).grad_fn.function is LayerNormFunction
    with pytest.raises(ValueError, match=r"LayerNorm: normalized_shape \(2, 6\): minitensor normalises over the last"):
        mt.nn.LayerNorm((2, 6))


def test_load_state_dict_of_a_pytorch_module_converts_and_checks_dtypes():
    ours, theirs = mt.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    ours.load_state_dict(theirs.state_dict())
    np.testing.assert_array_equal(ours.weight.data, theirs.weight.detach().numpy())
    with pytest.raises(RuntimeError, match="values of a dtype the parameter cannot hold: bias"):
        ours.load_state_dict({"weight": theirs.weight.detach(), "bias": torch.tensor([1 + 1j, 2])})
    with pytest.raises(TypeError, match="bfloat16 has no NumPy dtype"):
        ours.load_state_dict({k: v.bfloat16() for k, v in theirs.state_dict().items()})


def test_embedding_padding_idx_as_pytorch():
    ours, theirs = mt.nn.Embedding(5, 3, padding_idx=1), torch.nn.Embedding(5, 3, padding_idx=1).double()
    assert (ours.weight.data[1] == 0).all()
    ours.load_state_dict(theirs.state_dict())
    index = np.array([[0, 1, 1, 4]])
    y, ty = ours(index), theirs(torch.from_numpy(index))
    np.testing.assert_array_equal(y.data, ty.detach().numpy())
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(ours.weight.grad, theirs.weight.grad.numpy())


@pytest.mark.parametrize("optimizer", ["Adam", "AdamW"])
def test_amsgrad_as_pytorch(optimizer):
    rng = np.random.default_rng(6)
    start = rng.standard_normal(4)
    ours, theirs = mt.nn.Parameter(start.copy()), torch.nn.Parameter(torch.from_numpy(start.copy()))
    opt = getattr(mt.optim, optimizer)([ours], lr=0.1, amsgrad=True)
    topt = getattr(torch.optim, optimizer)([theirs], lr=0.1, amsgrad=True)
    for step in range(5):
        scale = rng.standard_normal(4) * (5.0 if step == 1 else 0.1)  # a large step, so v_max matters
        for p, o in ((ours, opt), (theirs, topt)):
            o.zero_grad()
            (p * p * (mt.tensor(scale) if p is ours else torch.from_numpy(scale))).sum().backward()
            o.step()
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-10)


@pytest.mark.parametrize("norm_type", [1, 2, 3.5, math.inf])
def test_clip_grad_norm_type_as_pytorch(norm_type):
    grads = [np.array([3.0, -4.0]), np.array([[1.0, 2.0], [-7.0, 0.5]])]
    ours = [mt.nn.Parameter(np.zeros_like(g)) for g in grads]
    theirs = [torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.float64)) for g in grads]
    for p, t, g in zip(ours, theirs, grads):
        p.grad, t.grad = g.copy(), torch.from_numpy(g.copy())
    total = mt.optim.clip_grad_norm_(ours, 2.0, norm_type=norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(theirs, 2.0, norm_type=norm_type)
    assert total == pytest.approx(ttotal.item(), rel=1e-12)
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-12)


# -- a small fuzzer of malformed calls: each raises a TypeError or ValueError naming the op, or works --

MALFORMED = {"None": None, "a string": "a", "a float": 2.5, "a misshapen tensor": mt.tensor(np.ones((4, 5))),
             "a ragged list": [[1.0, 2.0], [3.0]], "a negative int": -7}
CALLS = {
    "add": lambda x, a: x + a, "matmul": lambda x, a: x @ a, "cat": lambda x, a: mt.cat([x, a]),
    "stack": lambda x, a: mt.stack([x, a]), "where": lambda x, a: mt.where(x.data > 0, x, a),
    "reshape": lambda x, a: x.reshape(a), "view": lambda x, a: x.view(a), "softmax": lambda x, a: x.softmax(a),
    "sum": lambda x, a: x.sum(a), "linear": lambda x, a: F.linear(x, a),
    "layer_norm": lambda x, a: F.layer_norm(x, (3,), a), "attention": lambda x, a: F.scaled_dot_product_attention(x, x, a),
    "masked_fill": lambda x, a: x.masked_fill(a, 0.0), "split": lambda x, a: x.split(a), "chunk": lambda x, a: x.chunk(a),
    "zeros": lambda x, a: mt.zeros(a), "full": lambda x, a: mt.full(a, 0.0), "arange": lambda x, a: mt.arange(0, 1, a),
    "tensor": lambda x, a: mt.tensor(a), "expand": lambda x, a: x.expand(a), "permute": lambda x, a: x.permute(a),
    "register_hook": lambda x, a: x.register_hook(a), "clip": lambda x, a: x.clip(a),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_malformed_calls_raise_a_clear_error_before_anything_changes(call):
    """No AttributeError, ZeroDivisionError or KeyError from inside, and x untouched."""
    for name, argument in MALFORMED.items():
        x = mt.tensor(np.ones((2, 3)), requires_grad=True)
        try:
            CALLS[call](x, argument)
        except (TypeError, ValueError, IndexError, RuntimeError) as error:
            assert x.version == 0 and x.grad is None, (call, name)
            assert not str(error).startswith("'"), f"{call} with {name}: {error!r} (Python's generic message)"
        except Exception as error:  # noqa: BLE001
            pytest.fail(f"{call} with {name}: {error!r}")


# ---------------------------------------------------------------------------
# Found by a blind fuzzer against PyTorch (issue 32's review)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("bias_shape", [(3, 5), (1, 3, 5), (5,)])
def test_a_learned_float_attention_bias_gets_pytorchs_gradient(is_causal, bias_shape):
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 5, 4))
    bias, upstream = rng.standard_normal(bias_shape), rng.standard_normal((2, 3, 4))
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v, bias)]
    mask = theirs[3]
    if is_causal:  # PyTorch refuses attn_mask with is_causal: the same mask, written out (top-left)
        mask = mask + torch.triu(torch.full((3, 5), float("-inf"), dtype=torch.float64), 1)
    torch.nn.functional.scaled_dot_product_attention(*theirs[:3], attn_mask=mask).backward(torch.tensor(upstream))
    ours = [mt.tensor(a, requires_grad=True) for a in (q, k, v, bias)]
    F.scaled_dot_product_attention(*ours[:3], attn_mask=ours[3], is_causal=is_causal).backward(upstream)
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(mine.grad, reference.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_a_numpy_scalar_keeps_a_float32_tensor_float32_as_in_pytorch():
    x = mt.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    for y in (x / np.sqrt(4.0), x * np.float64(2), x ** np.float64(2), np.float64(2) * x, x - np.float32(1)):
        assert y.dtype == np.float32
    assert (torch.ones(2) / np.sqrt(4.0)).dtype == torch.float32  # PyTorch's rule, checked here


@pytest.mark.parametrize("function", ["softmax", "log_softmax"])
def test_softmax_without_dim_is_refused_where_pytorchs_implicit_axis_is_not_the_last(function):
    x = mt.tensor(np.random.default_rng(0).standard_normal((2, 3, 4)))
    with pytest.raises(TypeError, match=rf"{function}: say which axis for an input of shape \(2, 3, 4\).*dim=0"):
        getattr(F, function)(x)
    two_d = np.random.default_rng(0).standard_normal((3, 4))
    with pytest.warns(UserWarning):  # PyTorch's deprecation warning; its choice for 2 axes is the last one
        expected = getattr(torch.nn.functional, function)(torch.tensor(two_d))
    np.testing.assert_allclose(getattr(F, function)(mt.tensor(two_d)).data, expected.numpy(), rtol=1e-12)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_and_min_with_dim_give_values_and_indices_with_pytorchs_gradient(op, keepdim):
    """The blind fuzzer's port: `v, i = x.max(dim=1)` unpacked two values of a 2-element tensor.
    With dim= it is torch's (values, indices); on a tie the gradient goes to the index returned."""
    data = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 5.0], [4.0, 4.0, -1.0]])
    x, tx = mt64(data), torch64(data)
    values, indices = getattr(x, op)(dim=1, keepdim=keepdim)
    theirs = getattr(tx, op)(dim=1, keepdim=keepdim)
    np.testing.assert_array_equal(values.data, theirs.values.detach().numpy())
    np.testing.assert_array_equal(indices.data, theirs.indices.numpy())
    assert indices.dtype == np.int64 and not indices.requires_grad and values.shape == tuple(theirs.values.shape)
    assert getattr(x, op)(dim=1)[0].shape == (3,) and getattr(x, op)(dim=1).values.shape == (3,)
    upstream = np.arange(1.0, 1.0 + values.data.size).reshape(values.shape)
    (values * mt.tensor(upstream)).sum().backward()
    (theirs.values * torch.tensor(upstream)).sum().backward()
    np.testing.assert_array_equal(x.grad, tx.grad.numpy())


def test_max_without_dim_or_with_axis_keeps_numpys_meaning_and_amax_shares_ties_as_pytorch():
    data = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 5.0]])
    x, tx = mt64(data), torch64(data)
    assert x.max().data == 5.0 and x.max(axis=1).shape == (2,)
    x.amax(dim=1).sum().backward()
    tx.amax(dim=1).sum().backward()
    np.testing.assert_array_equal(x.grad, tx.grad.numpy())  # 0.5 and 0.5 on the tie, as PyTorch
    with pytest.raises(TypeError, match=r"max: dim= gives \(values, indices\) along one axis .* x\.amax\(dim=\(0, 1\)\)"):
        x.max(dim=(0, 1))
    with pytest.raises(IndexError, match=r"min: the minimum over an empty axis is undefined \(shape \(2, 0\), dim 1\)"):
        mt.zeros((2, 0)).min(dim=1)


@pytest.mark.parametrize("call", [
    lambda t: t.var(), lambda t: t.var(1), lambda t: t.var(dim=0), lambda t: t.var(dim=1, keepdim=True),
    lambda t: t.var(dim=1, correction=0), lambda t: t.var(dim=(0, 1), unbiased=False), lambda t: t.std(),
    lambda t: t.std(dim=1, correction=2), lambda t: t.sum(dim=()), lambda t: t.mean(dim=()),
    lambda t: t.amax(dim=()), lambda t: t.amin(dim=[]), lambda t: t.std(dim=0, unbiased=True),
    (lambda t: t.var(dim=()), lambda t: t.var())])
def test_var_std_and_reductions_in_pytorchs_spelling_mean_what_pytorch_means(call):
    """var and std divide by n - 1 where PyTorch's spelling is used (torch.var's default), and
    dim=() reduces every axis, as PyTorch: a port gets PyTorch's numbers and gradients. (PyTorch
    2.13's own backward of var(dim=()) is inf everywhere, though its value is var()'s: var() is
    the reference there.)"""
    data = np.random.default_rng(5).standard_normal((3, 4))
    x, tx = mt64(data), torch64(data)
    ours_call, their_call = call if isinstance(call, tuple) else (call, call)
    ours, theirs = ours_call(x), their_call(tx)
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-12)
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_var_in_numpys_spelling_keeps_numpys_biased_default_and_refuses_two_choices():
    data = np.random.default_rng(6).standard_normal((3, 4))
    x = mt64(data)
    np.testing.assert_allclose(x.var(axis=1).data, data.var(axis=1), rtol=1e-12)
    np.testing.assert_allclose(x.var(ddof=1).data, data.var(ddof=1), rtol=1e-12)
    np.testing.assert_allclose(x.std(axis=0, ddof=0).data, data.std(axis=0), rtol=1e-12)
    assert x.sum(axis=()).shape == (3, 4)  # NumPy's axis=() reduces nothing
    with pytest.raises(TypeError, match="var: give one of ddof=, correction= and unbiased= .*not ddof, correction"):
        x.var(dim=1, ddof=1, correction=1)


@pytest.mark.parametrize("dim, index", [(0, [[0, 1, 2, 0], [2, 2, 1, 0]]), (1, [[3, 3], [0, 1], [2, 0]]),
                                        (1, [[1], [1], [1]])])
def test_gather_as_pytorch_a_repeated_index_adding_its_gradients(dim, index):
    data = np.random.default_rng(7).standard_normal((3, 4))
    x, tx = mt64(data), torch64(data)
    ours, theirs = x.gather(dim, np.array(index)), tx.gather(dim, torch.tensor(index))
    np.testing.assert_array_equal(ours.data, theirs.detach().numpy())
    upstream = np.random.default_rng(8).standard_normal(ours.shape)
    (ours * mt.tensor(upstream)).sum().backward()
    (theirs * torch.tensor(upstream)).sum().backward()
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-12)
    assert mt.gradcheck(lambda t: t.gather(dim, np.array(index)), mt64(data))


@pytest.mark.parametrize("index, error, message", [
    (np.array([[0.5, 1]]), ValueError, r"gather: index must be an integer array with as many axes as the input \(2\), got float64"),
    (np.array([0, 1]), ValueError, r"gather: index must be an integer array .* got int64 of shape \(2,\)"),
    (np.array([[0], [4]]), IndexError, r"gather: index out of range for axis 1 of size 4 \(index from 0 to 4\)"),
    (np.zeros((5, 1), dtype=int), ValueError, r"gather: index of shape \(5, 1\) is larger than the input \(3, 4\)")])
def test_gather_refuses_a_bad_index_naming_it(index, error, message):
    with pytest.raises(error, match=message):
        mt.zeros((3, 4)).gather(1, index)


@pytest.mark.parametrize("expression", [
    lambda m, a, b: a / 2, lambda m, a, b: a * 0.5, lambda m, a, b: 1.5 - a, lambda m, a, b: 2 / a,
    lambda m, a, b: a / b, lambda m, a, b: a * 2, lambda m, a, b: a + b, lambda m, a, b: a ** 0.5,
    lambda m, a, b: a.exp(), lambda m, a, b: a.tanh(), lambda m, a, b: a.sqrt(), lambda m, a, b: a.log(),
    lambda m, a, b: a.sigmoid(), lambda m, a, b: a * np.float64(2.0), lambda m, a, b: (a > 1) * 1.5,
    lambda m, a, b: (a > 1).exp(), lambda m, a, b: a + m.tensor([0.5, 1.0, 2.0], dtype=torch.float64 if m is torch else np.float64),
    lambda m, a, b: m.tensor([0.5, 1.0, 2.0], dtype=torch.float16 if m is torch else np.float16) * a])
def test_integers_and_bools_promote_as_in_pytorch(expression):
    """`mt.tensor([1, 2, 3]) / 2` was float64 (NumPy's promotion); a port expects PyTorch's: an
    integer or bool tensor meeting a Python float, divided, or taken through exp and the like, is
    the default float dtype; meeting a float tensor, it takes that tensor's dtype."""
    a, b = mt.tensor([1, 2, 3]), mt.tensor([2, 2, 2])
    ta, tb = torch.tensor([1, 2, 3]), torch.tensor([2, 2, 2])
    ours, theirs = expression(mt, a, b), expression(torch, ta, tb)
    assert ours.dtype == np.dtype(str(theirs.dtype).removeprefix("torch.")), (ours.dtype, theirs.dtype)
    np.testing.assert_allclose(ours.data.astype(np.float64), theirs.numpy().astype(np.float64), rtol=1e-3)


@pytest.mark.parametrize("function", ["sigmoid", "silu"])
def test_float16_sigmoid_and_silu_stay_float16_with_pytorchs_values(function):
    data = np.linspace(-8, 8, 33).astype(np.float16)
    x = mt.tensor(data, requires_grad=True)
    y = x.sigmoid() if function == "sigmoid" else F.silu(x)
    assert y.dtype == np.float16
    exact = 1 / (1 + np.exp(-data.astype(np.float64)))
    exact = exact if function == "sigmoid" else data.astype(np.float64) * exact
    np.testing.assert_allclose(y.data.astype(np.float64), exact, rtol=2e-3, atol=1e-4)  # float16's precision
    y.sum().backward()
    assert x.grad.dtype == np.float16


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("loss", ["l1_loss", "binary_cross_entropy_with_logits", "nll_loss"])
def test_the_losses_a_port_uses_match_pytorch_values_and_gradients(loss, reduction):
    rng = np.random.default_rng(11)
    logits = rng.standard_normal((5, 4)) * 30  # past exp's range in float64's exp(-x) form: the stable form holds
    if loss == "nll_loss":
        x, tx = mt64(logits), torch64(logits)
        target = np.array([0, 3, 1, 1, 2])
        ours = F.nll_loss(F.log_softmax(x, dim=1), mt.tensor(target), reduction=reduction)
        theirs = torch.nn.functional.nll_loss(torch.log_softmax(tx, dim=1), torch.tensor(target), reduction=reduction)
    else:
        target = rng.random((5, 4)) if loss.startswith("binary") else rng.standard_normal((5, 4))
        target[0, 0] = logits[0, 0]  # l1's tie: PyTorch's gradient there is 0
        x, tx = mt64(logits), torch64(logits)
        ours = getattr(F, loss)(x, mt.tensor(target), reduction=reduction)
        theirs = getattr(torch.nn.functional, loss)(tx, torch.tensor(target), reduction=reduction)
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    upstream = rng.standard_normal(ours.shape)
    (ours * mt.tensor(upstream)).sum().backward()
    (theirs * torch.tensor(upstream)).sum().backward()
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.l1_loss(mt.zeros((2, 3)), mt.zeros((3,))), ValueError, r"l1_loss: the target's shape \(3,\) differs"),
    (lambda: F.l1_loss(mt.zeros(2), mt.zeros(2), reduction="avg"), ValueError, "l1_loss: reduction must be 'mean'"),
    (lambda: F.nll_loss(mt.zeros((2, 3)), mt.tensor([0, 3])), IndexError, r"nll_loss: target 0..3 out of range for 3"),
    (lambda: F.nll_loss(mt.zeros((2, 3)), mt.tensor([0.0, 1.0])), ValueError, r"nll_loss: expects \(N, C\)")])
def test_a_malformed_loss_call_names_the_loss(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("dims", [0, 1, -1, (0, 1), (0, 2), 2])
def test_squeeze_in_pytorchs_spelling_keeps_a_given_axis_not_of_size_1_as_pytorch(dims):
    data = np.random.default_rng(12).standard_normal((2, 1, 3))
    x, tx = mt64(data), torch64(data)
    ours, theirs = x.squeeze(dims), tx.squeeze(dims)
    assert ours.shape == tuple(theirs.shape) and x.squeeze(dim=dims).shape == tuple(theirs.shape)
    (ours * mt.tensor(np.arange(ours.data.size, dtype=float).reshape(ours.shape))).sum().backward()
    (theirs * torch.arange(theirs.numel(), dtype=torch.float64).reshape(theirs.shape)).sum().backward()
    np.testing.assert_array_equal(x.grad, tx.grad.numpy())


def test_squeeze_in_numpys_spelling_refuses_an_axis_not_of_size_1_as_numpy():
    with pytest.raises(ValueError, match=r"squeeze: axis 0 of shape \(2, 1, 3\) has size 2, not 1"):
        mt.zeros((2, 1, 3)).squeeze(axis=0)
    assert mt.zeros((2, 1, 3)).squeeze(axis=1).shape == (2, 3)
