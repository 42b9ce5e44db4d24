"""More of `tf.image`, made of ops opsdk.v1 already has (so gradients flow where TF's do):
`total_variation`, `image_gradients`, `sobel_edges`, `psnr`, `ssim`, `adjust_gamma`, the YUV
and YIQ colour spaces, `resize_bicubic`, `resize_area`, `extract_image_patches` (also at the top
level, as TF1's), `non_max_suppression`, `crop_and_resize` and the name `transpose`
(`tf.image.random_crop` is tf.random_crop, opsdk/v1/namespaces.py).

Patches are a convolution with a one-hot filter (each output channel copies one input pixel of
the window, nn._extract_patches, which max_pool_with_argmax shares), so strides, rates and
padding are conv2d's own; SSIM's Gaussian window is a depthwise convolution, as TensorFlow
computes it.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import args
from opsdk.v1 import image as _image
from opsdk.v1 import math_ops as _m
from opsdk.v1 import nn as _nn
from opsdk.v1.composed import gather_nd, logical_and, pad, tensordot
from opsdk.v1.tensors import convert_to_tensor as _t


def _batched(who: str, images: Any, rank: int = 4) -> Any:
    x = _t(images)
    if x.shape is None or len(x.shape) != rank:
        raise OpsdkError(f"image.{who}: give images of rank {rank} ([batch, height, width, "
                         f"channels]), got shape {None if x.shape is None else list(x.shape)}")
    return x


def total_variation(images: Any, name: Optional[str] = None) -> Any:
    """The sum of the absolute differences of neighbouring pixels, down and across: a number
    per image of [batch, h, w, c], one number for [h, w, c]."""
    x = _t(images)
    if x.shape is None or len(x.shape) not in (3, 4):
        raise OpsdkError("image.total_variation: give [height, width, channels] or [batch, "
                         "height, width, channels] images")
    lead = len(x.shape) - 3
    down = _m.abs(x[(slice(None),) * lead + (slice(1, None),)]
                  - x[(slice(None),) * lead + (slice(None, -1),)])
    across = _m.abs(x[(slice(None),) * (lead + 1) + (slice(1, None),)]
                    - x[(slice(None),) * (lead + 1) + (slice(None, -1),)])
    axes = [-3, -2, -1]
    return _ops.add(_m.reduce_sum(down, axes), _m.reduce_sum(across, axes), name=name)


def image_gradients(image: Any) -> tuple[Any, Any]:
    """(dy, dx) of [batch, h, w, c] images: each pixel's difference to the next one down
    (across), 0 in the last row (column)."""
    x = _batched("image_gradients", image)
    dy = pad(x[:, 1:] - x[:, :-1], [[0, 0], [0, 1], [0, 0], [0, 0]])
    dx = pad(x[:, :, 1:] - x[:, :, :-1], [[0, 0], [0, 0], [0, 1], [0, 0]])
    return dy, dx


_SOBEL = np.array([[-1.0, -2.0, -1.0], [0.0, 0.0, 0.0], [1.0, 2.0, 1.0]])


def sobel_edges(image: Any) -> Any:
    """[batch, h, w, c, 2]: the Sobel filters' responses (dy, then dx) of each channel, the
    images' edges mirrored (REFLECT) as TF pads them."""
    x = _batched("sobel_edges", image)
    padded = pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
    h, w = x.shape[1], x.shape[2]
    if h is None or w is None:
        raise OpsdkError("image.sobel_edges: the images' height and width must be known")
    outs = []
    for kernel in (_SOBEL, _SOBEL.T):
        total = None
        for i in range(3):
            for j in range(3):
                if kernel[i, j]:
                    term = _ops.mul(padded[:, i:i + h, j:j + w], _m.cast(kernel[i, j], x.dtype))
                    total = term if total is None else _ops.add(total, term)
        outs.append(total)
    return _m.stack(outs, axis=-1)


def psnr(a: Any, b: Any, max_val: Any, name: Optional[str] = None) -> Any:
    """The peak signal-to-noise ratio of each image pair (over the last three axes), in dB,
    for images whose values span max_val (float32)."""
    x = _image.convert_image_dtype(_t(a), "float32")
    y = _image.convert_image_dtype(_t(b), "float32")
    peak = _image.convert_image_dtype(_m.cast(_t(max_val), _t(a).dtype), "float32")
    mse = _m.reduce_mean(_ops.square(_ops.sub(x, y)), [-3, -2, -1])
    ten_over_ln10 = np.float32(10 / np.log(10))
    return _ops.sub(_ops.mul(_m.cast(20.0 / np.log(10.0), "float32"), _ops.log(peak)),
                    _ops.mul(_m.cast(ten_over_ln10, "float32"), _ops.log(mse)), name=name)


