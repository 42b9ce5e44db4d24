"""`tf.Variable(collections=...)` puts the variable in those collections alone (a trainable one in
TRAINABLE_VARIABLES too), as TensorFlow does: a local variable is not a global one, so the
global initializer and a default Saver leave it out."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf


def test_given_collections_replace_the_global_one():
    with tf.Graph().as_default():
        local = tf.Variable(tf.zeros([2]), collections=[tf.GraphKeys.LOCAL_VARIABLES], name="l")
        plain = tf.Variable(1.0, name="g")
        mine = tf.Variable(2.0, trainable=False, collections=["mine"], name="m")
        named = tf.get_variable("v", [1], collections=[tf.GraphKeys.LOCAL_VARIABLES])
        assert tf.global_variables() == [plain]
        assert tf.local_variables() == [local, named]
        assert tf.trainable_variables() == [local, plain, named]
        assert tf.get_collection("mine") == [mine]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            assert sess.run(plain) == 1.0
            with pytest.raises(tf.errors.FailedPreconditionError, match="'l' is not initialised"):
                sess.run(local)
            sess.run(tf.local_variables_initializer())
            np.testing.assert_array_equal(sess.run(local), [0.0, 0.0])
        assert tf.train.Saver().var_list == [plain]


def test_checkpoints_are_read_back_by_tf_trains_readers(tmp_path):
    """list_variables, load_variable, load_checkpoint / NewCheckpointReader (names with or
    without ':0'), checkpoint_exists: refused by name before; TF1 programs inspect their
    checkpoints with them."""
    tf.reset_default_graph()
    with tf.variable_scope("layer"):
        w = tf.get_variable("w", [2, 3], initializer=tf.constant_initializer(1.5))
    step = tf.Variable(7, name="step")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=3)
    assert tf.train.list_variables(str(tmp_path)) == [("layer/w", [2, 3]), ("step", [])]
    np.testing.assert_array_equal(tf.train.load_variable(path, "layer/w"), np.full((2, 3), 1.5))
    reader = tf.train.NewCheckpointReader(path)
    assert reader.has_tensor("step") and not reader.has_tensor("other")
    assert reader.get_tensor("step:0") == 7
    assert reader.get_variable_to_dtype_map()["layer/w"] == np.float32
    assert tf.train.load_checkpoint(str(tmp_path)).get_variable_to_shape_map()["step"] == []
    assert tf.train.checkpoint_exists(path) and not tf.train.checkpoint_exists(path + "x")
    with pytest.raises(tf.errors.NotFoundError, match="Key other not found"):
        reader.get_tensor("other")
    (tmp_path / "empty").mkdir()
    with pytest.raises(tf.OpsdkError, match="no checkpoint in folder"):
        tf.train.list_variables(str(tmp_path / "empty"))
    assert w.shape.as_list() == [2, 3]
