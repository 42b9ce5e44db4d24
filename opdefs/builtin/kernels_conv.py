"""Python kernels of conv2d, max_pool and avg_pool and their gradients (conv.yaml), NHWC.

Windows are read as a strided view of the (padded) input, `[n, oh, ow, kh, kw, c]`, without
copying (`as_strided`), so the forward passes are one tensordot or one reduction; the input
gradients scatter the window gradients back with one strided add per window offset (kh * kw
adds, each over the whole batch). Padding follows TensorFlow: SAME gives ceil(size / stride)
outputs and puts the odd padding element after.
"""

from __future__ import annotations

import numpy as np


def out_size(size: int, k: int, stride: int, padding: str) -> tuple[int, int]:
    """(output size, padding before) of one spatial axis, as TensorFlow computes them."""
    if padding == "VALID":
        return (size - k) // stride + 1 if size >= k else 0, 0
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2


def _geometry(x, kh, kw, strides, padding):
    (oh, top), (ow, left) = (out_size(x.shape[1], kh, strides[0], padding),
                             out_size(x.shape[2], kw, strides[1], padding))
    return oh, ow, top, left


def _padded(xp, x, kh, kw, strides, padding, fill):
    oh, ow, top, left = _geometry(x, kh, kw, strides, padding)
    h = max((oh - 1) * strides[0] + kh, x.shape[1] + top)
    w = max((ow - 1) * strides[1] + kw, x.shape[2] + left)
    out = xp.full((x.shape[0], h, w, x.shape[3]), fill, dtype=x.dtype)
    out[:, top:top + x.shape[1], left:left + x.shape[2], :] = x
    return out, oh, ow, top, left


def _windows(xp, padded, oh, ow, kh, kw, strides):
    n, _, _, c = padded.shape
    s = padded.strides
    shape = (n, oh, ow, kh, kw, c)
    view = (s[0], s[1] * strides[0], s[2] * strides[1], s[1], s[2], s[3])
    return xp.lib.stride_tricks.as_strided(padded, shape=shape, strides=view)


def _scatter(xp, cols, x_shape, kh, kw, strides, padding, dtype):
    """Sum window values `cols` [n, oh, ow, kh, kw, c] back onto the input positions."""
    probe = xp.empty(x_shape, dtype=dtype)
    padded, oh, ow, top, left = _padded(xp, probe, kh, kw, strides, padding, 0)
    padded[...] = 0
    sh, sw = strides
    for i in range(kh):
        for j in range(kw):
            padded[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw, :] += cols[:, :, :, i, j, :]
    return padded[:, top:top + x_shape[1], left:left + x_shape[2], :]


def conv2d(xp, x, filter, stride_h, stride_w, same):
    strides, padding = (stride_h, stride_w), "SAME" if same else "VALID"
    kh, kw = filter.shape[0], filter.shape[1]
    padded, oh, ow, _, _ = _padded(xp, x, kh, kw, strides, padding, 0)
    win = _windows(xp, padded, oh, ow, kh, kw, strides)
    return xp.ascontiguousarray(xp.tensordot(win, filter, axes=([3, 4, 5], [0, 1, 2])).astype(x.dtype))


def conv2d_bias(xp, x, filter, bias, stride_h, stride_w, same, relu):
    y = conv2d(xp, x, filter, stride_h, stride_w, same) + bias
    return xp.ascontiguousarray(xp.maximum(y, xp.zeros_like(y)) if relu else y)


def conv2d_grad(xp, x, filter, grad_y, stride_h, stride_w, same):
    grad_filter = conv2d_grad_filter(xp, x, filter, grad_y, stride_h, stride_w, same)
    strides, padding = (stride_h, stride_w), "SAME" if same else "VALID"
    kh, kw = filter.shape[0], filter.shape[1]
    cols = xp.tensordot(grad_y, filter, axes=([3], [3]))  # [n, oh, ow, kh, kw, c]
    grad_x = _scatter(xp, cols, x.shape, kh, kw, strides, padding, x.dtype)
    return xp.ascontiguousarray(grad_x), grad_filter


def conv2d_grad_filter(xp, x, filter, grad_y, stride_h, stride_w, same):
    strides, padding = (stride_h, stride_w), "SAME" if same else "VALID"
    kh, kw = filter.shape[0], filter.shape[1]
    padded, oh, ow, _, _ = _padded(xp, x, kh, kw, strides, padding, 0)
    win = _windows(xp, padded, oh, ow, kh, kw, strides)
    grad_filter = xp.tensordot(win, grad_y, axes=([0, 1, 2], [0, 1, 2])).astype(x.dtype)
    return xp.ascontiguousarray(grad_filter)


def _window_attrs(ksize_h, ksize_w, stride_h, stride_w, same):
    """The pooling ops' int attrs as (ksize, strides, padding)."""
    return (ksize_h, ksize_w), (stride_h, stride_w), "SAME" if same else "VALID"


def max_pool(xp, x, ksize_h, ksize_w, stride_h, stride_w, same):
    ksize, strides, padding = _window_attrs(ksize_h, ksize_w, stride_h, stride_w, same)
    padded, oh, ow, _, _ = _padded(xp, x, ksize[0], ksize[1], strides, padding, -np.inf)
    win = _windows(xp, padded, oh, ow, ksize[0], ksize[1], strides)
    return xp.ascontiguousarray(win.max(axis=(3, 4)))


