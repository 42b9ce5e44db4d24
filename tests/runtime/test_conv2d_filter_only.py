"""The fold pass runs conv2d_grad_filter in place of a conv2d_grad whose grad_x nobody reads (a
first layer's: its input is fed), as TensorFlow's graph holds Conv2DBackpropFilter alone there.
Results equal those of the graph as written (folding off); where the input's gradient is read,
the node stays whole."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph, placeholder

from test_pow_square import run_and_explain

rng = np.random.default_rng(0)
XV = rng.standard_normal((4, 12, 11, 1)).astype(np.float32)
WV = rng.standard_normal((5, 5, 1, 8)).astype(np.float32)


def _run(registry, fold, wrt_x, attrs):
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [None, 12, 11, 1], name="x")
        w = Variable(WV, name="w")
        y = apply_op(registry, "conv2d", [x, w], attrs, name="conv")
        loss = apply_op(registry, "reduce_sum", [apply_op(registry, "square", [y], {})], {})
        fetches = [loss, *gradients(loss, [w, x] if wrt_x else [w])]
        init = global_variables_initializer()
    return run_and_explain(g, init, fetches, {x: XV}, fold)


@pytest.mark.parametrize("attrs", [{}, {"stride_h": 2, "stride_w": 3, "same": 0}])
def test_a_fed_inputs_conv2d_gradient_is_the_filters_alone(registry, attrs):
    got, notes = _run(registry, True, False, attrs)
    want, plain = _run(registry, False, False, attrs)
    assert "gradients/conv_grad (conv2d_grad) -> conv2d_grad_filter" in notes
    assert "conv2d_grad_filter" not in plain
    for mine, theirs in zip(got, want):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-4)


def test_a_read_input_gradient_keeps_conv2d_grad_whole(registry):
    got, notes = _run(registry, True, True, {})
    want, _ = _run(registry, False, True, {})
    assert "conv2d_grad_filter" not in notes
    for mine, theirs in zip(got, want):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-4)
