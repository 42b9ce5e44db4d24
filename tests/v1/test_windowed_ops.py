"""conv2d and the pools: the host's C++ kernels against the python kernels (the GPUs' and the
reference's) on sizes that use both cores and on ReLU outputs full of ties, their size checks,
and tf.nn's results and gradients against TensorFlow's where it is installed."""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest

from opdefs.builtin import kernels_conv as python_kernels
from opsdk import ops
from opsdk.registry import load_registry
from opsdk.runtime.kernels.choice import choose_kernel

rng = np.random.default_rng(3)
POOL_ATTRS = [dict(ksize_h=kh, ksize_w=kw, stride_h=s, stride_w=s, same=same)
              for kh, kw, s, same in itertools.product([2, 3], [2, 3], [1, 2], [0, 1])]


@pytest.fixture(scope="module", autouse=True)
def built_cpu_kernels():
    registry = load_registry()
    for op in ("conv2d", "conv2d_grad", "max_pool", "max_pool_grad"):
        if choose_kernel(registry.get(op)).kind != "cpu":
            pytest.fail(f"{op}'s cpu kernel is not built: run `opsdk build`")


@pytest.mark.parametrize("shape,kernel,strides,same", [
    ((8, 28, 28, 1), (5, 5, 1, 32), (1, 1), 1),     # the input gradient takes the dot tiling
    ((6, 14, 15, 32), (5, 5, 32, 64), (1, 1), 1),   # large enough for both threads
    ((4, 17, 16, 24), (3, 3, 24, 40), (2, 2), 0),
    ((3, 9, 9, 70), (2, 3, 70, 5), (2, 1), 1),
    ((2, 10, 9, 16), (1, 1, 16, 16), (3, 2), 0),    # phases of the strides that no tap reaches
    ((2, 11, 13, 5), (2, 4, 5, 3), (3, 5), 1),
])
def test_conv2d_kernels_agree(shape, kernel, strides, same):
    x = rng.standard_normal(shape).astype(np.float32)
    f = rng.standard_normal(kernel).astype(np.float32)
    attrs = dict(stride_h=strides[0], stride_w=strides[1], same=same)
    want = python_kernels.conv2d(np, x, f, **attrs)
    np.testing.assert_allclose(ops.conv2d(x, f, **attrs), want, rtol=1e-4, atol=1e-4)
    gy = rng.standard_normal(want.shape).astype(np.float32)
    for got, ref in zip(ops.conv2d_grad(x, f, gy, **attrs),
                        python_kernels.conv2d_grad(np, x, f, gy, **attrs)):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("attrs", POOL_ATTRS, ids=lambda a: "-".join(map(str, a.values())))
def test_max_pool_kernels_agree_on_ties(attrs):
    x = np.maximum(rng.standard_normal((3, 9, 10, 5)), 0).astype(np.float32)  # ~half zeros
    x[1] = 0.0
    y = ops.max_pool(x, **attrs)
    np.testing.assert_array_equal(y, python_kernels.max_pool(np, x, **attrs))
    gy = rng.standard_normal(y.shape).astype(np.float32)
    np.testing.assert_allclose(ops.max_pool_grad(x, y, gy, **attrs),
                               python_kernels.max_pool_grad(np, x, y, gy, **attrs), rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("relu", [0, 1])
@pytest.mark.parametrize("attrs", [POOL_ATTRS[0], POOL_ATTRS[-1], POOL_ATTRS[13]],
                         ids=lambda a: "-".join(map(str, a.values())))
def test_max_pool_kernels_agree_on_both_threads(attrs, relu):
    # Enough images that the threads split them (the deep-MNIST layers' sizes), windows that
    # overlap and windows that SAME's padding clips: each thread zeroes its own images. With
    # relu=1, the windows whose maximum is 0 (all of image 1) pass no gradient.
    x = np.maximum(rng.standard_normal((20, 28, 28, 32)), 0).astype(np.float32)
    x[1] = 0.0
    y = ops.max_pool(x, **attrs)
    np.testing.assert_array_equal(y, python_kernels.max_pool(np, x, **attrs))
    gy = rng.standard_normal(y.shape).astype(np.float32)
    got = ops.max_pool_grad(x, y, gy, relu=relu, **attrs)
    np.testing.assert_allclose(got, python_kernels.max_pool_grad(np, x, y, gy, relu=relu, **attrs),
                               rtol=1e-6, atol=1e-6)
    assert (got[1] == 0).all() if relu else (got[1] != 0).any()


def test_gradient_kernels_check_the_sizes_they_are_given():
    x = np.zeros((1, 6, 6, 2), np.float32)
    with pytest.raises(ValueError, match="grad_y is 5 x 6 pixels but conv2d's y would be 6 x 6"):
        ops.conv2d_grad(x, np.zeros((3, 3, 2, 4), np.float32), np.zeros((1, 5, 6, 4), np.float32))
    wrong = np.zeros((1, 2, 3, 2), np.float32)
    with pytest.raises(ValueError, match="max_pool's y would be 3 x 3"):
        ops.max_pool_grad(x, wrong, wrong)


def test_a_window_larger_than_a_valid_image_is_refused():
    with pytest.raises(Exception, match="would have size"):
        ops.conv2d(np.zeros((1, 2, 5, 1), np.float32), np.zeros((3, 3, 1, 1), np.float32), same=0)


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow is not installed (pip install opsdk[tf])")
def test_tf_nn_windows_and_gradients_equal_tensorflows():
    import tensorflow.compat.v1 as real
    import opsdk.v1 as ours
    real.disable_eager_execution()
    x = np.maximum(rng.standard_normal((2, 9, 8, 3)), 0).astype(np.float32)
    f = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)

    def build(tf):
        xs, fs = tf.constant(x), tf.constant(f)
        outs = [tf.nn.conv2d(xs, fs, [1, 1, 1, 1], "SAME"), tf.nn.conv2d(xs, fs, [1, 2, 2, 1], "VALID"),
                tf.nn.max_pool(xs, [1, 3, 3, 1], [1, 2, 2, 1], "SAME"),
                tf.nn.avg_pool(xs, [1, 2, 3, 1], [1, 1, 2, 1], "SAME")]
        loss = sum(tf.reduce_sum(o * o) for o in outs)
        return outs + tf.gradients(loss, [xs, fs])

    results = []
    for tf in (real, ours):
        with tf.Graph().as_default():
            fetches = build(tf)
            with tf.Session() as sess:
                results.append(sess.run(fetches))
    for theirs, mine in zip(*results):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-3)
