"""The fold pass folds relu_grad into the max_pool_grad it reads (relu=1: a window's gradient
counts only where its maximum is positive), for max_pool(relu(.)) whether relu_grad reads the
relu's input or its output (after the conv2d_bias rewrite). Results equal those of the graph as
written (folding off); where the pool's gradient has another reader, both nodes stay."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph, placeholder

from test_pow_square import run_and_explain

rng = np.random.default_rng(11)
XV = rng.standard_normal((4, 12, 10, 3)).astype(np.float32)
WV = rng.standard_normal((3, 3, 3, 8)).astype(np.float32)
BV = rng.standard_normal(8).astype(np.float32)
POOL = {"ksize_h": 3, "ksize_w": 2, "stride_h": 2, "stride_w": 2, "same": 1}


def _run(registry, fold, conv, fetch_pool_grad=False):
    """max_pool(relu(.)) of a convolution with a bias (conv2d_bias after folding: relu_grad reads
    the pool's input) or of x times a variable (relu_grad reads the relu's input), with the
    gradients of the variables."""
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [None, 12, 10, 3], name="x")
        w, b, v = Variable(WV, name="w"), Variable(BV, name="b"), Variable(np.float32(1.5), name="v")
        if conv:
            pre = apply_op(registry, "conv2d", [x, w], {}, name="conv")
        else:
            pre = apply_op(registry, "mul", [x, v], {}, name="scaled")
        s = apply_op(registry, "add", [pre, b], {}, name="sum") if conv else pre
        r = apply_op(registry, "relu", [s], {}, name="relu")
        p = apply_op(registry, "max_pool", [r], POOL, name="pool")
        loss = apply_op(registry, "reduce_sum", [apply_op(registry, "square", [p], {})], {})
        wrt = ([w, b] if conv else [x, v]) + ([r] if fetch_pool_grad else [])
        fetches = [loss, *gradients(loss, wrt)]  # r's gradient is the pool's
        init = global_variables_initializer()
    return run_and_explain(g, init, fetches, {x: XV}, fold)


@pytest.mark.parametrize("conv", [True, False])
def test_relu_grad_folds_into_the_pools_gradient(registry, conv):
    got, notes = _run(registry, True, conv)
    want, plain = _run(registry, False, conv)
    assert "(relu_grad) -> max_pool_grad" in notes
    assert "(relu_grad) -> max_pool_grad" not in plain
    for mine, theirs in zip(got, want):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-3)


def test_a_read_pool_gradient_keeps_relu_grad(registry):
    got, notes = _run(registry, True, True, fetch_pool_grad=True)
    want, _ = _run(registry, False, True, fetch_pool_grad=True)
    assert "(relu_grad) -> max_pool_grad" not in notes
    for mine, theirs in zip(got, want):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-3)
