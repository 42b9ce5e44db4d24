"""tf.image (opsdk/v1/image.py) against NumPy: flips, crops, pads, TF1's resize conventions,
colour conversions, standardization; gradients flow; mistakes are named."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf

RNG = np.random.default_rng(0)
A = RNG.random((2, 5, 7, 3)).astype(np.float32)
U = (RNG.random((5, 7, 3)) * 255).astype(np.uint8)


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def _run(*tensors):
    with tf.Session() as sess:
        return sess.run(list(tensors))


def _bilinear_reference(img, out_h, out_w, align_corners=False):
    def axis(n_in, n_out):
        scale = (n_in - 1) / (n_out - 1) if align_corners and n_out > 1 else n_in / n_out
        where = np.arange(n_out) * scale
        low = np.floor(where).astype(int)
        return low, np.minimum(low + 1, n_in - 1), where - low
    y0, y1, fy = axis(img.shape[-3], out_h)
    x0, x1, fx = axis(img.shape[-2], out_w)
    top = img[..., y0, :, :] + (img[..., y1, :, :] - img[..., y0, :, :]) * fy[:, None, None]
    return top[..., x0, :] + (top[..., x1, :] - top[..., x0, :]) * fx[:, None]


def test_flips_crops_and_pads_match_numpy():
    x = tf.constant(A)
    got = _run(tf.image.flip_left_right(x), tf.image.flip_up_down(A[0]),
               tf.image.transpose_image(x), tf.image.rot90(A[0], 3),
               tf.image.crop_to_bounding_box(x, 1, 2, 3, 4),
               tf.image.pad_to_bounding_box(A[0], 1, 2, 8, 10),
               tf.image.resize_image_with_crop_or_pad(x, 4, 9), tf.image.central_crop(A[0], 0.5))
    np.testing.assert_array_equal(got[0], A[:, :, ::-1])
    np.testing.assert_array_equal(got[1], A[0, ::-1])
    np.testing.assert_array_equal(got[2], A.transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(got[3], np.rot90(A[0], 3, axes=(0, 1)))
    np.testing.assert_array_equal(got[4], A[:, 1:4, 2:6])
    np.testing.assert_array_equal(got[5], np.pad(A[0], [[1, 2], [2, 1], [0, 0]]))
    np.testing.assert_array_equal(got[6], np.pad(A[:, 0:4], [[0, 0], [0, 0], [1, 1], [0, 0]]))
    np.testing.assert_array_equal(got[7], A[0, 1:4, 1:6])  # int((5 - 2.5) / 2), int((7 - 3.5) / 2)


def test_resizing_follows_tf1s_corner_convention():
    x = tf.placeholder(tf.float32, [None, 5, 7, 3])
    bilinear = tf.image.resize_images(x, [9, 4])
    aligned = tf.image.resize_images(x, [8, 8], align_corners=True)
    nearest = tf.image.resize_nearest_neighbor(x, [3, 11])
    (grad,) = tf.gradients(tf.reduce_sum(bilinear), [x])
    with tf.Session() as sess:
        got = sess.run([bilinear, aligned, nearest, grad], {x: A})
    np.testing.assert_allclose(got[0], _bilinear_reference(A, 9, 4), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], _bilinear_reference(A, 8, 8, True), rtol=1e-5, atol=1e-6)
    rows = np.floor(np.arange(3) * 5 / 3).astype(int)
    cols = np.minimum(np.floor(np.arange(11) * 7 / 11).astype(int), 6)
    np.testing.assert_array_equal(got[2], A[:, rows][:, :, cols])
    assert got[3].shape == A.shape and abs(got[3].sum() - 2 * 9 * 4 * 3) < 1e-3
    assert _run(tf.image.resize_images(U, [3, 4]))[0].dtype == np.float32


def test_colour_conversions_and_standardization():
    x = tf.constant(A)
    got = _run(tf.image.rgb_to_grayscale(x), tf.image.rgb_to_grayscale(U),
               tf.image.adjust_contrast(x, 1.7), tf.image.per_image_standardization(x),
               tf.image.convert_image_dtype(U, tf.float32),
               tf.image.convert_image_dtype(A * 2, tf.uint8, saturate=True))
    weights = np.array([0.2989, 0.5870, 0.1140])
    np.testing.assert_allclose(got[0][..., 0], A @ weights, rtol=1e-5)
    want_u8 = ((U / 255.0) @ weights * 255.5).astype(np.uint8)  # through floats, as TF's
    assert np.abs(got[1][..., 0].astype(int) - want_u8).max() <= 1
    mean = A.mean(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(got[2], (A - mean) * 1.7 + mean, rtol=1e-5, atol=1e-6)
    flat = A.reshape(2, -1)
    std = np.maximum(flat.std(axis=1), 1 / np.sqrt(flat.shape[1]))[:, None, None, None]
    np.testing.assert_allclose(got[3], (A - flat.mean(axis=1)[:, None, None, None]) / std,
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[4], U / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(got[5], np.minimum(A * 2 * 255.5, 255).astype(np.uint8))


def test_random_flips_flip_each_image_of_a_batch_on_its_own():
    batch = np.broadcast_to(A[:1], (64, 5, 7, 3)).copy()
    flipped = _run(tf.image.random_flip_left_right(batch, seed=3))[0]
    same = [np.array_equal(f, batch[0]) for f in flipped]
    mirrored = [np.array_equal(f, batch[0, :, ::-1]) for f in flipped]
    assert all(s or m for s, m in zip(same, mirrored)) and 10 < sum(mirrored) < 54


def test_mistakes_are_named():
    with pytest.raises(tf.OpsdkError, match=r"image.flip_left_right: .* must be \[height, width"):
        tf.image.flip_left_right(tf.zeros([3, 3]))
    with pytest.raises(tf.OpsdkError, match="pad_to_bounding_box: a 5x7 image at offset"):
        tf.image.pad_to_bounding_box(A[0], 1, 2, 4, 4)
    with pytest.raises(tf.OpsdkError, match="method 7 is not one of"):
        tf.image.resize_images(A, [3, 3], method=7)
    with pytest.raises(AttributeError):
        tf.image.decode_and_crop_jpeg  # not provided (decode_png is: tests/v1/test_image_codec.py)


def test_resizes_and_crops_take_sizes_known_only_at_run_time():
    # A decoded file's height and width are known when the step runs; before, resize_images,
    # resize_image_with_crop_or_pad and central_crop refused them.
    value = np.random.default_rng(5).random((5, 7, 2)).astype(np.float32)
    unknown = tf.placeholder(tf.float32, [None, None, 2])
    known = tf.constant(value)
    pairs = [(f(unknown), f(known)) for f in (
        lambda x: tf.image.resize_images(x, [3, 4]),
        lambda x: tf.image.resize_images(x, [8, 3], method=1, align_corners=True),
        lambda x: tf.image.resize_image_with_crop_or_pad(x, 3, 9),
        lambda x: tf.image.resize_image_with_crop_or_pad(x, 8, 4),
        lambda x: tf.image.central_crop(x, 0.5))]
    grad, = tf.gradients(tf.reduce_sum(pairs[0][0] ** 2), [unknown])
    with tf.Session() as sess:
        for run_time, static in pairs:
            a, b = sess.run([run_time, static], {unknown: value})
            np.testing.assert_allclose(a, b, rtol=1e-6)
        assert sess.run(grad, {unknown: value}).shape == value.shape


def _hsv_reference(rgb, change):
    import colorsys

    out = np.empty_like(rgb)
    for index in np.ndindex(rgb.shape[:-1]):
        h, s, v = colorsys.rgb_to_hsv(*rgb[index])
        out[index] = colorsys.hsv_to_rgb(*change(h, s, v))
    return out


def test_hsv_hue_and_saturation_as_tf_computes_them():
    rgb = np.random.default_rng(0).random((3, 4, 3)).astype(np.float32)
    rgb[0, 0], rgb[0, 1], rgb[0, 2] = [0.5, 0.5, 0.5], [0, 0, 0], [1, 0, 0]  # grey, black, red
    x = tf.constant(rgb)
    decoded = tf.placeholder(tf.float32, [None, None, None])  # a decoded file's channels
    with tf.Session() as sess:
        hsv, back, turned, faded, run_time = sess.run([
            tf.image.rgb_to_hsv(x), tf.image.hsv_to_rgb(tf.image.rgb_to_hsv(x)),
            tf.image.adjust_hue(x, -0.45), tf.image.adjust_saturation(x, 0.5),
            tf.image.adjust_saturation(decoded, 2.0)], {decoded: rgb})
        with pytest.raises(tf.OpsdkError, match="does not have the sizes declared"):
            sess.run(tf.image.adjust_hue(decoded, 0.1), {decoded: np.ones((2, 2, 4))})
    import colorsys

    want = np.array([[colorsys.rgb_to_hsv(*p) for p in row] for row in rgb])
    np.testing.assert_allclose(hsv, want, atol=1e-6)
    np.testing.assert_allclose(back, rgb, atol=1e-6)
    np.testing.assert_allclose(turned, _hsv_reference(rgb, lambda h, s, v: ((h - 0.45) % 1, s,
                                                                             v)), atol=1e-5)
    np.testing.assert_allclose(faded, _hsv_reference(rgb, lambda h, s, v: (h, s / 2, v)),
                               atol=1e-5)
    np.testing.assert_allclose(run_time, _hsv_reference(
        rgb, lambda h, s, v: (h, min(2 * s, 1.0), v)), atol=1e-5)


def test_bounding_boxes_drawn_and_sampled():
    boxes = tf.constant([[[0.2, 0.0, 0.6, 0.5]]])
    drawn = tf.image.draw_bounding_boxes(tf.zeros([1, 6, 5, 3]), boxes)
    begin, size, crop = tf.image.sample_distorted_bounding_box(
        tf.constant([40, 60, 3]), boxes, min_object_covered=0.5, seed=3)
    with tf.Session() as sess:
        picture = sess.run(drawn)[0]
        draws = [sess.run([begin, size, crop]) for _ in range(5)]
    yellow = np.array([1, 1, 0], np.float32)  # TF's first colour
    outline = np.zeros((6, 5), bool)
    outline[1, 0:3] = outline[3, 0:3] = outline[1:4, 0] = outline[1:4, 2] = True
    np.testing.assert_array_equal(np.all(picture == yellow, axis=-1), outline)
    for b, s, c in draws:
        assert b[2] == 0 and s[2] == -1 and (b[:2] >= 0).all() and (b[:2] + s[:2] <= [40, 60]).all()
        np.testing.assert_allclose(c[0, 0], [b[0] / 40, b[1] / 60, (b[0] + s[0]) / 40,
                                             (b[1] + s[1]) / 60], rtol=1e-6)


def test_bicubic_and_area_resizes_give_tf1s_values():
    # TF 2.21 compat.v1's resize_images of this image (its legacy kernels: Keys' cubic with a
    # 1024-step table, and area averaging), to the printed digits
    v = (np.arange(12, dtype=np.float32) ** 1.5).reshape(1, 3, 4, 1)
    bicubic = [[0.0, 1.55473, 4.55302], [3.31329, 6.45051, 10.56818],
               [11.34563, 16.33356, 21.87608], [20.24249, 26.0695, 32.40431],
               [24.20666, 30.42354, 37.12176]]
    area = [[3.09836, 5.58902, 8.92429], [18.7454, 23.8538, 29.36671]]
    unknown = tf.placeholder(tf.float32, [1, None, None, 1])
    fetches = [tf.image.resize_images(tf.constant(v), [5, 3], method=2),
               tf.image.resize_images(unknown, [2, 3], method=tf.image.ResizeMethod.AREA),
               tf.image.resize_images(tf.constant(v.astype(np.uint8)), [3, 4], method=3)]
    with tf.Session() as sess:
        got = sess.run(fetches, {unknown: v})
    np.testing.assert_allclose(got[0][0, :, :, 0], bicubic, atol=2e-5)
    np.testing.assert_allclose(got[1][0, :, :, 0], area, atol=2e-5)
    assert got[2].dtype == np.uint8  # already of the size: as it is, as TF's
