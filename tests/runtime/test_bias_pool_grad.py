"""The fold pass runs max_pool_grad_bias in place of a max_pool_grad whose result only a bias
add's gradient reads (a conv layer's relu(conv2d(x, w) + b), or conv2d(x, w) + b, before its
max_pool): the bias's gradient is summed from each window's gradient as it is written, with no
pass of its own over the pool's gradient. Results equal those of the graph as written (folding
off), and the C++ kernel's those of the python kernel; where the fold does not hold (another
reader of the pool's gradient, a value that the bias broadcasts), the nodes stay."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph, placeholder
from opsdk.runtime.kernels.choice import choose_kernel

from test_pow_square import run_and_explain

rng = np.random.default_rng(5)
XV = rng.standard_normal((4, 12, 10, 3)).astype(np.float32)
WV = rng.standard_normal((3, 3, 3, 8)).astype(np.float32)
BV = rng.standard_normal(8).astype(np.float32)
POOL = {"ksize_h": 3, "ksize_w": 2, "stride_h": 2, "stride_w": 2, "same": 1}
FOLDED = "(add_grad) -> max_pool_grad_bias"


def _run(registry, fold, add="add", relu=True, bias_first=False, fetch_pool_grad=False,
         channels_in=3):
    """max_pool([relu](conv2d(x, w) + b)), the gradients of w and b (and of the pool's input)."""
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [None, 12, 10, channels_in], name="x")
        w, b = Variable(WV[:, :, :channels_in], name="w"), Variable(BV, name="b")
        conv = apply_op(registry, "conv2d", [x, w], {}, name="conv")
        if channels_in == 1:  # [n, h, w, 1] + [8]: the bias broadcasts the value
            conv = apply_op(registry, "reduce_sum", [conv], {"axes": [3], "keepdims": True})
        s = apply_op(registry, add, [b, conv] if bias_first else [conv, b], {}, name="sum")
        r = apply_op(registry, "relu", [s], {}, name="relu") if relu else s
        p = apply_op(registry, "max_pool", [r], POOL, name="pool")
        loss = apply_op(registry, "reduce_sum", [apply_op(registry, "square", [p], {})], {})
        fetches = [loss, *gradients(loss, [w, b] + ([r] if fetch_pool_grad else []))]
        init = global_variables_initializer()
    return run_and_explain(g, init, fetches, {x: XV[..., :channels_in]}, fold)


def _same(got, want):
    for mine, theirs in zip(got, want):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("add, relu, bias_first", [
    ("add", True, False), ("add", True, True), ("add", False, False), ("bias_add", True, False),
    ("bias_add", False, False)])
def test_a_bias_gradient_is_summed_by_the_pools_gradient(registry, add, relu, bias_first):
    got, notes = _run(registry, True, add, relu, bias_first)
    want, plain = _run(registry, False, add, relu, bias_first)
    assert f"({add}_grad) -> max_pool_grad_bias" in notes
    assert "max_pool_grad_bias" not in plain
    _same(got, want)


def test_a_read_pool_gradient_keeps_the_bias_gradient_apart(registry):
    got, notes = _run(registry, True, fetch_pool_grad=True)
    want, _ = _run(registry, False, fetch_pool_grad=True)
    assert "max_pool_grad_bias" not in notes
    _same(got, want)


def test_a_bias_that_broadcasts_the_value_keeps_the_add_gradient(registry):
    got, notes = _run(registry, True, channels_in=1)  # [n, h, w, 1] + [8]: summed over channels
    want, _ = _run(registry, False, channels_in=1)
    assert "max_pool_grad_bias" not in notes
    _same(got, want)


@pytest.mark.parametrize("shape, attrs", [
    ((3, 9, 7, 5), POOL),
    ((2, 8, 8, 16), {"ksize_h": 2, "ksize_w": 2, "stride_h": 2, "stride_w": 2, "same": 0, "relu": 1}),
    ((2, 6, 6, 3), {"ksize_h": 3, "ksize_w": 3, "stride_h": 1, "stride_w": 1, "same": 1}),  # overlapping
    ((0, 6, 6, 4), POOL),  # no images: a bias gradient of zeros
])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_the_cpu_kernel_gives_the_python_kernels_values(registry, shape, attrs, dtype):
    spec = registry.get("max_pool_grad_bias")
    attrs = {a.name: attrs.get(a.name, a.default) for a in spec.attrs}  # declared order
    pool_attrs = {k: v for k, v in attrs.items() if k != "relu"}
    tol = 1e-2 if dtype == "float16" else 1e-5
    sum_tol = tol * max(1, shape[0] * 10)
    for nans in (False, True):
        x = rng.standard_normal(shape).astype(dtype)
        if nans and x.size:  # a window whose maximum no position equals puts nothing anywhere
            x.flat[::7] = np.nan  # (the python kernel's argmax takes the NaN: not compared)
        y = choose_kernel(registry.get("max_pool"), kind="python").fn(np, x, **pool_attrs)
        gy = rng.standard_normal(y.shape).astype(dtype)
        cpu_x, cpu_b = choose_kernel(spec, kind="cpu").fn(x, y, gy, *attrs.values())
        assert cpu_b.shape == (shape[3],) and cpu_b.dtype == dtype and cpu_x.dtype == dtype
        np.testing.assert_allclose(cpu_b, cpu_x.astype(np.float64).sum(axis=(0, 1, 2)),
                                   rtol=tol, atol=sum_tol)
        if not nans:
            py_x, py_b = choose_kernel(spec, kind="python").fn(np, x, y, gy, **attrs)
            np.testing.assert_allclose(cpu_x, py_x, rtol=tol, atol=tol)
            np.testing.assert_allclose(cpu_b, py_b, rtol=tol, atol=sum_tol)
