"""The fold pass rewrites pow(x, 2) to square(x), and its gradient pow_grad to square_grad, as
TensorFlow's arithmetic optimizer rewrites Pow(x, 2) to Square: only for a constant exponent of
one element equal to 2 that broadcasts to nothing larger than x, and pow_grad only where nobody
reads the exponent's gradient. Results equal those of the graph as written (folding off)."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.exec.session import Session, SessionConfig
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph, constant, placeholder

XV = np.random.default_rng(0).uniform(-2, 2, (6, 5)).astype(np.float32)
WV = np.random.default_rng(1).uniform(-1, 1, (5, 5)).astype(np.float32)


def _graph(registry, exponent, wrt_exponent=False):
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [None, 5], name="x")
        w = Variable(WV, name="w")
        e = exponent()
        d = apply_op(registry, "sub", [apply_op(registry, "matmul", [x, w], {}), x], {})
        p = apply_op(registry, "pow", [d, e], {}, name="p")
        loss = apply_op(registry, "reduce_mean", [p], {})
        grads = gradients(loss, [w, e] if wrt_exponent else [w])
        init = global_variables_initializer()
    return g, x, init, [loss, *grads]


def run_and_explain(graph, init, fetches, feed, fold):
    """Run `init`, then `fetches` with `feed`, in a session with constant folding (and the fold
    pass's rewrites) on or off: the values, and the session's explanation of that run."""
    with Session(graph, SessionConfig(constant_folding=fold)) as sess:
        sess.run(init)
        return sess.run(fetches, feed), str(sess.explain(fetches, feed, show=False))


def _run(registry, exponent, fold, wrt_exponent=False):
    g, x, init, fetches = _graph(registry, exponent, wrt_exponent)
    return run_and_explain(g, init, fetches, {x: XV}, fold)


def _variable_two():
    return Variable(np.float32(2.0), name="e")


def _two():
    return constant(2.0, dtype="float32")


@pytest.mark.parametrize("exponent, rewritten", [
    (_two, "p (pow) -> square, gradients/p_grad (pow_grad) -> square_grad"),
    (lambda: constant([2.0], dtype="float32"), "p (pow) -> square"),    # one element, [1]
    (lambda: constant([[2.0]], dtype="float32"), "p (pow) -> square"),  # [1, 1] on [?, 5]
])
def test_pow_of_a_constant_two_is_square_with_equal_results(registry, exponent, rewritten):
    got, notes = _run(registry, exponent, fold=True)
    want, plain = _run(registry, exponent, fold=False)
    assert f"rewritten: {rewritten}" in notes
    assert "rewritten" not in plain
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("exponent", [
    lambda: constant(3.0, dtype="float32"),                           # not 2
    lambda: constant([2.0, 2.0, 2.0, 2.0, 2.0], dtype="float32"),     # more than one element
    lambda: constant([[[2.0]]], dtype="float32"),                     # broadcasts x up a dim
    lambda: _variable_two(),                                          # not a constant
])
def test_other_exponents_stay_pow(registry, exponent):
    got, notes = _run(registry, exponent, fold=True)
    want, _ = _run(registry, exponent, fold=False)
    assert "rewritten" not in notes
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_the_gradient_of_a_read_exponent_keeps_pow_grad(registry):
    got, notes = _run(registry, _two, fold=True, wrt_exponent=True)
    want, _ = _run(registry, _two, fold=False, wrt_exponent=True)
    assert "rewritten: p (pow) -> square\n" in notes + "\n"
    assert "pow_grad) -> square_grad" not in notes
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_fed_constant_exponent_is_the_fed_value(registry):
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [3], name="x")
        e = constant(2.0, dtype="float32")
        y = apply_op(registry, "pow", [x, e], {})
    xs = np.array([1.0, 2.0, 3.0], np.float32)
    with Session(g) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: xs, e: np.float32(3.0)}), [1.0, 8.0, 27.0])
        assert "rewritten" not in str(sess.explain(y, {x: xs, e: np.float32(3.0)}, show=False))
        np.testing.assert_array_equal(sess.run(y, {x: xs}), [1.0, 4.0, 9.0])
