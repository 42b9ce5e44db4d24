"""conv2d_bias: the host's C++ kernel (the bias and ReLU added to each chunk of y as it is summed)
against the python kernel, and the fold pass running it in place of relu(conv2d(x, w) + b) with
results equal to the graph as written (folding off), only where nothing else reads the
convolution or the sum."""

from __future__ import annotations

import numpy as np
import pytest

from opdefs.builtin import kernels_conv as python_kernels
from opsdk import ops
from opsdk.registry import load_registry
from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph, placeholder
from opsdk.runtime.kernels.choice import choose_kernel

from test_pow_square import run_and_explain

rng = np.random.default_rng(5)


@pytest.mark.parametrize("shape,kernel,attrs", [
    ((6, 28, 28, 1), (5, 5, 1, 32), {}),                                 # the broadcast tiling
    ((8, 14, 15, 32), (5, 5, 32, 64), {}),                               # both threads
    ((3, 9, 9, 20), (3, 3, 20, 1), {"stride_h": 2, "same": 0}),          # the dot tiling
    ((2, 11, 13, 5), (2, 4, 5, 3), {"stride_h": 3, "stride_w": 2}),      # a scratch copy
])
@pytest.mark.parametrize("relu", [1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_cpu_kernel_equals_the_python_kernel(shape, kernel, attrs, relu, dtype):
    if choose_kernel(load_registry().get("conv2d_bias")).kind != "cpu":
        pytest.fail("conv2d_bias's cpu kernel is not built: run `opsdk build`")
    x = rng.standard_normal(shape).astype(dtype)
    f = rng.standard_normal(kernel).astype(dtype)
    b = rng.standard_normal(kernel[3]).astype(dtype)
    x[0, 0, 0, 0] = np.nan  # stays NaN through the bias and ReLU, as relu's does
    full = {"stride_h": 1, "stride_w": 1, "same": 1, **attrs}
    want = python_kernels.conv2d_bias(np, x, f, b, relu=relu, **full)
    got = ops.conv2d_bias(x, f, b, relu=relu, **attrs)
    assert np.isnan(got).any() and (np.isnan(got) == np.isnan(want)).all()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if relu:
        assert (got[~np.isnan(got)] >= 0).all() and (got == 0).any()


XV = rng.standard_normal((4, 10, 9, 3)).astype(np.float32)
WV = rng.standard_normal((3, 3, 3, 8)).astype(np.float32)
BV = rng.standard_normal(8).astype(np.float32)


def _run(registry, fold, add="add", also=None, bias_first=False, waits=False):
    """relu(conv2d(x, w) + b) summed, with its gradients for w, b and x; `also` names a tensor
    the graph fetches besides ("conv" or "sum"); `waits`: the square runs after the conv node
    (a control input)."""
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [None, 10, 9, 3], name="x")
        w, b = Variable(WV, name="w"), Variable(BV, name="b")
        c = apply_op(registry, "conv2d", [x, w], {}, name="conv")
        s = apply_op(registry, add, [b, c] if bias_first else [c, b], {}, name="sum")
        r = apply_op(registry, "relu", [s], {}, name="relu")
        with g.control_dependencies([c.op] if waits else []):
            sq = apply_op(registry, "square", [r], {})
        loss = apply_op(registry, "reduce_sum", [sq], {})
        fetches = [loss, *gradients(loss, [w, b, x])] + ([{"conv": c, "sum": s}[also]] if also else [])
        init = global_variables_initializer()
    return run_and_explain(g, init, fetches, {x: XV}, fold)


@pytest.mark.parametrize("add,bias_first", [("add", False), ("add", True), ("bias_add", False)])
def test_conv_bias_relu_is_one_node_with_equal_results(registry, add, bias_first):
    got, notes = _run(registry, True, add, bias_first=bias_first)
    want, plain = _run(registry, False, add, bias_first=bias_first)
    assert "relu (relu) -> conv2d_bias" in notes and "conv (conv2d) -> conv2d_bias" in notes
    assert "conv2d_bias" not in plain
    for mine, theirs in zip(got, want):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("also,waits", [("conv", False), ("sum", False), (None, True)])
def test_a_fetched_or_awaited_convolution_or_sum_keeps_the_nodes(registry, also, waits):
    got, notes = _run(registry, True, also=also, waits=waits)
    want, _ = _run(registry, False, also=also, waits=waits)
    assert "conv2d_bias" not in notes
    for mine, theirs in zip(got, want):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-3)


def test_a_convolution_merged_with_its_twin_is_fused_only_when_no_twin_reader_remains(registry):
    """Two like layers on one input (a TF1 model's training and test towers): the twin convs
    merge, and the first relu(conv + b) must not absorb the conv while the second tower's sum,
    not yet rewired when the relu is visited, reads it (it failed with a missing slot)."""
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [None, 10, 9, 3], name="x")
        w, b = Variable(WV, name="w"), Variable(BV, name="b")
        c1 = apply_op(registry, "conv2d", [x, w], {}, name="conv")
        c2 = apply_op(registry, "conv2d", [x, w], {}, name="conv_twin")
        r1 = apply_op(registry, "relu", [apply_op(registry, "bias_add", [c1, b], {})], {})
        s2 = apply_op(registry, "bias_add", [c2, b], {}, name="sum_twin")
        r2 = apply_op(registry, "sigmoid", [s2], {})
        fetches = [apply_op(registry, "reduce_sum", [r], {}) for r in (r1, r2)]
        init = global_variables_initializer()
    got, notes = run_and_explain(g, init, fetches, {x: XV}, True)
    want, _ = run_and_explain(g, init, fetches, {x: XV}, False)
    assert "merged: conv_twin" in notes
    for mine, theirs in zip(got, want):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-3)
