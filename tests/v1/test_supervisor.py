"""`tf.train.Supervisor`: a TF1 training loop as written, its services, and its stops."""

from __future__ import annotations

import time

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.v1 import events
from opsdk.registry.errors import OpsdkError


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()


def _model():
    x = tf.placeholder(tf.float32, [8, 2], name="x")
    w = tf.Variable(tf.zeros([2, 1]), name="w")
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - tf.matmul(x, [[1.0], [-2.0]])))
    tf.summary.histogram("weights", w)  # the summary service feeds nothing: not the loss
    global_step = tf.Variable(0, trainable=False, name="global_step")
    train_op = tf.train.GradientDescentOptimizer(0.2).minimize(loss, global_step=global_step)
    return x, w, loss, global_step, train_op


def test_a_supervised_loop_restores_checkpoints_and_summarises(tmp_path):
    rng = np.random.default_rng(1)
    finals = []
    for _ in range(2):  # the second Supervisor goes on from the first one's checkpoint
        tf.reset_default_graph()
        x, w, loss, global_step, train_op = _model()
        sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=0.05,
                                 save_summaries_secs=0.05)
        assert sv.global_step is global_step  # found by its name, as TensorFlow's default
        with sv.managed_session() as sess:
            start = sess.run(global_step)
            while not sv.should_stop():
                _, step = sess.run([train_op, global_step],
                                   {x: rng.standard_normal((8, 2)).astype(np.float32)})
                if step >= start + 25:
                    time.sleep(0.2)  # the services run beside the loop: let them
                    sv.request_stop()
            sv.saver.save(sess, sv.save_path, global_step=global_step)
            finals.append((start, sess.run(global_step)))
    # the step read in a run may precede its own increment: 25 or 26 steps a session
    assert finals[0][0] == 0 and finals[0][1] in (25, 26)
    assert finals[1][0] == finals[0][1] and finals[1][1] - finals[1][0] in (25, 26)
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith(f"model.ckpt-{finals[1][1]}")
    written = events.read_summaries(tmp_path)
    assert any(b"weights" in summary for _, summary in written)  # the summary service
    assert any(b"global_step/sec" in summary for _, summary in written)  # the step counter


def test_an_error_in_the_managed_block_is_raised_after_the_stop_and_out_of_range_ends_it():
    x, w, loss, global_step, train_op = _model()
    sv = tf.train.Supervisor(logdir=None)
    with pytest.raises(ValueError, match="the program's own"):
        with sv.managed_session() as sess:
            raise ValueError("the program's own error")
    assert sv.should_stop()
    sv = tf.train.Supervisor()
    with sv.managed_session() as sess:
        assert sess.run(w).shape == (2, 1)  # initialised
        raise tf.errors.OutOfRangeError(None, None, "the data ended")


def test_a_failing_service_stops_the_loop_and_its_error_is_raised():
    _model()
    sv = tf.train.Supervisor(logdir=None)
    calls = []

    def service():
        calls.append(time.monotonic())
        if len(calls) == 3:
            raise RuntimeError("the service failed")

    with pytest.raises(RuntimeError, match="the service failed"):
        with sv.managed_session():
            sv.loop(0.01, service)
            deadline = time.monotonic() + 30
            while not sv.should_stop():
                assert time.monotonic() < deadline
                time.sleep(0.01)
    assert len(calls) == 3


def test_init_choices_and_misuse():
    x, w, loss, global_step, train_op = _model()
    init = tf.global_variables_initializer()  # before the Supervisor finalizes the graph
    sv = tf.train.Supervisor(init_op=None, init_fn=lambda sess: sess.run(init), saver=None)
    assert tf.get_default_graph().finalized
    with sv.managed_session() as sess:
        assert sess.run(global_step) == 0
    assert sv.saver is None
    # a second Supervisor of the finalized graph finds its initializers in the collections;
    # its default Saver would be a new one, refused there as TensorFlow refuses it
    with pytest.raises(RuntimeError, match="finalized"):
        tf.train.Supervisor()
    assert tf.train.Supervisor(saver=None).init_op is sv_init_op(tf.get_default_graph())
    with tf.Graph().as_default():
        with pytest.raises(OpsdkError, match="tf.train.Server's target"):
            tf.train.Supervisor(is_chief=False).prepare_or_wait_for_session()
        with pytest.raises(OpsdkError, match="is not a queue runner"):
            tf.train.Supervisor().start_queue_runners(None, queue_runners=[object()])


def test_the_supervisors_services_run_the_graphs_queue_runners():
    x, = tf.train.slice_input_producer([np.arange(5, dtype=np.float32)], num_epochs=1,
                                       shuffle=False)
    batch = tf.train.batch([x], batch_size=2, allow_smaller_final_batch=True)
    sv = tf.train.Supervisor(logdir=None)
    got = []
    with sv.managed_session() as sess:
        while not sv.should_stop():
            try:
                got.append(sess.run(batch).tolist())
            except tf.errors.OutOfRangeError:
                break
    assert got == [[0.0, 1.0], [2.0, 3.0], [4.0]]


def sv_init_op(graph):
    return graph.get_collection(tf.GraphKeys.INIT_OP)[0]