def max_pool_grad(xp, x, y, grad_y, ksize_h, ksize_w, stride_h, stride_w, same, relu=0):
    (kh, kw), strides, padding = _window_attrs(ksize_h, ksize_w, stride_h, stride_w, same)
    if relu:
        grad_y = xp.where(y > 0, grad_y, xp.zeros_like(grad_y))
    padded, oh, ow, _, _ = _padded(xp, x, kh, kw, strides, padding, -np.inf)
    win = _windows(xp, padded, oh, ow, kh, kw, strides)
    n, c = x.shape[0], x.shape[3]
    flat = xp.moveaxis(win, 5, 3).reshape(n, oh, ow, c, kh * kw)
    first = xp.argmax(flat, axis=-1)  # the first maximum of each window takes the gradient
    onehot = (xp.arange(kh * kw) == first[..., None]).astype(x.dtype) * grad_y[..., None]
    cols = xp.moveaxis(onehot.reshape(n, oh, ow, c, kh, kw), 3, 5)
    return xp.ascontiguousarray(_scatter(xp, cols, x.shape, kh, kw, strides, padding, x.dtype))


def max_pool_grad_bias(xp, x, y, grad_y, ksize_h, ksize_w, stride_h, stride_w, same, relu=0):
    grad_x = max_pool_grad(xp, x, y, grad_y, ksize_h, ksize_w, stride_h, stride_w, same, relu)
    return grad_x, xp.sum(grad_x, axis=(0, 1, 2), dtype=grad_x.dtype)


def _counts(xp, x, ksize, strides, padding):
    """How many real (unpadded) inputs each window covers: TF's SAME average divides by it."""
    ones = xp.ones((1, x.shape[1], x.shape[2], 1), dtype=x.dtype)
    padded, oh, ow, _, _ = _padded(xp, ones, ksize[0], ksize[1], strides, padding, 0)
    return _windows(xp, padded, oh, ow, ksize[0], ksize[1], strides).sum(axis=(3, 4))


def avg_pool(xp, x, ksize_h, ksize_w, stride_h, stride_w, same):
    ksize, strides, padding = _window_attrs(ksize_h, ksize_w, stride_h, stride_w, same)
    padded, oh, ow, _, _ = _padded(xp, x, ksize[0], ksize[1], strides, padding, 0)
    win = _windows(xp, padded, oh, ow, ksize[0], ksize[1], strides)
    return xp.ascontiguousarray((win.sum(axis=(3, 4)) / _counts(xp, x, ksize, strides, padding)
                                 ).astype(x.dtype))


def avg_pool_grad(xp, x, grad_y, ksize_h, ksize_w, stride_h, stride_w, same):
    ksize, strides, padding = _window_attrs(ksize_h, ksize_w, stride_h, stride_w, same)
    kh, kw = ksize
    share = grad_y / _counts(xp, x, ksize, strides, padding)
    cols = xp.broadcast_to(share[:, :, :, None, None, :], (*share.shape[:3], kh, kw, share.shape[3]))
    return xp.ascontiguousarray(_scatter(xp, cols, x.shape, kh, kw, strides, padding, x.dtype))



def _transpose_image(op, x_shape, kh, kw, stride_h, stride_w, same, extra_h, extra_w):
    """conv2d_transpose's y height and width (conv_transpose.yaml); `op` names the refusal."""
    if extra_h >= stride_h or extra_w >= stride_w:
        raise ValueError(f"{op}: extra_h ({extra_h}) and extra_w ({extra_w}) must be below the "
                         f"strides ({stride_h}, {stride_w})")
    return ((x_shape[1] - 1) * stride_h + 1 + (0 if same else kh - 1) + extra_h,
            (x_shape[2] - 1) * stride_w + 1 + (0 if same else kw - 1) + extra_w)


def conv2d_transpose(xp, x, filter, stride_h, stride_w, same, extra_h, extra_w):
    """conv2d's input gradient: x's windows spread back onto the image."""
    strides, padding = (stride_h, stride_w), "SAME" if same else "VALID"
    kh, kw = filter.shape[0], filter.shape[1]
    out_h, out_w = _transpose_image("conv2d_transpose", x.shape, kh, kw, stride_h, stride_w, same,
                                    extra_h, extra_w)
    cols = xp.tensordot(x, filter, axes=([3], [3]))  # [n, h, w, kh, kw, c]
    shape = (x.shape[0], out_h, out_w, filter.shape[2])
    return xp.ascontiguousarray(_scatter(xp, cols, shape, kh, kw, strides, padding, x.dtype))


def conv2d_transpose_grad(xp, x, filter, grad_y, stride_h, stride_w, same, extra_h, extra_w):
    """(conv2d of grad_y, conv2d's filter gradient with grad_y as the image and x as its
    output gradient)."""
    strides, padding = (stride_h, stride_w), "SAME" if same else "VALID"
    kh, kw = filter.shape[0], filter.shape[1]
    expect = _transpose_image("conv2d_transpose_grad", x.shape, kh, kw, stride_h, stride_w, same,
                              extra_h, extra_w)
    if tuple(grad_y.shape[1:3]) != expect:
        raise ValueError(f"conv2d_transpose_grad: grad_y is {grad_y.shape[1]} x "
                         f"{grad_y.shape[2]} pixels but conv2d_transpose's y is {expect[0]} x "
                         f"{expect[1]}")
    padded, oh, ow, _, _ = _padded(xp, grad_y, kh, kw, strides, padding, 0)
    win = _windows(xp, padded, oh, ow, kh, kw, strides)
    grad_x = xp.tensordot(win, filter, axes=([3, 4, 5], [0, 1, 2])).astype(x.dtype)
    grad_filter = xp.tensordot(win, x, axes=([0, 1, 2], [0, 1, 2])).astype(x.dtype)
    return xp.ascontiguousarray(grad_x), xp.ascontiguousarray(grad_filter)
