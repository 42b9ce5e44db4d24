"""conv2d_transpose and its gradient (opdefs/builtin/conv_transpose.yaml): the host's C++ kernels
against the python kernels and the declaration's NumPy reference, float16 through float, the
size checks, and TensorFlow's tf.nn.conv2d_transpose where it is installed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from opdefs.builtin import kernels_conv as python_kernels
from opsdk import ops
from opsdk.gradcheck import eval_reference
from opsdk.registry import load_registry
from opsdk.runtime.kernels.choice import choose_kernel

rng = np.random.default_rng(11)
REGISTRY = load_registry()

# (x shape [n, h, w, o], filter [kh, kw, c, o], strides, same, extra_h, extra_w)
CASES = [
    ((2, 7, 7, 32), (5, 5, 16, 32), (2, 2), 1, 1, 1),   # DCGAN-like: 7 -> 14
    ((2, 14, 14, 16), (5, 5, 1, 16), (2, 2), 1, 0, 1),  # one output channel, the dot tiling
    ((3, 5, 6, 20), (3, 3, 33, 20), (1, 1), 0, 0, 0),   # vector tails in c
    ((2, 4, 5, 3), (3, 2, 5, 3), (3, 2), 0, 2, 1),
    ((1, 3, 4, 7), (1, 1, 2, 7), (3, 3), 1, 2, 0),      # rows that no tap reaches stay zero
    ((2, 6, 6, 64), (4, 4, 65, 64), (2, 2), 1, 0, 0),   # large enough for both threads
]


def _attrs(strides, same, extra_h, extra_w):
    return dict(stride_h=strides[0], stride_w=strides[1], same=same, extra_h=extra_h,
                extra_w=extra_w)


def test_the_cpu_kernels_are_built():
    for op in ("conv2d_transpose", "conv2d_transpose_grad"):
        assert choose_kernel(REGISTRY.get(op)).kind == "cpu", f"{op}: run `opsdk build`"


@pytest.mark.parametrize("x_shape,f_shape,strides,same,extra_h,extra_w", CASES)
def test_kernels_agree_with_each_other_and_the_reference(x_shape, f_shape, strides, same,
                                                         extra_h, extra_w):
    x = rng.standard_normal(x_shape).astype(np.float32)
    f = rng.standard_normal(f_shape).astype(np.float32)
    attrs = _attrs(strides, same, extra_h, extra_w)
    want = python_kernels.conv2d_transpose(np, x, f, **attrs)
    (reference,) = eval_reference(REGISTRY.get("conv2d_transpose").reference, {"x": x, "filter": f},
                                  attrs)
    np.testing.assert_allclose(want, reference, rtol=1e-4, atol=1e-4)
    got = ops.conv2d_transpose(x, f, **attrs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    gy = rng.standard_normal(want.shape).astype(np.float32)
    for mine, ref in zip(ops.conv2d_transpose_grad(x, f, gy, **attrs),
                         python_kernels.conv2d_transpose_grad(np, x, f, gy, **attrs)):
        np.testing.assert_allclose(mine, ref, rtol=1e-4, atol=1e-3)


def test_the_gradient_is_the_adjoint_of_the_forward_op():
    # <conv2d_transpose(x), g> == <x, grad_x(g)> and is linear in the filter the same way.
    x = rng.standard_normal((2, 5, 4, 6))
    f = rng.standard_normal((3, 3, 4, 6))
    for strides, same, extra_h, extra_w in itertools.product([(1, 1), (2, 3)], [0, 1], [0, 1], [0]):
        if extra_h >= strides[0]:
            continue
        attrs = _attrs(strides, same, extra_h, extra_w)
        y = ops.conv2d_transpose(x, f, **attrs)
        g = rng.standard_normal(y.shape)
        grad_x, grad_f = ops.conv2d_transpose_grad(x, f, g, **attrs)
        assert np.isclose(np.sum(y * g), np.sum(x * grad_x))
        assert np.isclose(np.sum(y * g), np.sum(f * grad_f))


def test_float16_runs_through_float():
    x = rng.standard_normal((2, 4, 4, 8))
    f = rng.standard_normal((3, 3, 5, 8))
    attrs = _attrs((2, 2), 1, 1, 0)
    want = ops.conv2d_transpose(x, f, **attrs)
    got = ops.conv2d_transpose(x.astype(np.float16), f.astype(np.float16), **attrs)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-2, atol=2e-2)


def test_extras_not_below_the_strides_and_wrong_gradient_sizes_are_refused():
    x = np.zeros((1, 3, 3, 2), np.float32)
    f = np.zeros((3, 3, 4, 2), np.float32)
    # The declaration's `requires:` refuses it before the kernel (which checks it too).
    with pytest.raises(ValueError, match=r"conv2d_transpose: attrs must meet `extra_h < stride_h` "
                                         r"\(requires: at opdefs/builtin/conv_transpose\.yaml:\d+\), "
                                         r"got extra_h=2, stride_h=2"):
        ops.conv2d_transpose(x, f, stride_h=2, extra_h=2)
    with pytest.raises(ValueError, match="grad_y is 5 x 5 pixels but conv2d_transpose's y is "
                                         "3 x 3"):
        ops.conv2d_transpose_grad(x, f, np.zeros((1, 5, 5, 4), np.float32))


def test_empty_inputs_give_zeros():
    y = ops.conv2d_transpose(np.zeros((2, 3, 3, 0), np.float32), np.zeros((2, 2, 4, 0), np.float32),
                             stride_h=2, stride_w=2)
    np.testing.assert_array_equal(y, np.zeros((2, 5, 5, 4), np.float32))
    grad_x, grad_f = ops.conv2d_transpose_grad(np.ones((0, 3, 3, 2), np.float32),
                                               np.ones((2, 2, 4, 2), np.float32),
                                               np.ones((0, 3, 3, 4), np.float32))
    assert grad_x.shape == (0, 3, 3, 2)
    np.testing.assert_array_equal(grad_f, np.zeros((2, 2, 4, 2), np.float32))


@pytest.mark.parametrize("x_shape,f_shape,strides,same,extra_h,extra_w", CASES)
def test_the_op_is_tensorflows_conv2d_transpose(x_shape, f_shape, strides, same, extra_h,
                                                extra_w):
    tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed "
                             "(pip install opsdk[tf])")
    x = rng.standard_normal(x_shape)
    f = rng.standard_normal(f_shape)
    attrs = _attrs(strides, same, extra_h, extra_w)
    y = ops.conv2d_transpose(x, f, **attrs)
    # In a graph of its own: other tests may have turned TF's eager execution off.
    with tf.Graph().as_default():
        out = tf.nn.conv2d_transpose(x, f, list(y.shape), [1, *strides, 1],
                                     "SAME" if same else "VALID")
        with tf.compat.v1.Session() as sess:
            theirs = sess.run(out)
    np.testing.assert_allclose(y, theirs, rtol=1e-10, atol=1e-10)
