"""TF1's `tf.image` over opsdk's builtin ops: flips, crops and pads, resizing (nearest neighbour
and bilinear, TF1's corner convention), colour conversions and adjustments, standardization.

Images are [height, width, channels] or batches [batch, height, width, channels], as TF's.
Everything is composed of gathers, slices, reductions and elementwise ops, so gradients flow
through it. Sizes that decide the graph (crop boxes, resize targets) must be known when the
graph is built, and resizing reads the input's height and width then too.

Image files and whole files (`decode_png`, `decode_jpeg`, `decode_bmp`, `decode_gif`,
`decode_image`, `encode_png`, `encode_jpeg`; `read_file`, `write_file`, which are `tf.io`'s and
top-level names, not `tf.image`'s) run the builtin ops of opdefs/builtin/image_codec.yaml, which
read and write the files with Pillow. A string is a uint8 vector of its bytes (opsdk/v1/strings.py):
`contents` may be Python bytes or such a tensor (read_file's, a string placeholder's), and what
encode_* and read_file give is fetched as bytes, as TF hands out strings.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import args, math_ops as _m
from opsdk.v1.composed import reverse
from opsdk.v1.tensors import convert_to_tensor as _t, random_uniform


def _image(who: str, image: Any) -> tuple[Any, int]:
    """The image tensor and the axis of its height (0 for one image, 1 for a batch)."""
    x = _t(image)
    if x.shape is None or len(x.shape) not in (3, 4):
        raise OpsdkError(f"image.{who}: '{x.name}' must be [height, width, channels] or [batch, "
                         f"height, width, channels], got shape {x.shape}")
    return x, len(x.shape) - 3


def _static(who: str, x: Any, axis: int) -> int:
    size = x.shape[axis]
    if size is None:
        raise OpsdkError(f"image.{who}: the size of axis {axis} of '{x.name}' must be known when "
                         f"the graph is built, got shape {list(x.shape)}")
    return int(size)


# ---- flips and transposes ----------------------------------------------------------------------

def flip_left_right(image: Any) -> Any:
    x, h = _image("flip_left_right", image)
    return reverse(x, [h + 1])


def flip_up_down(image: Any) -> Any:
    x, h = _image("flip_up_down", image)
    return reverse(x, [h])


def _random_flip(who: str, image: Any, axis_from_height: int, seed: Any) -> Any:
    x, h = _image(who, image)
    flipped = reverse(x, [h + axis_from_height])
    if h == 0:  # one image: flipped or not, as one coin
        coin = _m.less(random_uniform([], 0.0, 1.0, seed=seed), 0.5)
        return opsdk.cond(coin, lambda: flipped, lambda: _ops.identity(x))
    # a batch: a coin per image, as TF 1.15's
    coins = _m.less(random_uniform(_m.shape(x)[:1], 0.0, 1.0, seed=seed), 0.5)
    mask = _m.cast(_m.reshape(coins, [-1, 1, 1, 1]), x.dtype)
    return _ops.add(_ops.mul(mask, flipped), _ops.mul(_ops.sub(_m.cast(1, x.dtype), mask), x))


def random_flip_left_right(image: Any, seed: Any = None) -> Any:
    """Flipped left to right with probability 1/2 (each image of a batch on its own)."""
    return _random_flip("random_flip_left_right", image, 1, seed)


def random_flip_up_down(image: Any, seed: Any = None) -> Any:
    """Flipped upside down with probability 1/2 (each image of a batch on its own)."""
    return _random_flip("random_flip_up_down", image, 0, seed)


def transpose_image(image: Any) -> Any:
    x, h = _image("transpose_image", image)
    perm = [0, 2, 1, 3] if h else [1, 0, 2]
    return _ops.transpose(x, perm=perm)


def rot90(image: Any, k: Any = 1, name: Optional[str] = None) -> Any:
    """Rotated counter-clockwise by k quarter turns (k known when the graph is built)."""
    x, h = _image("rot90", image)
    turns = args.static_int("image.rot90", "k", k) % 4
    for _ in range(turns):
        x = flip_up_down(transpose_image(x))
    return _ops.identity(x, name=name)


# ---- crops and pads ----------------------------------------------------------------------------

def crop_to_bounding_box(image: Any, offset_height: int, offset_width: int, target_height: int,
                         target_width: int) -> Any:
    x, h = _image("crop_to_bounding_box", image)
    box = [args.static_int("image.crop_to_bounding_box", n, v) for n, v in (
        ("offset_height", offset_height), ("offset_width", offset_width),
        ("target_height", target_height), ("target_width", target_width))]
    if min(box) < 0:
        raise OpsdkError(f"image.crop_to_bounding_box: offsets and sizes must be >= 0, got {box}")
    begin = [0] * h + [box[0], box[1], 0]
    size = [-1] * h + [box[2], box[3], -1]
    return _ops.slice(x, begin=begin, size=size)


def pad_to_bounding_box(image: Any, offset_height: int, offset_width: int, target_height: int,
                        target_width: int) -> Any:
    from opsdk.v1.composed import pad

    x, h = _image("pad_to_bounding_box", image)
    height, width = _static("pad_to_bounding_box", x, h), _static("pad_to_bounding_box", x, h + 1)
    top, left = (args.static_int("image.pad_to_bounding_box", n, v) for n, v in (
        ("offset_height", offset_height), ("offset_width", offset_width)))
    bottom = args.static_int("image.pad_to_bounding_box", "target_height", target_height) - top - height
    right = args.static_int("image.pad_to_bounding_box", "target_width", target_width) - left - width
    if min(top, left, bottom, right) < 0:
        raise OpsdkError(f"image.pad_to_bounding_box: a {height}x{width} image at offset "
                         f"({top}, {left}) does not fit a {target_height}x{target_width} box")
    return pad(x, [[0, 0]] * h + [[top, bottom], [left, right], [0, 0]])


def resize_image_with_crop_or_pad(image: Any, target_height: int, target_width: int) -> Any:
    """Centred: cropped where the image is larger, padded with zeros where smaller."""
    x, h = _image("resize_image_with_crop_or_pad", image)
    th = args.static_int("image.resize_image_with_crop_or_pad", "target_height", target_height)
    tw = args.static_int("image.resize_image_with_crop_or_pad", "target_width", target_width)
    if x.shape[h] is None or x.shape[h + 1] is None:  # sizes known when the step runs
        return _centred(_centred(x, h, th), h + 1, tw)
    height, width = int(x.shape[h]), int(x.shape[h + 1])
    ch, cw = min(height, th), min(width, tw)
    x = crop_to_bounding_box(x, max((height - th) // 2, 0), max((width - tw) // 2, 0), ch, cw)
    return pad_to_bounding_box(x, max((th - height) // 2, 0), max((tw - width) // 2, 0), th, tw)


def _central(x: Any, axis: int, fraction: float) -> Any:
    """The centre `fraction` of x along axis (whose size is known when the step runs), as TF
    computes it: start = int((n - n * fraction) / 2), size = n - 2 * start."""
    n = _ops.reshape(_ops.slice(_ops.shape(x), begin=[axis], size=[1]), shape=[])
    n_f = _ops.cast(n, dtype="float64")
    start = _ops.cast(_ops.div(_ops.sub(n_f, _ops.mul(n_f, opsdk.constant(np.float64(fraction)))),
                               opsdk.constant(np.float64(2.0))), dtype="int64")
    stop = _ops.sub(_ops.cast(n, dtype="int64"), start)
    return _m.gather(x, _ops.arange(start, stop, opsdk.constant(np.int64(1))), axis=axis)


def _centred(x: Any, axis: int, target: int) -> Any:
    """x along axis cut or zero-padded to `target`, centred as TF's crop_or_pad centres it,
    for a size known only when the step runs: a gather of clamped positions, zeroed outside."""
    size = _ops.cast(_ops.reshape(_ops.slice(_ops.shape(x), begin=[axis], size=[1]), shape=[]),
                     dtype="int64")
    t = opsdk.constant(np.int64(target))
    zero, two = opsdk.constant(np.int64(0)), opsdk.constant(np.int64(2))
    crop = _ops.floor_div(_ops.maximum(_ops.sub(size, t), zero), two)
    pad = _ops.floor_div(_ops.maximum(_ops.sub(t, size), zero), two)
    source = _ops.add(opsdk.constant(np.arange(target, dtype=np.int64)), _ops.sub(crop, pad))
    inside = _ops.mul(_ops.cast(_ops.greater_equal(source, zero), dtype=x.dtype),
                      _ops.cast(_ops.less(source, size), dtype=x.dtype))
    last = _ops.sub(size, opsdk.constant(np.int64(1)))
    picked = _m.gather(x, _ops.minimum(_ops.maximum(source, zero), last), axis=axis)
    shape = [1] * len(x.shape)
    shape[axis] = target
    mask = _ops.reshape(inside, shape=shape)
    return _ops.mul(picked, mask)


def central_crop(image: Any, central_fraction: float) -> Any:
    """The centre of the image, `central_fraction` (0, 1] of its height and width."""
    x, h = _image("central_crop", image)
    fraction = float(central_fraction)
    if not 0.0 < fraction <= 1.0:
        raise OpsdkError(f"image.central_crop: central_fraction must be in (0, 1], got {fraction}")
    if x.shape[h] is None or x.shape[h + 1] is None:  # sizes known when the step runs
        return _central(_central(x, h, fraction), h + 1, fraction)
    height, width = _static("central_crop", x, h), _static("central_crop", x, h + 1)
    top = int((height - height * fraction) / 2)
    left = int((width - width * fraction) / 2)
    return crop_to_bounding_box(x, top, left, height - 2 * top, width - 2 * left)


# ---- resizing ----------------------------------------------------------------------------------

class ResizeMethod:
    BILINEAR, NEAREST_NEIGHBOR, BICUBIC, AREA = 0, 1, 2, 3


def _source_positions(n_in: int, n_out: int, align_corners: bool) -> np.ndarray:
    scale = ((n_in - 1) / (n_out - 1) if align_corners and n_out > 1 else n_in / n_out)
    return np.arange(n_out) * scale


def _resize_axis(x: Any, axis: int, n_out: int, method: int, align_corners: bool) -> Any:
    if x.shape[axis] is None:
        return _resize_axis_at_run_time(x, axis, n_out, method, align_corners)
    n_in = int(x.shape[axis])
    if n_in == n_out:
        return x
    where = _source_positions(n_in, n_out, align_corners)
    if method == ResizeMethod.NEAREST_NEIGHBOR:
        picked = np.round(where) if align_corners else np.floor(where)
        index = np.minimum(picked.astype(np.int32), n_in - 1)
        return _m.gather(x, opsdk.constant(index), axis=axis)
    low = np.floor(where).astype(np.int32)
    high = np.minimum(low + 1, n_in - 1)
    weight = (where - low).astype(x.dtype.as_numpy_dtype)
    shape = [1] * len(x.shape)
    shape[axis] = n_out
    w = opsdk.constant(weight.reshape(shape))
    a = _m.gather(x, opsdk.constant(np.minimum(low, n_in - 1)), axis=axis)
    b = _m.gather(x, opsdk.constant(high), axis=axis)
    return _ops.add(a, _ops.mul(_ops.sub(b, a), w))


def _resize_axis_at_run_time(x: Any, axis: int, n_out: int, method: int,
                             align_corners: bool) -> Any:
    """_resize_axis for a size known only when the step runs: the same positions and weights,
    computed by the graph from the run-time size."""
    size = _ops.reshape(_ops.slice(_ops.shape(x), begin=[axis], size=[1]), shape=[])
    n_in = _ops.cast(size, dtype="float64")
    one = opsdk.constant(np.float64(1.0))
    if align_corners and n_out > 1:
        scale = _ops.div(_ops.sub(n_in, one), opsdk.constant(np.float64(n_out - 1)))
    else:
        scale = _ops.div(n_in, opsdk.constant(np.float64(n_out)))
    where = _ops.mul(opsdk.constant(np.arange(n_out, dtype=np.float64)), scale)
    last = _ops.sub(_ops.cast(size, dtype="int64"), opsdk.constant(np.int64(1)))
    if method == ResizeMethod.NEAREST_NEIGHBOR:
        picked = _ops.round(where) if align_corners else _ops.floor(where)
        index = _ops.minimum(_ops.cast(picked, dtype="int64"), last)
        return _m.gather(x, index, axis=axis)
    low_f = _ops.floor(where)
    low = _ops.minimum(_ops.cast(low_f, dtype="int64"), last)
    high = _ops.minimum(_ops.add(low, opsdk.constant(np.int64(1))), last)
    shape = [1] * len(x.shape)
    shape[axis] = n_out
    weight = _ops.reshape(_ops.cast(_ops.sub(where, low_f), dtype=x.dtype), shape=shape)
    a = _m.gather(x, low, axis=axis)
    b = _m.gather(x, high, axis=axis)
    return _ops.add(a, _ops.mul(_ops.sub(b, a), weight))


_TABLE = 1024  # TF1's bicubic weights are looked up in a table of this many steps per pixel


def _cubic_table(a: float = -0.75) -> np.ndarray:
    x = np.arange(_TABLE + 1, dtype=np.float64) / _TABLE
    near = (((a + 2) * x - (a + 3)) * x * x + 1).astype(np.float32)
    far_x = x + 1.0
    far = (((a * far_x - 5 * a) * far_x + 8 * a) * far_x - 4 * a).astype(np.float32)
    return np.stack([near, far], axis=1)


def _resize_matrix(method: int, n_in: int, n_out: int, align_corners: bool) -> np.ndarray:
    """[n_out, n_in]: each output position's weights over the input positions, as TF1's bicubic
    (Keys' kernel, a = -0.75, a 1024-step table, edges clamped) or area (the box each output
    pixel covers, averaged) resize computes them."""
    scale = ((n_in - 1) / (n_out - 1) if align_corners and n_out > 1 else n_in / n_out)
    weights = np.zeros((n_out, n_in), np.float64)
    if method == ResizeMethod.BICUBIC:
        table = _cubic_table()
        for o in range(n_out):
            where = o * scale
            base = int(np.floor(where))
            offset = int(np.rint((where - base) * _TABLE))
            taps = [table[offset, 1], table[offset, 0], table[_TABLE - offset, 0],
                    table[_TABLE - offset, 1]]
            for k, w in enumerate(taps):
                weights[o, min(max(base - 1 + k, 0), n_in - 1)] += w
        return weights
    for o in range(n_out):  # AREA
        low, high = o * scale, (o + 1) * scale
        for i in range(int(np.floor(low)), int(np.ceil(high))):
            share = min(i + 1, high) - max(i, low)
            weights[o, min(i, n_in - 1)] += share / scale
    return weights


def _resize_axis_by_matrix(x: Any, axis: int, n_out: int, method: int,
                           align_corners: bool) -> Any:
    """x resized along axis by a weight matrix over it (known when the graph is built, or
    computed when the step runs from the run-time size)."""
    from opsdk.runtime.frontend.py_func import py_func_node
    from opsdk.v1.composed import tensordot

    if x.shape[axis] is not None:
        matrix = opsdk.constant(_resize_matrix(method, int(x.shape[axis]), n_out, align_corners))
    else:
        size = _ops.reshape(_ops.slice(_ops.shape(x), begin=[axis], size=[1]), shape=[])
        matrix = py_func_node(lambda n: _resize_matrix(method, int(n), n_out, align_corners),
                              [size], ["float64"], name="resize_weights").outputs[0]
        matrix.set_shape([n_out, None])
    out = tensordot(x, _ops.cast(matrix, dtype=x.dtype), [[axis], [1]])  # axis now last
    rank = len(x.shape)
    perm = list(range(axis)) + [rank - 1] + list(range(axis, rank - 1))
    return _ops.transpose(out, perm=perm)


def resize_images(images: Any, size: Any, method: int = ResizeMethod.BILINEAR,
                  align_corners: bool = False, preserve_aspect_ratio: bool = False,
                  name: Optional[str] = None) -> Any:
    """TF1's resize (compat.v1's corner convention: a pixel's position is its index, scaled by
    in / out, or (in - 1) / (out - 1) with `align_corners`); bilinear, nearest neighbour,
    bicubic and area. Integer images come back as float32 but from nearest neighbour, and
    images already of the size come back as they are (their dtype too), as TF's. The image's height and width
    may be known only when the step runs (a decoded file's)."""
    x, h = _image("resize_images", images)
    target = args.static_dims("image.resize_images", size, "size")
    if len(target) != 2 or min(target) < 1:
        raise OpsdkError(f"image.resize_images: size must be [new_height, new_width] >= 1, got "
                         f"{target}")
    if preserve_aspect_ratio:
        raise OpsdkError("image.resize_images: preserve_aspect_ratio=True is not supported by "
                         "opsdk.v1")
    if method not in (ResizeMethod.BILINEAR, ResizeMethod.NEAREST_NEIGHBOR, ResizeMethod.BICUBIC,
                      ResizeMethod.AREA):
        raise OpsdkError(f"image.resize_images: method {method!r} is not one of "
                         "tf.image.ResizeMethod's (0-3)")
    if [x.shape[h], x.shape[h + 1]] == list(target):  # as TF's: the images as they are
        return _ops.identity(x, name=name)
    if method != ResizeMethod.NEAREST_NEIGHBOR and not x.dtype.is_floating:
        x = _m.cast(x, "float32")
    if method in (ResizeMethod.BICUBIC, ResizeMethod.AREA):
        out = x
        for axis, n_out in ((h, target[0]), (h + 1, target[1])):
            if out.shape[axis] != n_out or method == ResizeMethod.AREA:
                out = _resize_axis_by_matrix(out, axis, n_out, method, align_corners)
    else:
        out = _resize_axis(x, h, target[0], method, align_corners)
        out = _resize_axis(out, h + 1, target[1], method, align_corners)
    # a new node where nothing was resized (or one that takes the name)
    return _ops.identity(out, name=name) if out is x or name else out


def resize_bilinear(images: Any, size: Any, align_corners: bool = False,
                    name: Optional[str] = None, half_pixel_centers: bool = False) -> Any:
    _no_half_pixels("resize_bilinear", half_pixel_centers)
    return resize_images(images, size, ResizeMethod.BILINEAR, align_corners, name=name)


def resize_nearest_neighbor(images: Any, size: Any, align_corners: bool = False,
                            name: Optional[str] = None, half_pixel_centers: bool = False) -> Any:
    _no_half_pixels("resize_nearest_neighbor", half_pixel_centers)
    return resize_images(images, size, ResizeMethod.NEAREST_NEIGHBOR, align_corners, name=name)


def _no_half_pixels(who: str, half_pixel_centers: bool) -> None:
    if half_pixel_centers:
        raise OpsdkError(f"image.{who}: half_pixel_centers=True is not supported by opsdk.v1")


# ---- colour ------------------------------------------------------------------------------------

_GRAY = np.array([0.2989, 0.5870, 0.1140])


def rgb_to_grayscale(images: Any, name: Optional[str] = None) -> Any:
    """[..., 3] -> [..., 1]: the weighted sum of the channels TF uses."""
    x = _t(images)
    if x.shape is None or x.shape[-1] not in (None, 3):
        raise OpsdkError(f"image.rgb_to_grayscale: '{x.name}' must have 3 channels, got shape "
                         f"{x.shape}")
    # integer images through floats in [0, 1] and back, as TF's (convert_image_dtype)
    floats = x if x.dtype.is_floating else convert_image_dtype(x, "float32")
    gray = _m.reduce_sum(_ops.mul(floats, opsdk.constant(_GRAY.astype(floats.dtype.as_numpy_dtype))),
                         axis=-1, keepdims=True)
    return convert_image_dtype(gray, x.dtype, name=name)


def grayscale_to_rgb(images: Any, name: Optional[str] = None) -> Any:
    from opsdk.v1.composed import tile

    x = _t(images)
    return tile(x, [1] * (len(x.shape) - 1) + [3], name=name)


def adjust_brightness(image: Any, delta: Any) -> Any:
    x = _t(image)
    return _ops.add(x, _m.cast(delta, x.dtype))


def adjust_contrast(images: Any, contrast_factor: Any) -> Any:
    """(x - mean) * factor + mean, the mean over each image's height and width per channel."""
    x = _t(images)
    mean = _m.reduce_mean(x, axis=[-3, -2], keepdims=True)
    return _ops.add(_ops.mul(_ops.sub(x, mean), _m.cast(contrast_factor, x.dtype)), mean)


def random_brightness(image: Any, max_delta: float, seed: Any = None) -> Any:
    if max_delta < 0:
        raise OpsdkError(f"image.random_brightness: max_delta must be >= 0, got {max_delta}")
    return adjust_brightness(image, random_uniform([], -max_delta, max_delta, seed=seed))


def random_contrast(image: Any, lower: float, upper: float, seed: Any = None) -> Any:
    if not 0 <= lower < upper:
        raise OpsdkError(f"image.random_contrast: need 0 <= lower < upper, got {lower}, {upper}")
    return adjust_contrast(image, random_uniform([], lower, upper, seed=seed))


def per_image_standardization(image: Any) -> Any:
    """(x - mean) / max(stddev, 1 / sqrt(number of values)), per image, as TF's."""
    x, h = _image("per_image_standardization", image)
    floats = x if x.dtype.is_floating else _m.cast(x, "float32")
    axes = [-3, -2, -1]
    mean = _m.reduce_mean(floats, axis=axes, keepdims=True)
    variance = _m.reduce_mean(_ops.square(_ops.sub(floats, mean)), axis=axes, keepdims=True)
    count = _m.cast(_m.reduce_prod(_m.shape(floats)[-3:]), floats.dtype)
    floor = _ops.div(_m.cast(1.0, floats.dtype), _ops.sqrt(count))
    return _ops.div(_ops.sub(floats, mean), _m.maximum(_ops.sqrt(variance), floor))


def convert_image_dtype(image: Any, dtype: Any, saturate: bool = False,
                        name: Optional[str] = None) -> Any:
    """Between integer images (0 .. the dtype's max) and float ones (0 .. 1), scaling the
    values; float to float and int to int casts (ints of other widths are rescaled)."""
    from opsdk.v1.dtypes import as_dtype

    x = _t(image)
    want = as_dtype(dtype)
    have = x.dtype
    if want == have:
        return _ops.identity(x, name=name)
    if have.is_floating and want.is_floating:
        return _m.cast(x, want, name=name)
    if have.is_integer and want.is_floating:
        return _ops.mul(_m.cast(x, want), _m.cast(1.0 / float(have.max), want), name=name)
    if have.is_floating and want.is_integer:
        scaled = _ops.mul(x, _m.cast(float(want.max) + 0.5, have))
        if saturate:
            scaled = _m.clip_by_value(scaled, float(want.min), float(want.max))
        return _m.cast(scaled, want, name=name)
    # int to int: by the ratio of the ranges
    factor = (float(want.max) + 1) / (float(have.max) + 1)
    return _m.cast(_ops.mul(_m.cast(x, "float64"), _m.cast(factor, "float64")), want, name=name)


# ---- colour spaces, hue and saturation ----------------------------------------------------------

def _channels3(who: str, images: Any) -> Any:
    x = _t(images)
    if x.shape is None or not x.shape or x.shape[-1] not in (3, None):
        raise OpsdkError(f"image.{who}: give images with 3 channels (RGB) in their last axis, "
                         f"got shape {None if x.shape is None else list(x.shape)}")
    if x.shape[-1] is None:  # a decoded file's: 3 channels checked when the step runs
        x = _ops.reshape_dims(x, _ops.shape(x), shape=[-1] * (len(x.shape) - 1) + [3])
    if not x.dtype.is_floating:
        raise OpsdkError(f"image.{who}: give float images in [0, 1] (convert_image_dtype), got "
                         f"{x.dtype}")
    return x


def _split3(x: Any) -> list:
    return [x[..., k] for k in range(3)]


def rgb_to_hsv(images: Any, name: Optional[str] = None) -> Any:
    """Float RGB in [0, 1] to HSV, each in [0, 1], as TF's kernel computes it (hue 0 where the
    pixel is grey, saturation 0 where it is black)."""
    x = _channels3("rgb_to_hsv", images)
    r, g, b = _split3(x)
    v = _ops.maximum(_ops.maximum(r, g), b)
    spread = _ops.sub(v, _ops.minimum(_ops.minimum(r, g), b))
    zero, one = _ops.zeros_like(v), _ops.ones_like(v)
    s = _ops.where(_ops.greater(v, zero), _ops.div(spread, _ops.where(_ops.greater(v, zero), v,
                                                                      one)), zero)
    safe = _ops.where(_ops.greater(spread, zero), spread, one)
    sixth = _m.cast(1.0 / 6.0, x.dtype)
    h_r = _ops.div(_ops.sub(g, b), _ops.mul(safe, _m.cast(6.0, x.dtype)))
    h_g = _ops.add(_ops.div(_ops.sub(b, r), _ops.mul(safe, _m.cast(6.0, x.dtype))),
                   _ops.mul(sixth, _m.cast(2.0, x.dtype)))
    h_b = _ops.add(_ops.div(_ops.sub(r, g), _ops.mul(safe, _m.cast(6.0, x.dtype))),
                   _ops.mul(sixth, _m.cast(4.0, x.dtype)))
    h = _ops.where(_ops.equal(r, v), h_r, _ops.where(_ops.equal(g, v), h_g, h_b))
    h = _ops.where(_ops.greater(spread, zero), h, zero)
    h = _ops.where(_ops.less(h, zero), _ops.add(h, one), h)
    return _m.stack([h, s, v], axis=-1, name=name)


def hsv_to_rgb(images: Any, name: Optional[str] = None) -> Any:
    """HSV in [0, 1] back to RGB, as TF's kernel computes it."""
    x = _channels3("hsv_to_rgb", images)
    h, s, v = _split3(x)
    c = _ops.mul(s, v)
    m = _ops.sub(v, c)
    dh = _ops.mul(h, _m.cast(6.0, x.dtype))
    category = _ops.floor(dh)
    part = _ops.sub(dh, _ops.mul(_ops.floor(_ops.div(dh, _m.cast(2.0, x.dtype))),
                                 _m.cast(2.0, x.dtype)))  # fmod(dh, 2) for dh >= 0
    xx = _ops.mul(c, _ops.sub(_m.cast(1.0, x.dtype), _ops.abs(_ops.sub(part,
                                                                        _m.cast(1.0, x.dtype)))))
    zero = _ops.zeros_like(c)
    table = [(c, xx, zero), (xx, c, zero), (zero, c, xx), (zero, xx, c), (xx, zero, c),
             (c, zero, xx)]
    channels = []
    for k in range(3):
        out = zero
        for index, row in enumerate(table):
            out = _ops.where(_ops.equal(category, _m.cast(float(index), x.dtype)), row[k], out)
        channels.append(_ops.add(out, m))
    return _m.stack(channels, axis=-1, name=name)


def _in_hsv(who: str, image: Any, change: Any) -> Any:
    """image through HSV, `change(h, s, v)` applied, and back in its own dtype."""
    x = _t(image)
    floats = x if x.dtype.is_floating else convert_image_dtype(x, "float32")
    h, s, v = _split3(rgb_to_hsv(_channels3(who, floats)))
    out = hsv_to_rgb(_m.stack(list(change(h, s, v)), axis=-1))
    return out if x.dtype == floats.dtype else convert_image_dtype(out, x.dtype, saturate=True)


def adjust_hue(image: Any, delta: Any, name: Optional[str] = None) -> Any:
    """The hue turned by delta (a fraction of the circle, in [-1, 1])."""
    def turn(h: Any, s: Any, v: Any) -> tuple:
        shifted = _ops.add(h, _m.cast(_t(delta), h.dtype))
        wrapped = _ops.sub(shifted, _ops.floor(shifted))  # into [0, 1)
        return wrapped, s, v
    return _in_hsv("adjust_hue", image, turn)


def adjust_saturation(image: Any, saturation_factor: Any, name: Optional[str] = None) -> Any:
    """The saturation scaled by saturation_factor (kept in [0, 1])."""
    def scale(h: Any, s: Any, v: Any) -> tuple:
        return h, _m.clip_by_value(_ops.mul(s, _m.cast(_t(saturation_factor), s.dtype)), 0.0,
                                   1.0), v
    return _in_hsv("adjust_saturation", image, scale)


def random_hue(image: Any, max_delta: float, seed: Any = None) -> Any:
    """adjust_hue by a delta drawn uniformly in [-max_delta, max_delta] (max_delta <= 0.5)."""
    if not 0 <= max_delta <= 0.5:
        raise OpsdkError(f"image.random_hue: max_delta must be in [0, 0.5], got {max_delta}")
    return adjust_hue(image, random_uniform([], -max_delta, max_delta, seed=seed))


def random_saturation(image: Any, lower: float, upper: float, seed: Any = None) -> Any:
    """adjust_saturation by a factor drawn uniformly in [lower, upper)."""
    if not 0 <= lower < upper:
        raise OpsdkError(f"image.random_saturation: give 0 <= lower < upper, got {lower}, "
                         f"{upper}")
    return adjust_saturation(image, random_uniform([], lower, upper, seed=seed))


# ---- bounding boxes --------------------------------------------------------------------------

def sample_distorted_bounding_box(image_size: Any, bounding_boxes: Any, seed: Any = None,
                                  seed2: Any = None, min_object_covered: Any = 0.1,
                                  aspect_ratio_range: Any = None, area_range: Any = None,
                                  max_attempts: Any = None,
                                  use_image_if_no_bounding_boxes: Any = None,
                                  name: Optional[str] = None) -> tuple:
    """(begin, size, bboxes) of a random crop (a step draws a new one): its area a fraction of
    the image in area_range (default [0.05, 1]), its aspect ratio in aspect_ratio_range
    (default [0.75, 1.33]), covering at least min_object_covered of one of the bounding boxes
    ([batch, n, 4] of [ymin, xmin, ymax, xmax] in [0, 1]); after max_attempts (default 100)
    failures, the whole image. begin and size are [y, x, 0] and [h, w, -1] for tf.slice; bboxes
    the crop as [1, 1, 4]. The draws are opsdk's own (TF's kernel draws other numbers)."""
    from opsdk.runtime.frontend.py_func import py_func_node
    from opsdk.v1.tensors import op_seed

    ratio = tuple(float(a) for a in (aspect_ratio_range or (0.75, 1.33)))
    areas = tuple(float(a) for a in (area_range or (0.05, 1.0)))
    attempts = int(max_attempts or 100)
    covered = _t(min_object_covered)
    rng = np.random.default_rng(op_seed(seed))

    def sample(size: np.ndarray, boxes: np.ndarray, cover: np.ndarray) -> list:
        height, width = int(size[0]), int(size[1])
        flat = np.asarray(boxes, np.float64).reshape(-1, 4)
        if not flat.size:
            if not use_image_if_no_bounding_boxes:
                raise ValueError("sample_distorted_bounding_box: no bounding boxes given (set "
                                 "use_image_if_no_bounding_boxes=True to use the whole image)")
            flat = np.array([[0.0, 0.0, 1.0, 1.0]])
        need = float(cover)
        for _ in range(attempts):
            target = flat[rng.integers(len(flat))]
            area = rng.uniform(*areas) * height * width
            aspect = rng.uniform(*ratio)
            h = int(round(np.sqrt(area / aspect)))
            w = int(round(np.sqrt(area * aspect)))
            if not (0 < h <= height and 0 < w <= width):
                continue
            y = int(rng.integers(0, height - h + 1))
            x = int(rng.integers(0, width - w + 1))
            ty0, tx0, ty1, tx1 = target * [height, width, height, width]
            inter = max(0.0, min(y + h, ty1) - max(y, ty0)) * max(0.0, min(x + w, tx1) -
                                                                   max(x, tx0))
            box_area = max((ty1 - ty0) * (tx1 - tx0), 1e-12)
            if inter / box_area >= need:
                break
        else:
            y, x, h, w = 0, 0, height, width
        crop = np.array([[[y / height, x / width, (y + h) / height, (x + w) / width]]],
                        np.float32)
        return [np.array([y, x, 0], np.int32), np.array([h, w, -1], np.int32), crop]
    op = py_func_node(sample, [_m.cast(_t(image_size), "int32"), _t(bounding_boxes),
                               _m.cast(covered, "float32")], ["int32", "int32", "float32"],
                      name=name or "sample_distorted_bounding_box")
    begin, size, boxes = op.outputs
    begin.set_shape([3])
    size.set_shape([3])
    boxes.set_shape([1, 1, 4])
    return begin, size, boxes


# TF's colours for boxes (RGBA), taken in turn
_BOX_COLOURS = np.array([[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1],
                         [0.5, 0, 0.5, 1], [0.5, 0.5, 0, 1], [0.5, 0, 0, 1], [0, 0, 0.5, 1],
                         [0, 1, 1, 1], [1, 0, 1, 1]], np.float32)


def draw_bounding_boxes(images: Any, boxes: Any, name: Optional[str] = None,
                        colors: Any = None) -> Any:
    """images ([batch, h, w, channels], float) with the outline of each box ([batch, n, 4] of
    [ymin, xmin, ymax, xmax] in [0, 1]) drawn one pixel wide, in TF's colours (or `colors`)."""
    from opsdk.runtime.frontend.py_func import py_func_node

    x = _t(images)
    if x.shape is None or len(x.shape) != 4:
        raise OpsdkError("image.draw_bounding_boxes: give [batch, height, width, channels] "
                         "images")
    palette = _BOX_COLOURS if colors is None else np.asarray(colors, np.float32).reshape(-1, 4)

    def draw(pictures: np.ndarray, where: np.ndarray) -> np.ndarray:
        out = np.array(pictures, copy=True)
        _, height, width, depth = out.shape
        for b in range(out.shape[0]):
            for k, box in enumerate(np.asarray(where[b], np.float64).reshape(-1, 4)):
                colour = palette[k % len(palette)][:depth].astype(out.dtype)
                y0, x0 = int(box[0] * (height - 1)), int(box[1] * (width - 1))
                y1, x1 = int(box[2] * (height - 1)), int(box[3] * (width - 1))
                if y0 > y1 or x0 > x1 or y0 >= height or x0 >= width or y1 < 0 or x1 < 0:
                    continue
                ys = slice(max(y0, 0), min(y1, height - 1) + 1)
                xs = slice(max(x0, 0), min(x1, width - 1) + 1)
                for row in (y0, y1):
                    if 0 <= row < height:
                        out[b, row, xs] = colour
                for col in (x0, x1):
                    if 0 <= col < width:
                        out[b, ys, col] = colour
        return out
    out = py_func_node(draw, [x, _t(boxes)], [x.dtype], name=name or "draw_bounding_boxes"
                       ).outputs[0]
    out.set_shape(list(x.shape))
    return out


# ---- image files and whole files ---------------------------------------------------------------

def _string(who: str, arg: str, value: Any) -> Any:
    """One string as opsdk carries it, a uint8 vector of its bytes: Python bytes or str become a
    constant; a tensor must be such a vector (a string constant's, a string placeholder's,
    read_file's or encode_png's)."""
    from opsdk.v1.strings import string_constant

    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "SUO":
        value = value.item()
    if isinstance(value, (bytes, str)):
        return string_constant(value)
    x = _t(value)
    if np.dtype(x.dtype) != np.uint8 or (x.shape is not None and len(x.shape) != 1):
        raise OpsdkError(f"{who}: {arg} must be one string (bytes, or a string tensor such as "
                         f"read_file's, which opsdk holds as a uint8 vector of its bytes), got "
                         f"'{x.name}' of dtype {x.dtype} and shape {x.shape}")
    return x


def _as_string(tensor: Any) -> Any:
    """A uint8 vector of bytes that Session.run hands out as bytes, as TF hands out a string."""
    from opsdk.v1 import session as _session
    from opsdk.v1.strings import _decode_scalar

    _session.register_decoder(tensor, _decode_scalar)
    return tensor


def _choice(who: str, arg: str, value: Any, allowed: tuple) -> int:
    got = args.static_int(who, arg, 0 if value is None else value)
    if got not in allowed:
        raise OpsdkError(f"{who}: {arg} must be {', '.join(map(str, allowed[:-1]))} or "
                         f"{allowed[-1]}, got {got}")
    return got


def _dtype_name(who: str, dtype: Any, allowed: tuple) -> str:
    from opsdk.v1.dtypes import as_dtype

    name = getattr(as_dtype(dtype), "name", str(dtype))
    if name not in allowed:
        raise OpsdkError(f"{who}: dtype must be {' or '.join('tf.' + a for a in allowed)}, got "
                         f"{name}")
    return name


def decode_png(contents: Any, channels: int = 0, dtype: Any = "uint8",
               name: Optional[str] = None) -> Any:
    """[height, width, channels] pixels of a PNG (or a JPEG, or a GIF of one frame, as TF's
    decoder reads them too); channels 0 is the file's own, 1 gray, 3 RGB, 4 RGBA, converted
    as TF's libpng does. dtype tf.uint16 gives 16-bit samples as they are and 8-bit ones times
    257. Height and width are known when the file is read. Differs from TF: a 16-bit colour PNG
    decodes to uint8 only (Pillow reads its high bytes; the gray of one may be 1 below TF's),
    and a palette or gray PNG of under 8 bits given an alpha channel gets 255 (TF's libpng
    setup gives 2**bits - 1)."""
    who = "image.decode_png"
    return _ops.decode_png(_string(who, "contents", contents),
                           channels=_choice(who, "channels", channels, (0, 1, 3, 4)),
                           dtype=_dtype_name(who, dtype, ("uint8", "uint16")),
                           name=name or "DecodePng")


def decode_jpeg(contents: Any, channels: int = 0, ratio: int = 1, fancy_upscaling: bool = True,
                try_recover_truncated: bool = False, acceptable_fraction: float = 1,
                dct_method: str = "", name: Optional[str] = None) -> Any:
    """[height, width, channels] uint8 pixels of a JPEG (or a PNG or one-frame GIF); channels 0
    is the file's own, 1 gray (libjpeg's), 3 RGB; ratio 1, 2, 4 or 8 scales it down by libjpeg's
    DCT scaling. Pillow decodes with the accurate integer DCT: TF's values for dct_method
    'INTEGER_ACCURATE', and a few levels apart from those of its default, 'INTEGER_FAST' (a hint
    to TF's decoder too). fancy_upscaling=False and try_recover_truncated=True are refused (Pillow
    has neither); a truncated JPEG is an error whatever acceptable_fraction says, as in TF
    without try_recover_truncated."""
    who = "image.decode_jpeg"
    if ratio not in (1, 2, 4, 8) or isinstance(ratio, bool):
        raise OpsdkError(f"{who}: ratio must be 1, 2, 4, or 8, got {ratio!r}")
    if not fancy_upscaling:
        raise OpsdkError(f"{who}: fancy_upscaling=False is not supported by opsdk.v1 (Pillow "
                         "decodes with libjpeg's fancy upsampling only)")
    if try_recover_truncated:
        raise OpsdkError(f"{who}: try_recover_truncated=True is not supported by opsdk.v1 "
                         "(Pillow decodes whole JPEGs only; a truncated one is an error)")
    if not 0 <= float(acceptable_fraction) <= 1:
        raise OpsdkError(f"{who}: acceptable_fraction must be in [0, 1], got "
                         f"{acceptable_fraction!r}")
    if dct_method not in ("", "INTEGER_FAST", "INTEGER_ACCURATE"):
        raise OpsdkError(f"{who}: dct_method must be one of '', 'INTEGER_FAST', "
                         f"'INTEGER_ACCURATE', got {dct_method!r}")
    return _ops.decode_jpeg(_string(who, "contents", contents),
                            channels=_choice(who, "channels", channels, (0, 1, 3)),
                            ratio=int(ratio), name=name or "DecodeJpeg")


def decode_bmp(contents: Any, channels: int = 0, name: Optional[str] = None) -> Any:
    """[height, width, channels] uint8 pixels of a BMP of 8, 24 or 32 bits a pixel, as TF's
    decoder reads it: 8 bits are one channel of the stored values (no palette), 32 keep their
    fourth byte as alpha; channels 0 (the file's own), 3 or 4."""
    who = "image.decode_bmp"
    return _ops.decode_bmp(_string(who, "contents", contents),
                           channels=_choice(who, "channels", channels, (0, 3, 4)),
                           name=name or "DecodeBmp")


def decode_gif(contents: Any, name: Optional[str] = None) -> Any:
    """[frames, height, width, 3] uint8 pixels of a GIF (a PNG or JPEG gives one frame): each
    frame drawn over the one before, pixels no frame has drawn 0. Differs from TF: frames that
    ask to be disposed (to the background or the previous frame) are, as Pillow reads them; TF's
    decoder ignores disposal."""
    return _ops.decode_gif(_string("image.decode_gif", "contents", contents),
                           name=name or "DecodeGif")


def decode_image(contents: Any, channels: Optional[int] = None, dtype: Any = "uint8",
                 name: Optional[str] = None, expand_animations: bool = True) -> Any:
    """A JPEG, PNG, GIF or BMP, each decoded as its own function decodes it: [height, width,
    channels], or [frames, height, width, 3] for a GIF (its first frame alone without
    expand_animations; then the rank is 3 whatever the file, else known only at run time).
    dtype tf.uint8, tf.uint16 or tf.float32 (values in [0, 1]), as TF 2's op, which compat.v1's
    decode_image runs (TF 1.15 converted to any dtype)."""
    who = "image.decode_image"
    return _ops.decode_image(_string(who, "contents", contents),
                             channels=_choice(who, "channels", channels, (0, 1, 3, 4)),
                             expand_animations=bool(expand_animations),
                             dtype=_dtype_name(who, dtype, ("uint8", "uint16", "float32")),
                             name=name or "decode_image")


def _encodable(who: str, image: Any, dtypes: tuple) -> Any:
    x = _t(image)
    if np.dtype(x.dtype).name not in dtypes or (x.shape is not None and len(x.shape) != 3):
        raise OpsdkError(f"{who}: image must be [height, width, channels] of "
                         f"{' or '.join(dtypes)}, got '{x.name}' of dtype {x.dtype} and shape "
                         f"{x.shape}")
    return x


def encode_png(image: Any, compression: int = -1, name: Optional[str] = None) -> Any:
    """The bytes of a PNG of a [height, width, channels] image (1 to 4 channels of uint8, or one
    of uint16: Pillow writes 16-bit PNGs in gray only, where TF writes colour too); compression
    is zlib's level, -1 (its default) or 0 to 9. Fetched as bytes."""
    who = "image.encode_png"
    level = args.static_int(who, "compression", compression)
    if not -1 <= level <= 9:
        raise OpsdkError(f"{who}: compression must be -1 (the default) or 0 to 9, got {level}")
    return _as_string(_ops.encode_png(_encodable(who, image, ("uint8", "uint16")),
                                      compression=level, name=name or "EncodePng"))


def encode_jpeg(image: Any, format: str = "", quality: int = 95,  # noqa: A002 - TF's name
                progressive: bool = False, optimize_size: bool = False,
                chroma_downsampling: bool = True, density_unit: str = "in", x_density: int = 300,
                y_density: int = 300, xmp_metadata: str = "", name: Optional[str] = None) -> Any:
    """The bytes of a JPEG of a [height, width, channels] uint8 image, 1 channel (gray) or 3
    (RGB); the same bytes as TF's for the same options. density_unit 'cm' is refused (Pillow
    writes the density in dots per inch only). Fetched as bytes."""
    who = "image.encode_jpeg"
    if format not in ("", "grayscale", "rgb"):
        raise OpsdkError(f"{who}: format must be '', 'grayscale' or 'rgb', got {format!r}")
    if density_unit == "cm":
        raise OpsdkError(f"{who}: density_unit='cm' is not supported by opsdk.v1 (Pillow writes "
                         "the density in dots per inch only); give 'in'")
    if density_unit != "in":
        raise OpsdkError(f"{who}: density_unit must be 'in' or 'cm', got {density_unit!r}")
    numbers = {arg: args.static_int(who, arg, v) for arg, v in (
        ("quality", quality), ("x_density", x_density), ("y_density", y_density))}
    if not 0 <= numbers["quality"] <= 100:
        raise OpsdkError(f"{who}: quality must be 0 to 100, got {numbers['quality']}")
    for arg in ("x_density", "y_density"):
        if not 1 <= numbers[arg] <= 65535:
            raise OpsdkError(f"{who}: {arg} must be 1 to 65535 (the JFIF header's range), got "
                             f"{numbers[arg]}")
    xmp = xmp_metadata.decode("utf-8") if isinstance(xmp_metadata, bytes) else str(xmp_metadata)
    return _as_string(_ops.encode_jpeg(
        _encodable(who, image, ("uint8",)), format=format, progressive=bool(progressive),
        optimize_size=bool(optimize_size), chroma_downsampling=bool(chroma_downsampling),
        xmp_metadata=xmp, name=name or "EncodeJpeg", **numbers))


def read_file(filename: Any, name: Optional[str] = None) -> Any:
    """The bytes of the file `filename` (a str, bytes or string tensor), read on every run;
    fetched as bytes. A file that cannot be read fails the run naming it (TF raises NotFoundError
    for a missing one; opsdk, as for every failing op, InvalidArgumentError)."""
    return _as_string(_ops.read_file(_string("read_file", "filename", filename),
                                     name=name or "ReadFile"))


def write_file(filename: Any, contents: Any, name: Optional[str] = None) -> Any:
    """The node that writes `contents` (bytes, str or a string tensor) to `filename`, making the
    folders on the way, on every run; running it gives None, as TF's operation."""
    node = _ops.write_file(_string("write_file", "filename", filename),
                           _string("write_file", "contents", contents), name=name or "WriteFile")
    return node.op


_FILES = ("read_file", "write_file")
NAMES = {name: value for name, value in dict(globals()).items()
         if not name.startswith("_") and callable(value) and name not in _FILES
         and getattr(value, "__module__", "") == __name__}
# tf.io's names of this module (the image files and whole files) and the top level's
IO = {name: globals()[name] for name in (
    "decode_png", "decode_jpeg", "decode_bmp", "decode_gif", "decode_image", "encode_png",
    "encode_jpeg", "read_file", "write_file")}
FILES = {name: globals()[name] for name in _FILES}