def _gaussian(size: int, sigma: float) -> np.ndarray:
    coords = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    g = np.exp(-(coords ** 2) / (2.0 * sigma ** 2))
    g2 = np.outer(g, g)
    return (g2 / g2.sum()).astype(np.float32)


def ssim(img1: Any, img2: Any, max_val: Any, filter_size: int = 11, filter_sigma: float = 1.5,
         k1: float = 0.01, k2: float = 0.03) -> Any:
    """The structural similarity of each image pair of [..., h, w, c] (float32 after
    convert_image_dtype, max_val likewise): the Gaussian-weighted local means, variances and
    covariance over windows of filter_size (VALID), averaged over the windows and channels."""
    x = _image.convert_image_dtype(_t(img1), "float32")
    y = _image.convert_image_dtype(_t(img2), "float32")
    peak = _image.convert_image_dtype(_m.cast(_t(max_val), _t(img1).dtype), "float32")
    if x.shape is None or len(x.shape) < 3 or None in x.shape[-3:]:
        raise OpsdkError("image.ssim: the images' height, width and channels must be known")
    h, w, c = x.shape[-3:]
    if min(h, w) < filter_size:
        raise OpsdkError(f"image.ssim: the images ({h} x {w}) must be at least filter_size "
                         f"{filter_size} high and wide")
    lead = list(x.shape[:-3])
    window = np.tile(_gaussian(filter_size, filter_sigma)[:, :, None, None], (1, 1, c, 1))

    def local_mean(v: Any) -> Any:
        flat = _m.reshape(v, [-1, h, w, c])
        out = _nn.depthwise_conv2d(flat, window, [1, 1, 1, 1], "VALID")
        return _m.reshape(out, [d if d is not None else -1 for d in lead]
                          + [h - filter_size + 1, w - filter_size + 1, c]) if lead else \
            _m.reshape(out, [h - filter_size + 1, w - filter_size + 1, c])

    c1 = _ops.square(_ops.mul(_m.cast(k1, "float32"), peak))
    c2 = _ops.square(_ops.mul(_m.cast(k2, "float32"), peak))
    mean_x, mean_y = local_mean(x), local_mean(y)
    num0 = _ops.mul(_ops.mul(mean_x, mean_y), _m.cast(2.0, "float32"))
    den0 = _ops.add(_ops.square(mean_x), _ops.square(mean_y))
    luminance = _ops.div(_ops.add(num0, c1), _ops.add(den0, c1))
    num1 = _ops.mul(local_mean(_ops.mul(x, y)), _m.cast(2.0, "float32"))
    den1 = local_mean(_ops.add(_ops.square(x), _ops.square(y)))
    cs = _ops.div(_ops.add(_ops.sub(num1, num0), c2), _ops.add(_ops.sub(den1, den0), c2))
    per_channel = _m.reduce_mean(_ops.mul(luminance, cs), [-3, -2])
    return _m.reduce_mean(per_channel, [-1])


def adjust_gamma(image: Any, gamma: Any = 1, gain: Any = 1) -> Any:
    """gain * image ** gamma; an integer image is scaled to [0, 1] first and back after, as
    TF's (its range: the dtype's)."""
    x = _t(image)
    if not x.dtype.is_floating:
        scaled = _image.convert_image_dtype(x, "float32")
        out = _ops.mul(_m.cast(_t(gain), "float32"), _ops.pow(scaled, _m.cast(_t(gamma), "float32")))
        return _image.convert_image_dtype(out, x.dtype, saturate=True)
    return _ops.mul(_m.cast(_t(gain), x.dtype), _ops.pow(x, _m.cast(_t(gamma), x.dtype)))


# TensorFlow's matrices (rows: the input channels), as in its image_ops_impl
_YUV = [[0.299, -0.14714119, 0.61497538], [0.587, -0.28886916, -0.51496512],
        [0.114, 0.43601035, -0.10001026]]
_YUV_INVERSE = [[1, 1, 1], [0, -0.394642334, 2.03206185], [1.13988303, -0.58062185, 0]]
_YIQ = [[0.299, 0.59590059, 0.2115], [0.587, -0.27455667, -0.52273617],
        [0.114, -0.32134392, 0.31119955]]
