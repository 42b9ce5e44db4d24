"""tf.ConfigProto: the fields opsdk honours reach the session's settings; bad ones are refused."""

from __future__ import annotations

import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError


def test_threads_and_soft_placement_reach_the_session():
    config = tf.ConfigProto(inter_op_parallelism_threads=1, allow_soft_placement=False,
                            log_device_placement=True)
    with tf.Session(config=config) as sess:
        assert sess.config.inter_op_threads == 1 and sess.config.allow_soft_placement is False
        assert sess.tf_config.log_device_placement is True
        assert sess.run(tf.constant(2.0) * 3.0) == 6.0
    with tf.Session(config=tf.ConfigProto()) as sess:  # 0 threads and no placement: opsdk's own
        assert sess.config == tf.Session().config


def test_negative_threads_are_refused():
    with pytest.raises(OpsdkError, match="inter_op_parallelism_threads must be >= 0"):
        tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=-1))
