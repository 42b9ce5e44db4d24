"""opsdk.custom_gradient (tf.custom_gradient): the author's gradient in place of the derived one,
the values TensorFlow 2.21's compat.v1 gave on the same script, and clear errors for what it
cannot take (opsdk/runtime/autodiff/custom_gradient.py)."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk
from opsdk import ops
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.autodiff import custom_gradient as module
from opsdk.runtime.io.serialize import export_graph, import_graph


@opsdk.custom_gradient
def clip_grad(x):
    def grad(dy):
        return ops.maximum(ops.minimum(dy, 0.5), -0.5)
    return ops.identity(x), grad


@opsdk.custom_gradient
def log1pexp(x):
    e = ops.exp(x)

    def grad(dy):
        return dy * (1.0 - 1.0 / (1.0 + e))
    return ops.log(1.0 + e), grad


@opsdk.custom_gradient
def two(x, y):
    def grad(dz0, dz1):
        return dz0 * 2.0 + dz1, dz1 * 3.0
    return [x * y, x + y], grad


def test_values_and_gradients_are_the_authors_as_tensorflows_were():
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float64", [3], name="x")
        y = opsdk.placeholder("float64", [3], name="y")
        a = clip_grad(x * 3.0)
        b = log1pexp(x * 100.0)  # the derived gradient is nan at 300 (inf / inf); this one is not
        c0, c1 = two(x, y)
        loss = ops.reduce_sum(a * a) + ops.reduce_sum(b) + ops.reduce_sum(c0 * 2.0 + c1)
        gx, gy = opsdk.gradients(loss, [x, y])
    with opsdk.Session(g) as sess:
        got = sess.run([a, b, c0, c1, gx, gy], {x: [0.1, -2.0, 3.0], y: [1.0, 2.0, 3.0]})
    np.testing.assert_allclose(got[0], [0.3, -6.0, 9.0], rtol=1e-15)
    np.testing.assert_allclose(got[1], [10.000045398899218, 0.0, 300.0], rtol=1e-15)
    np.testing.assert_allclose(got[2], [0.1, -4.0, 9.0], rtol=1e-15)
    np.testing.assert_allclose(got[4], [106.49546021312976, 3.5, 106.5], rtol=1e-14)
    np.testing.assert_array_equal(got[5], [3.0, 3.0, 3.0])


def test_an_exported_graph_runs_and_differentiating_it_needs_the_function():
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float64", [2], name="x")
        y = clip_grad(x * 3.0)
    copy = import_graph(export_graph(g))
    (node,) = [op for op in copy.operations if op.type == module.CUSTOM_GRADIENT]
    with opsdk.Session(copy) as sess:
        np.testing.assert_array_equal(sess.run(node.outputs[0], {"x:0": [1.0, 2.0]}), [3.0, 6.0])
    saved = module._FUNCTIONS.pop(node.attrs["function"])
    try:
        with copy.as_default(), pytest.raises(OpsdkError, match="gradient function 'clip_grad' "
                                                               "is not in this process"):
            opsdk.gradients(node.outputs[0], [copy.get_tensor("x:0")])
    finally:
        module._FUNCTIONS[node.attrs["function"]] = saved


def test_mistakes_are_named():
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float64", [2], name="x")

        @opsdk.custom_gradient
        def no_grad(v):
            return v * 2.0

        @opsdk.custom_gradient
        def with_variables(v):
            def grad(dy, variables=None):
                return dy, []
            return v * 2.0, grad

        @opsdk.custom_gradient
        def two_for_one(v):
            return v * 2.0, lambda dy: (dy, dy)

        @opsdk.custom_gradient
        def wrong_dtype(v):
            return v * 2.0, lambda dy: ops.cast(dy, dtype="float32")

        with pytest.raises(OpsdkError, match="no_grad must return \\(result, grad_fn\\)"):
            no_grad(x)
        with pytest.raises(OpsdkError, match="with_variables's grad_fn takes `variables`"):
            with_variables(x)
        with pytest.raises(OpsdkError, match="returned 2 gradient\\(s\\) for 1 tensor"):
            opsdk.gradients(two_for_one(x), [x])
        with pytest.raises(OpsdkError, match="must be a float64 tensor or None, got float32"):
            opsdk.gradients(wrong_dtype(x), [x])


def test_inside_a_loop_the_authors_gradient_and_an_overridden_one_hold_too():
    # the loop's gradient replays its body: the replay took the node for one with effects
    # (custom_gradient) and dropped the override (gradient_override_map), the op's own
    # gradient then flowing in silence
    from opsdk.runtime.autodiff.gradients import register_gradient
    register_gradient("test_loop_straight_through")(lambda op, grad: grad)
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float64", [3], name="x")

        def body(i, v):
            with g.gradient_override_map({"round": "test_loop_straight_through"}):
                r = ops.round(v * 1.5)
            return i + 1, clip_grad(r) + v

        _, y = opsdk.while_loop(lambda i, v: i < 2, body, [opsdk.constant(0), x])
        (gx,) = opsdk.gradients(ops.reduce_sum(y * y), [x])
    with opsdk.Session(g) as sess:
        got = sess.run(gx, {x: [0.2, -1.0, 2.0]})
    # each iteration: v' = round(1.5 v) + v; through the straight-through round and the
    # clipped identity the gradient of v' by v is 1.5 * clip(dv') + dv', clipped to [-0.5, 0.5]
    v0 = np.array([0.2, -1.0, 2.0])
    v1 = np.round(1.5 * v0) + v0
    v2 = np.round(1.5 * v1) + v1
    d2 = 2 * v2
    d1 = 1.5 * np.clip(d2, -0.5, 0.5) + d2
    d0 = 1.5 * np.clip(d1, -0.5, 0.5) + d1
    np.testing.assert_allclose(got, d0, rtol=1e-14)
