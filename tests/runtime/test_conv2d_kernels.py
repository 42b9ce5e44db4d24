"""conv2d's C++ kernels (opdefs/builtin/conv2d_valid.h, conv2d_filter_grad.h) on the sizes that
reach each part of their blocking, against the declaration's NumPy reference and the python
kernels, in float32 and float64 (8 lanes a vector instead of 16: other tiles) and float16
(computed in float):

- pixel tiles that run across output rows and images, and the short tiles at a chunk's end;
- chunks of pixels that end inside an image (more pixels than one chunk holds);
- several blocks of taps (a filter whose rows overflow one block), so sums are reloaded;
- output channels that fill whole vectors (sums written in y itself) or not (a scratch copy),
  and more than one block of vectors;
- filter-gradient tiles of every size left at the end of the taps (taps % 6 from 0 to 5);
- SAME and VALID, strides 1 to 3 (the input gradient's phases), batch 1, odd sizes;
- taps that meet only the padding's zeros, which the kernels skip (conv2d_common.h: Valid), in
  windows larger than the image and with strides;
- padded copies large enough to be split between threads (where the machine has a free core)."""

from __future__ import annotations

import numpy as np
import pytest

from opdefs.builtin import kernels_conv as python_kernels
from opsdk import ops
from opsdk.gradcheck import eval_reference
from opsdk.registry import load_registry
from opsdk.runtime.kernels.choice import choose_kernel

REGISTRY = load_registry()

# (x [n, h, w, c], filter [kh, kw, c, o], strides, same): the comment names what each reaches.
CASES = [
    ((1, 28, 28, 1), (5, 5, 1, 32), (1, 1), 1),      # batch 1, deep-MNIST's first layer
    ((3, 14, 14, 32), (5, 5, 32, 64), (1, 1), 1),    # chunks end inside images; 2 tap blocks
    ((1, 13, 11, 64), (5, 5, 64, 48), (1, 1), 1),    # 3 vectors of o; 4 tap blocks
    ((2, 9, 7, 16), (3, 3, 16, 70), (2, 2), 1),      # two blocks of vectors, a 6-channel tail
    ((2, 15, 13, 7), (3, 5, 7, 17), (2, 2), 0),      # odd sizes, VALID, taps % 6 = 3
    ((1, 7, 9, 5), (2, 2, 5, 33), (1, 2), 0),        # taps % 6 = 2, o one past 2 vectors
    ((2, 6, 5, 1), (1, 1, 1, 16), (1, 1), 1),        # one tap
    ((1, 12, 12, 4), (4, 5, 4, 24), (2, 1), 1),      # taps % 6 = 2, even kernel in SAME
    ((4, 5, 6, 3), (3, 3, 3, 8), (1, 1), 1),         # taps % 6 = 3, o half a vector
    ((1, 20, 20, 9), (3, 3, 9, 64), (1, 1), 0),      # taps % 6 = 3, sums written in y
    ((1, 6, 6, 11), (2, 2, 11, 16), (2, 2), 0),      # taps % 6 = 2, a stride tiling exactly
    ((1, 8, 8, 5), (1, 1, 5, 16), (1, 1), 1),        # taps % 6 = 5
    ((1, 8, 8, 2), (2, 1, 2, 16), (1, 1), 1),        # taps % 6 = 4
    ((1, 8, 8, 3), (2, 2, 3, 16), (1, 1), 1),        # taps % 6 = 0
    ((4, 40, 40, 1), (5, 5, 1, 64), (1, 1), 1),      # padded copies of over 1 MB per thread
    ((2, 3, 4, 16), (5, 6, 16, 16), (1, 1), 1),      # windows larger than the image: taps skipped
    ((3, 10, 9, 8), (7, 7, 8, 32), (3, 2), 1),       # skipped taps with strides, tiles across images
]


def _attrs(strides, same):
    return dict(stride_h=strides[0], stride_w=strides[1], same=same)


def test_the_cpu_kernels_are_built():
    for op in ("conv2d", "conv2d_grad"):
        assert choose_kernel(REGISTRY.get(op)).kind == "cpu", f"{op}: run `opsdk build`"


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-4), (np.float64, 1e-10)])
@pytest.mark.parametrize("x_shape,f_shape,strides,same", CASES)
def test_kernels_agree_with_the_reference(x_shape, f_shape, strides, same, dtype, tol):
    rng = np.random.default_rng(sum(x_shape) * 31 + sum(f_shape))
    x = rng.standard_normal(x_shape).astype(dtype)
    f = rng.standard_normal(f_shape).astype(dtype)
    attrs = _attrs(strides, same)
    (reference,) = eval_reference(REGISTRY.get("conv2d").reference, {"x": x, "filter": f}, attrs)
    got = ops.conv2d(x, f, **attrs)
    assert got.dtype == dtype and got.shape == reference.shape
    np.testing.assert_allclose(got, reference, rtol=tol, atol=tol * 10)
    gy = rng.standard_normal(got.shape).astype(dtype)
    grads = ops.conv2d_grad(x, f, gy, **attrs)
    for mine, theirs in zip(grads, python_kernels.conv2d_grad(np, x, f, gy, **attrs)):
        assert mine.dtype == dtype and mine.shape == theirs.shape
        np.testing.assert_allclose(mine, theirs, rtol=tol, atol=tol * 100)


@pytest.mark.parametrize("x_shape,f_shape,strides,same", CASES[:3])
def test_float16_runs_through_float(x_shape, f_shape, strides, same):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape).astype(np.float16)
    f = (rng.standard_normal(f_shape) * 0.1).astype(np.float16)
    attrs = _attrs(strides, same)
    want = python_kernels.conv2d(np, x.astype(np.float32), f.astype(np.float32), **attrs)
    got = ops.conv2d(x, f, **attrs)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=2e-2)


def test_the_input_gradient_of_a_one_channel_image_equals_the_reference():
    # The input gradient of a 1-channel image takes the dot tiling (o below half a vector).
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 11, 9, 1)).astype(np.float32)
    f = rng.standard_normal((5, 5, 1, 32)).astype(np.float32)
    gy = rng.standard_normal((2, 11, 9, 32)).astype(np.float32)
    grad_x, _ = ops.conv2d_grad(x, f, gy, stride_h=1, stride_w=1, same=1)
    want, _ = python_kernels.conv2d_grad(np, x, f, gy, stride_h=1, stride_w=1, same=1)
    np.testing.assert_allclose(grad_x, want, rtol=1e-4, atol=1e-3)