_YIQ_INVERSE = [[1, 1, 1], [0.95598634, -0.27201283, -1.10674021],
                [0.6208248, -0.64720424, 1.70423049]]


def _colour(who: str, matrix: list) -> Any:
    def convert(images: Any) -> Any:
        x = _image._channels3(who, images)
        return tensordot(x, _m.cast(np.asarray(matrix), x.dtype), [[-1], [0]])
    convert.__name__ = who
    convert.__doc__ = f"TF's {who}: the last axis's 3 channels times its matrix."
    return convert


rgb_to_yuv, yuv_to_rgb = _colour("rgb_to_yuv", _YUV), _colour("yuv_to_rgb", _YUV_INVERSE)
rgb_to_yiq, yiq_to_rgb = _colour("rgb_to_yiq", _YIQ), _colour("yiq_to_rgb", _YIQ_INVERSE)


def resize_bicubic(images: Any, size: Any, align_corners: bool = False,
                   name: Optional[str] = None, half_pixel_centers: bool = False) -> Any:
    _image._no_half_pixels("resize_bicubic", half_pixel_centers)
    return _image.resize_images(images, size, _image.ResizeMethod.BICUBIC, align_corners,
                                name=name)


def resize_area(images: Any, size: Any, align_corners: bool = False,
                name: Optional[str] = None) -> Any:
    return _image.resize_images(images, size, _image.ResizeMethod.AREA, align_corners, name=name)


def extract_image_patches(images: Any, ksizes: Any = None, strides: Any = None, rates: Any = None,
                          padding: Any = None, name: Optional[str] = None,
                          sizes: Any = None) -> Any:
    """[batch, out_h, out_w, kh * kw * c]: each window of kh x kw pixels (every rate-th one)
    flattened row by row, channel fastest, as TF's; strides and padding ('VALID', 'SAME') as a
    convolution's, which computes it (a one-hot filter: nn._extract_patches)."""
    return _nn._extract_patches(images, sizes if ksizes is None else ksizes, strides, rates,
                                padding, name)


def non_max_suppression(boxes: Any, scores: Any, max_output_size: Any, iou_threshold: Any = 0.5,
                        score_threshold: Any = float("-inf"), name: Optional[str] = None) -> Any:
    """The indices (int32) of at most max_output_size boxes, chosen greedily by decreasing
    score, none overlapping a chosen one by more than iou_threshold (IoU); scores at or below
    score_threshold dropped. Thresholds known when the graph is built."""
    iou = float(args.scalar("non_max_suppression", "iou_threshold", iou_threshold))
    low = float(args.scalar("non_max_suppression", "score_threshold", score_threshold))
    b, s = _t(boxes), _t(scores)
    if s.dtype != b.dtype:
        s = _m.cast(s, b.dtype)
    limit = _m.cast(_t(max_output_size), "int32")
    return _ops.non_max_suppression(b, s, _m.reshape(limit, []), iou_threshold=iou,
                                    score_threshold=max(low, -3.4028234663852886e+38),
                                    name=name)


def _sample_positions(low: Any, high: Any, size: int, extent: Any) -> Any:
    """[n, size] positions along an axis of `extent` pixels (a float scalar tensor) for boxes
    spanning low .. high (normalised), TF's: evenly from low to high, the middle for size 1."""
    last = _ops.sub(extent, _m.cast(1.0, "float32"))
    if size == 1:
        return _m.expand_dims(_ops.mul(_ops.mul(_ops.add(low, high), _m.cast(0.5, "float32")),
                                       last), 1)
    step = _ops.div(_ops.mul(_ops.sub(high, low), last), _m.cast(float(size - 1), "float32"))
    ticks = _m.cast(np.arange(size, dtype=np.float32).reshape(1, size), "float32")
    return _ops.add(_m.expand_dims(_ops.mul(low, last), 1),
                    _ops.mul(_m.expand_dims(step, 1), ticks))


