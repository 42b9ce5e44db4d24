"""`tf.train.MonitoredTrainingSession` and its hooks in one process: a TF1 training loop as
written, the hook protocol, checkpoints and summaries, and the errors of misuse. The cluster
case is tests/dist/test_tf1.py."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import events

TRUE_W = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()


def _model(summaries=False):
    x = tf.placeholder(tf.float32, [16, 4], name="x")
    y = tf.placeholder(tf.float32, [16, 1], name="y")
    w = tf.Variable(tf.zeros([4, 1]), name="w")
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    global_step = tf.train.get_or_create_global_step()
    if summaries:
        tf.summary.scalar("loss", loss)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    return x, y, w, loss, train_op, global_step


def _batch(rng):
    xb = rng.standard_normal((16, 4)).astype(np.float32)
    return xb, xb @ TRUE_W


def test_a_tf1_training_loop_stops_checkpoints_resumes_and_writes_summaries(tmp_path, caplog):
    rng = np.random.default_rng(0)
    steps_run, losses = [], []
    for last_step in (30, 50):  # the second session resumes from the first one's checkpoint
        tf.reset_default_graph()
        x, y, w, loss, train_op, global_step = _model(summaries=True)
        hooks = [tf.train.StopAtStepHook(last_step=last_step), tf.train.NanTensorHook(loss)]
        ran = 0
        with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), hooks=hooks,
                                               save_checkpoint_steps=10, save_summaries_steps=5,
                                               log_step_count_steps=10) as sess:
            assert isinstance(sess, tf.train.MonitoredSession)
            while not sess.should_stop():
                xb, yb = _batch(rng)
                losses.append(sess.run([loss, train_op], {x: xb, y: yb})[0])
                ran += 1
        steps_run.append(ran)
    assert steps_run == [30, 20]
    assert losses[-1] < 1e-3 * losses[0]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-50")
    assert (tmp_path / "model.ckpt-40").exists() and not (tmp_path / "model.ckpt-0").exists()
    written = events.read_summaries(tmp_path)
    loss_steps = sorted({step for step, summary in written if b"loss" in summary})
    assert loss_steps[:3] == [0, 5, 10] and 45 in loss_steps, loss_steps
    rates = sorted(step for step, summary in written if b"global_step/sec" in summary)
    assert rates[:2] == [10, 20], rates  # the step counter: every 10 steps, from the second
    # a third session at the last step: one run, then the hook (which checks after a run) stops
    tf.reset_default_graph()
    x, y, w, loss, train_op, global_step = _model()
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                           hooks=[tf.train.StopAtStepHook(last_step=50)]) as sess:
        step, weights = sess.run([global_step, w])
        assert step == 50  # restored, not initialised
        np.testing.assert_allclose(weights, TRUE_W, atol=1e-3)
        assert sess.should_stop()


class Recorder(tf.train.SessionRunHook):
    """Writes down each call it gets; asks for `fetches` and `feeds` in every run."""

    def __init__(self, calls, fetches=None, feeds=None, stop_after=None):
        self.calls, self.fetches, self.feeds, self.stop_after = calls, fetches, feeds, stop_after
        self.runs = 0

    def begin(self):
        self.calls.append("begin")

    def after_create_session(self, session, coord):
        self.calls.append("after_create_session")
        assert isinstance(coord, tf.train.Coordinator)

    def before_run(self, run_context):
        self.calls.append("before_run")
        if self.fetches is None and self.feeds is None:
            return None
        return tf.train.SessionRunArgs(self.fetches, self.feeds)

    def after_run(self, run_context, run_values):
        self.calls.append(("after_run", run_values.results))
        self.runs += 1
        if self.runs == self.stop_after:
            run_context.request_stop()

    def end(self, session):
        self.calls.append("end")


def test_hooks_add_fetches_and_feeds_to_each_run_and_may_stop_it():
    a = tf.placeholder(tf.float32, [], name="a")
    b = tf.placeholder(tf.float32, [], name="b")
    total = a + b
    calls = []
    hook = Recorder(calls, fetches={"sum": total, "twice_b": b * 2.0}, feeds={b: 10.0},
                    stop_after=2)
    with tf.train.MonitoredSession(hooks=[hook]) as sess:
        assert calls == ["begin", "after_create_session"]
        assert sess.run(total, {a: 1.0}) == 11.0  # the hook fed b
        assert not sess.should_stop()
        assert sess.run(a, {a: 2.0}) == 2.0
        assert sess.should_stop()  # the hook asked after its second run
        with pytest.raises(RuntimeError, match="after should_stop"):  # TF's class; an OpsdkError too
            sess.run(a, {a: 3.0})
    with pytest.raises(RuntimeError, match="on a closed session"):
        sess.run(a, {a: 3.0})
    assert calls[2:] == ["before_run", ("after_run", {"sum": 11.0, "twice_b": 20.0}),
                         "before_run", ("after_run", {"sum": 12.0, "twice_b": 20.0}), "end"]


def test_a_tensor_fed_twice_is_refused_naming_it():
    a = tf.placeholder(tf.float32, [], name="a")
    with tf.train.MonitoredSession(hooks=[Recorder([], feeds={a: 1.0})]) as sess:
        with pytest.raises(OpsdkError, match="fed by a hook and the caller: a"):
            sess.run(a, {a: 2.0})
    tf.reset_default_graph()  # the session finalized the graph, as TensorFlow's does
    a = tf.placeholder(tf.float32, [], name="a")
    hooks = [Recorder([], feeds={a: 1.0}), Recorder([], feeds={a: 2.0})]
    with tf.train.MonitoredSession(hooks=hooks) as sess:
        with pytest.raises(OpsdkError, match="fed by two hooks: a"):
            sess.run(a)


def test_leaving_on_out_of_range_or_stop_iteration_ends_quietly_and_other_errors_skip_end():
    for quiet in (tf.errors.OutOfRangeError(None, None, "end of the data"), StopIteration()):
        calls = []
        with tf.train.MonitoredSession(hooks=[Recorder(calls)]):
            raise quiet
        assert calls[-1] == "end"
    calls = []
    with pytest.raises(ValueError, match="the program's own"):
        with tf.train.MonitoredSession(hooks=[Recorder(calls)]):
            raise ValueError("the program's own error")
    assert "end" not in calls


def test_run_errors_are_tf_errors_classes():
    v = tf.Variable(1.0)
    x = tf.placeholder(tf.float32, [2])
    y = x * 2.0
    with tf.train.MonitoredSession() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be fed"):
            sess.run(y)
        assert sess.run(v) == 1.0  # the default scaffold initialised it
        with pytest.raises(RuntimeError, match="graph is finalized"):  # as TensorFlow's
            sess.run(x * 3.0)


def test_nan_tensor_hook_raises_or_stops():
    x = tf.placeholder(tf.float32, [])
    loss = x * 2.0
    with tf.train.MonitoredSession(hooks=[tf.train.NanTensorHook(loss)]) as sess:
        sess.run(loss, {x: 4.0})
        with pytest.raises(tf.train.NanLossDuringTrainingError, match="NaN loss"):
            sess.run(loss, {x: np.nan})
    with tf.train.MonitoredSession(hooks=[tf.train.NanTensorHook(loss, False)]) as sess:
        sess.run(loss, {x: np.nan})
        assert sess.should_stop()


def test_logging_tensor_hook_logs_every_n_iterations_and_at_the_end(caplog):
    counter = tf.Variable(0, name="counter")
    bump = tf.assign_add(counter, 1)
    hook = tf.train.LoggingTensorHook({"count": counter}, every_n_iter=2, at_end=True)
    formatted = tf.train.LoggingTensorHook([counter], every_n_iter=3,
                                           formatter=lambda v: f"seen {list(v.values())}")
    with caplog.at_level(logging.INFO, logger="opsdk.v1"):
        with tf.train.MonitoredSession(hooks=[hook, formatted]) as sess:
            for _ in range(5):
                sess.run(bump)
    lines = [r.getMessage() for r in caplog.records]
    # counter read in the runs 0, 2 and 4 (before or after that run's bump), then at the end
    assert sum(line.startswith("count = ") for line in lines) == 4, lines
    assert lines[-1] == "count = 5"
    assert sum(line.startswith("seen ") for line in lines) == 2, lines
    with pytest.raises(OpsdkError, match="exactly one of every_n_iter and every_n_secs"):
        tf.train.LoggingTensorHook({"c": counter})


def test_feed_fn_final_ops_and_step_fn():
    a = tf.placeholder(tf.float32, [], name="a")
    total = tf.Variable(0.0)
    add = tf.assign_add(total, a)
    final = tf.train.FinalOpsHook(total * 10.0)
    fed = iter([1.0, 2.0, 3.0])
    calls = []
    hooks = [tf.train.FeedFnHook(lambda: {a: next(fed)}), final, Recorder(calls)]
    with tf.train.MonitoredSession(hooks=hooks) as sess:
        assert sess.run(add) == 1.0

        seen = []

        def step_fn(step_context):
            seen.append(step_context.session.run(total))  # no hooks: nothing fed, no call
            value = step_context.run_with_hooks(add)
            if value >= 6.0:
                step_context.request_stop()
            return value

        before = calls.count("before_run")
        assert sess.run_step_fn(step_fn) == 3.0
        assert calls.count("before_run") == before + 1
        assert sess.run_step_fn(step_fn) is None and sess.should_stop()  # 6.0: stopped
        assert seen == [1.0, 3.0]
    assert final.final_ops_values == 60.0
    with tf.train.MonitoredSession() as sess:
        with pytest.raises(OpsdkError, match="one argument named step_context"):
            sess.run_step_fn(lambda ctx: None)


def test_scaffold_init_fn_runs_on_a_fresh_start_and_not_after_a_restore(tmp_path):
    w = tf.Variable(tf.zeros([2]), name="w")
    tf.train.get_or_create_global_step()
    started = []
    assign = tf.assign(w, [5.0, 6.0])  # built before the session finalizes the graph

    def init_fn(scaffold, session):
        started.append(True)
        session.run(assign)

    scaffold = tf.train.Scaffold(init_fn=init_fn)
    with tf.train.SingularMonitoredSession(scaffold=scaffold, checkpoint_dir=str(tmp_path),
                                           hooks=[tf.train.CheckpointSaverHook(
                                               str(tmp_path), save_steps=1,
                                               scaffold=scaffold)]) as sess:
        np.testing.assert_array_equal(sess.raw_session().run(w), [5.0, 6.0])
    assert started == [True]
    with tf.train.SingularMonitoredSession(scaffold=tf.train.Scaffold(init_fn=init_fn),
                                           checkpoint_dir=str(tmp_path)) as sess:
        np.testing.assert_array_equal(sess.run(w), [5.0, 6.0])  # restored
    assert started == [True]


def test_checkpoint_listeners_and_misuse():
    class Listener(tf.train.CheckpointSaverListener):
        def __init__(self):
            self.saved = []

        def after_save(self, session, step):
            self.saved.append(step)
            return step >= 2  # stop after the save of step 2

    tf.Variable(1.0)
    step = tf.train.get_or_create_global_step()
    bump = tf.assign_add(step, 1)
    import tempfile

    listener = Listener()
    with tempfile.TemporaryDirectory() as folder:
        hook = tf.train.CheckpointSaverHook(folder, save_steps=2, listeners=[listener])
        with tf.train.MonitoredSession(hooks=[hook]) as sess:
            while not sess.should_stop():
                sess.run(bump)
    assert listener.saved == [0, 2]
    with pytest.raises(OpsdkError, match="exactly one of every_secs and every_steps"):
        tf.train.CheckpointSaverHook("x")
    with pytest.raises(OpsdkError, match="a saver or a scaffold, not both"):
        tf.train.CheckpointSaverHook("x", save_steps=1, saver=object(), scaffold=object())


def test_misuse_gets_clear_errors():
    tf.Variable(1.0)
    with pytest.raises(OpsdkError, match="StopAtStepHook needs a global step"):
        tf.train.MonitoredSession(hooks=[tf.train.StopAtStepHook(last_step=3)])
    with pytest.raises(OpsdkError, match="exactly one of num_steps and last_step"):
        tf.train.StopAtStepHook()
    with pytest.raises(OpsdkError, match="is_chief=False.*tf.train.Server's target"):
        tf.train.MonitoredTrainingSession(is_chief=False)
    with pytest.raises(OpsdkError, match="hooks must be SessionRunHooks"):
        tf.train.MonitoredSession(hooks=[object()])


def test_the_coordinator_stops_threads_together_and_raises_their_error():
    coord = tf.train.Coordinator()
    stopped = []

    def worker(fail):
        with coord.stop_on_exception():
            while not coord.should_stop():
                if fail:
                    raise RuntimeError("a worker thread failed")
                coord.wait_for_stop(0.01)
            stopped.append(True)

    threads = [threading.Thread(target=worker, args=(i == 2,)) for i in range(3)]
    [t.start() for t in threads]
    with pytest.raises(RuntimeError, match="a worker thread failed"):
        coord.join(threads, stop_grace_period_secs=10)
    assert stopped == [True, True] and coord.joined
    clean = tf.train.Coordinator()
    clean.request_stop(tf.errors.OutOfRangeError(None, None, "the data ended"))
    clean.join([])  # the end of the data is a clean stop: nothing raised


def test_a_variable_named_global_step_is_the_global_step_as_in_tensorflow():
    # tf.Variable(0, name='global_step') without the collection, as many TF1 scripts make it
    step = tf.Variable(0, dtype=tf.int32, trainable=False, name="global_step")
    bump = tf.assign_add(step, 1)
    assert tf.train.get_global_step() is step and tf.train.get_or_create_global_step() is step
    values = []
    with tf.train.MonitoredSession(hooks=[tf.train.StopAtStepHook(last_step=3)]) as sess:
        while not sess.should_stop():
            values.append(sess.run(bump))
    assert values == [1, 2, 3]


def test_a_custom_creators_session_is_run_without_options_it_may_not_take():
    import opsdk

    tf.reset_default_graph()
    doubled = tf.constant(3.0) * 2.0

    class PlainCreator(tf.train.SessionCreator):
        def create_session(self):
            return opsdk.Session(tf.get_default_graph())  # its run takes no options

    with tf.train.MonitoredSession(session_creator=PlainCreator()) as sess:
        assert sess.run(doubled) == 6.0
