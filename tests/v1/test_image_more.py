"""tf.image's total_variation, image_gradients, sobel_edges, psnr, ssim, adjust_gamma, YUV/YIQ,
resize_bicubic/resize_area and extract_image_patches (opsdk/v1/image_more.py): the values
TensorFlow 2.21's compat.v1 gave on the same script (its sums and first values, to the digits
it printed), gradients included."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError


def test_image_functions_give_tensorflows_values():
    tf.reset_default_graph()
    rng = np.random.default_rng(0)
    v = rng.random((2, 16, 14, 3)).astype(np.float32)
    w = np.clip(v + rng.normal(0, 0.05, v.shape), 0, 1).astype(np.float32)
    x = tf.placeholder(tf.float32, [2, 16, 14, 3])
    y = tf.placeholder(tf.float32, [2, 16, 14, 3])
    u8 = tf.constant((v * 255).astype(np.uint8))
    outs = {
        "tv": tf.image.total_variation(x), "tv3": tf.image.total_variation(x[0]),
        "grads": tf.image.image_gradients(x)[1], "sobel": tf.image.sobel_edges(x),
        "psnr": tf.image.psnr(x, y, 1.0),
        "psnr_u8": tf.image.psnr(u8, tf.constant((w * 255).astype(np.uint8)), 255),
        "ssim": tf.image.ssim(x, y, 1.0),
        "ssim7": tf.image.ssim(x, y, 1.0, filter_size=7, filter_sigma=1.0),
        "gamma": tf.image.adjust_gamma(x, 2.2, 1.5), "gamma_u8": tf.image.adjust_gamma(u8, 0.5),
        "yuv": tf.image.rgb_to_yuv(x), "yiq_back": tf.image.yiq_to_rgb(tf.image.rgb_to_yiq(x)),
        "bicubic": tf.image.resize_bicubic(x, [20, 9]), "area": tf.image.resize_area(x, [8, 7]),
        "patches": tf.extract_image_patches(x, [1, 3, 2, 1], [1, 2, 3, 1], [1, 1, 1, 1], "VALID"),
        "patches_same": tf.image.extract_image_patches(x, [1, 3, 3, 1], [1, 1, 1, 1],
                                                       [1, 2, 2, 1], "SAME"),
        "patches_u8": tf.extract_image_patches(u8, [1, 2, 2, 1], [1, 2, 2, 1], [1, 1, 1, 1],
                                               "SAME"),
    }
    (g,) = tf.gradients(tf.reduce_sum(outs["ssim"]) + tf.reduce_sum(outs["tv"]) * 1e-3
                        + tf.reduce_sum(outs["patches"] ** 2), x)
    with tf.Session() as sess:
        got, grad = sess.run([outs, g], {x: v, y: w})
    want = {"tv": ((2,), 817.753, [407.8893, 409.864]), "tv3": ((), 407.889, [407.8893]),
            "grads": ((2, 16, 14, 3), 4.606, [-0.6204, 0.5435, 0.8718, 0.5901]),
            "sobel": ((2, 16, 14, 3, 2), -14.592, [0.0, 0.0, 0.0, 0.0]),
            "psnr": ((2,), 52.194, [25.9344, 26.2594]),
            "psnr_u8": ((2,), 52.184, [25.9324, 26.2514]),
            "ssim": ((2,), 1.965, [0.9833, 0.982]), "ssim7": ((2,), 1.965, [0.9819, 0.9833]),
            "gamma": ((2, 16, 14, 3), 637.889, [0.5561, 0.084, 0.0013, 0.0002]),
            "gamma_u8": ((2, 16, 14, 3), 228907.0, [203.0, 131.0, 50.0, 32.0]),
            "yuv": ((2, 16, 14, 3), 225.681, [0.3535, -0.1538, 0.2487, 0.5864]),
            "yiq_back": ((2, 16, 14, 3), 679.198, [0.6369, 0.2698, 0.0409, 0.0165]),
            "bicubic": ((2, 20, 9, 3), 540.97, [0.637, 0.2698, 0.041, 0.2636]),
            "area": ((2, 8, 7, 3), 169.803, [0.5345, 0.412, 0.4921, 0.4663]),
            "patches": ((2, 7, 5, 18), 641.758, [0.637, 0.2698, 0.041, 0.0165]),
            "patches_same": ((2, 16, 14, 27), 5071.526, [0.0, 0.0, 0.0, 0.0]),
            "patches_u8": ((2, 8, 7, 12), 172530.0, [162.0, 68.0, 10.0, 4.0])}
    for key, (shape, total, first) in want.items():
        value = np.asarray(got[key])
        assert value.shape == shape, key
        assert float(np.sum(value.astype(np.float64))) == pytest.approx(total, abs=2e-3), key
        np.testing.assert_allclose(value.ravel()[:4].astype(np.float64), first, atol=1e-4,
                                   err_msg=key)
    assert got["gamma_u8"].dtype == np.uint8 and got["patches_u8"].dtype == np.uint8
    assert float(grad.sum()) == pytest.approx(1283.514, abs=2e-3)
    np.testing.assert_allclose(grad.ravel()[:4], [1.2759, 0.5376, 0.0799, 0.0301], atol=1e-4)


def test_mistakes_are_named():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [1, 8, 8, 1])
    with pytest.raises(OpsdkError, match="must be at least filter_size 11 high and wide"):
        tf.image.ssim(x, x, 1.0)
    with pytest.raises(OpsdkError, match="strides and rates both above 1 are not supported"):
        tf.extract_image_patches(x, [1, 2, 2, 1], [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    with pytest.raises(OpsdkError, match="give images of rank 4"):
        tf.image.sobel_edges(x[0])


def test_non_max_suppression_chooses_as_tensorflow():
    # TF 2.21's compat.v1 chose these indices on the same script (a tie, a box given by its
    # other diagonal, a score threshold and a limit fed at run time included)
    tf.reset_default_graph()
    rng = np.random.default_rng(4)
    centre, half = rng.random((60, 2)) * 10, rng.random((60, 2)) * 3 + 0.5
    boxes = np.concatenate([centre - half / 2, centre + half / 2], 1).astype(np.float32)
    boxes[5] = boxes[5][[2, 3, 0, 1]]
    scores = rng.random(60).astype(np.float32)
    scores[7] = scores[8]
    b, s = tf.placeholder(tf.float32, [None, 4]), tf.placeholder(tf.float32, [None])
    k = tf.placeholder(tf.int32, [])
    outs = [tf.image.non_max_suppression(b, s, 10), tf.image.non_max_suppression(b, s, 100, 0.3),
            tf.image.non_max_suppression(b, s, k, 0.6, score_threshold=0.5),
            tf.image.non_max_suppression(b, s, 0)]
    with tf.Session() as sess:
        got = sess.run(outs, {b: boxes, s: scores, k: 20})
    first = [7, 8, 54, 31, 57, 25, 1, 49, 46, 30]
    assert all(g.dtype == np.int32 for g in got)
    assert got[0].tolist() == first
    assert got[1].tolist() == first + [13, 33, 51, 40, 35, 5, 50, 23, 53, 37, 48, 56, 17, 10,
                                       39, 34, 11, 47, 12, 55, 27, 9, 22, 58, 45, 4, 28, 20, 3]
    assert got[2].tolist() == first + [13, 29, 33, 51, 40, 35, 5, 50, 23, 53]
    assert got[3].tolist() == []
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_output_size must be >= 0"):
        with tf.Session() as sess:
            sess.run(outs[2], {b: boxes, s: scores, k: -1})


def test_crop_and_resize_and_its_gradients_are_tensorflows():
    # TF 2.21's compat.v1 printed these sums and first values on the same script: boxes inside,
    # whole, past the image's edge, flipped and of no size; bilinear and nearest
    tf.reset_default_graph()
    rng = np.random.default_rng(5)
    image = rng.random((2, 9, 11, 3)).astype(np.float32)
    boxes = np.array([[0.1, 0.2, 0.7, 0.9], [0.0, 0.0, 1.0, 1.0], [-0.2, 0.3, 0.5, 1.3],
                      [0.6, 0.6, 0.2, 0.1], [0.5, 0.5, 0.5, 0.5]], np.float32)
    x = tf.placeholder(tf.float32, [None, 9, 11, 3])
    b = tf.placeholder(tf.float32, [None, 4])
    which = tf.constant([0, 1, 1, 0, 1])
    outs = [tf.image.crop_and_resize(x, b, which, [4, 5]),
            tf.image.crop_and_resize(x, b, which, [1, 3], extrapolation_value=-1.0),
            tf.image.crop_and_resize(x, b, which, [3, 3], method="nearest")]
    grads = tf.gradients(tf.reduce_sum(outs[0] * outs[0]) + tf.reduce_sum(outs[1]), [x, b])
    with tf.Session() as sess:
        got = sess.run(outs + grads, {x: image, b: boxes})
    want = [((5, 4, 5, 3), 137.8684, [0.6405, 0.3679, 0.6489, 0.4665]),
            ((5, 1, 3, 3), 18.1505, [0.4633, 0.5158, 0.1684, 0.4618]),
            ((5, 3, 3, 3), 60.1487, [0.6985, 0.4485, 0.7989, 0.8449]),
            ((2, 9, 11, 3), 317.7367, [0.0, 0.0, 0.0, 0.0]),
            ((5, 4), 66.4915, [1.7035, -17.7734, 8.1913, -0.3513])]
    for value, (shape, total, first) in zip(got, want):
        assert value.shape == shape
        assert float(value.sum()) == pytest.approx(total, abs=2e-3)
        np.testing.assert_allclose(value.ravel()[:4], first, atol=2e-4)