def crop_and_resize(image: Any, boxes: Any, box_ind: Any = None, crop_size: Any = None,
                    method: str = "bilinear", extrapolation_value: float = 0.0,
                    name: Optional[str] = None, box_indices: Any = None) -> Any:
    """[n, crop_h, crop_w, c] float32 crops of [batch, h, w, c] images: box k (y1, x1, y2, x2,
    normalised) of image box_ind[k], sampled at crop_size evenly spaced points by bilinear
    interpolation (or the nearest pixel), extrapolation_value outside the image; gradients
    reach the image and the boxes, as TF's."""
    who = "image.crop_and_resize"
    if method not in ("bilinear", "nearest"):
        raise OpsdkError(f"{who}: method must be 'bilinear' or 'nearest', got {method!r}")
    x = _m.cast(_batched("crop_and_resize", image), "float32")
    box = _m.cast(_t(boxes), "float32")
    which = _m.cast(_t(box_ind if box_ind is not None else box_indices), "int64")
    ch, cw = (int(v) for v in args.static_dims(who, crop_size, "crop_size"))
    if ch < 1 or cw < 1:
        raise OpsdkError(f"{who}: crop_size must be [height, width] >= 1, got {[ch, cw]}")
    dims = _m.cast(_m.shape(x), "float32")
    ys = _sample_positions(box[:, 0], box[:, 2], ch, dims[1])  # [n, ch]
    xs = _sample_positions(box[:, 1], box[:, 3], cw, dims[2])  # [n, cw]
    zero = _m.cast(0.0, "float32")
    inside = logical_and(
        _m.expand_dims(logical_and(_ops.greater_equal(ys, zero),
                                        _ops.less_equal(ys, _ops.sub(dims[1], 1.0))), 2),
        _m.expand_dims(logical_and(_ops.greater_equal(xs, zero),
                                        _ops.less_equal(xs, _ops.sub(dims[2], 1.0))), 1))
    def clipped(v: Any, extent: Any) -> Any:
        top = _ops.sub(extent, 1.0)
        return _m.cast(_ops.minimum(_ops.maximum(v, zero), top), "int64")

    def pick(rows: Any, cols: Any) -> Any:  # [n, ch] and [n, cw] int64 -> [n, ch, cw, c]
        b = _ops.mul(_m.reshape(which, [-1, 1, 1]), _ops.ones_like(
            _ops.add(_m.expand_dims(rows, 2), _m.expand_dims(cols, 1))))
        r = _ops.add(_m.expand_dims(rows, 2), _ops.zeros_like(_m.expand_dims(cols, 1)))
        c = _ops.add(_ops.zeros_like(_m.expand_dims(rows, 2)), _m.expand_dims(cols, 1))
        return gather_nd(x, _m.stack([b, r, c], axis=-1))

    if method == "nearest":
        out = pick(clipped(_m.round(ys), dims[1]), clipped(_m.round(xs), dims[2]))
    else:
        top, left = _m.floor(ys), _m.floor(xs)
        y_lerp = _m.expand_dims(_m.expand_dims(_ops.sub(ys, top), 2), 3)
        x_lerp = _m.expand_dims(_m.expand_dims(_ops.sub(xs, left), 1), 3)
        t, btm = clipped(top, dims[1]), clipped(_m.ceil(ys), dims[1])
        le, ri = clipped(left, dims[2]), clipped(_m.ceil(xs), dims[2])
        upper = _ops.add(pick(t, le), _ops.mul(_ops.sub(pick(t, ri), pick(t, le)), x_lerp))
        lower = _ops.add(pick(btm, le), _ops.mul(_ops.sub(pick(btm, ri), pick(btm, le)), x_lerp))
        out = _ops.add(upper, _ops.mul(_ops.sub(lower, upper), y_lerp))
    fill = _ops.mul(_ops.ones_like(out), _m.cast(float(extrapolation_value), "float32"))
    mask = logical_and(_m.expand_dims(inside, 3), _ops.ones_like(out) > zero)
    return _m.where(mask, out, fill, name=name)


NAMES = {"crop_and_resize": crop_and_resize, "non_max_suppression": non_max_suppression, "total_variation": total_variation, "image_gradients": image_gradients,
         "sobel_edges": sobel_edges, "psnr": psnr, "ssim": ssim, "adjust_gamma": adjust_gamma,
         "rgb_to_yuv": rgb_to_yuv, "yuv_to_rgb": yuv_to_rgb, "rgb_to_yiq": rgb_to_yiq,
         "yiq_to_rgb": yiq_to_rgb, "resize_bicubic": resize_bicubic, "resize_area": resize_area,
         "extract_image_patches": extract_image_patches,
         "extract_patches": lambda images, sizes, strides, rates, padding, name=None:
             extract_image_patches(images, sizes, strides, rates, padding, name),
         "transpose": _image.transpose_image}
TOP_LEVEL = {"extract_image_patches": extract_image_patches}
