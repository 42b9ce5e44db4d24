"""The initializers of opsdk.v1 (opsdk/v1/scopes.py) against the distributions TF1 draws."""

from __future__ import annotations

import numpy as np

import opsdk.v1 as tf


def test_variance_scaling_normal_is_truncated_with_tf1s_correction():
    # TF1's "normal" and "truncated_normal" draw a truncated normal whose standard deviation is
    # sqrt(scale / n) once the cut is made up for; "untruncated_normal" a plain normal. Before,
    # "normal" drew the truncated normal uncorrected (a variance 0.77 of TF's).
    tf.reset_default_graph()
    shape = [400, 400]
    inits = {d: tf.variance_scaling_initializer(2.0, "fan_in", d, seed=1)
             for d in ("normal", "truncated_normal", "untruncated_normal")}
    with tf.Session() as sess:
        values = sess.run([init(shape) for init in inits.values()])
    want = np.sqrt(2.0 / 400)
    for kind, v in zip(inits, values):
        assert abs(v.std() / want - 1) < 0.02, kind
    assert np.abs(values[0]).max() <= 2 * want / 0.87962566 + 1e-6  # cut at two deviations
    assert np.abs(values[2]).max() > 3 * want  # not cut
