"""A between-graph TF1 training script (two workers, synchronous replicas) on opsdk.v1."""

from __future__ import annotations

import os
import signal
import threading

import time

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError


def _regression(task_index, cluster, optimizer):
    """The workers' model, as TF1 scripts build it under a replica_device_setter: x @ w fitted
    to y, a global step, and `optimizer`'s train op."""
    with tf.device(tf.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % task_index, cluster=cluster)):
        x = tf.placeholder(tf.float32, [16, 4])
        y = tf.placeholder(tf.float32, [16, 1])
        w = tf.Variable(tf.zeros([4, 1]), name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        global_step = tf.train.get_or_create_global_step()
        train_op = optimizer.minimize(loss, global_step=global_step)
    return x, y, w, loss, global_step, train_op


def _batch(rng):
    xb = rng.standard_normal((16, 4)).astype(np.float32)
    return xb, xb @ np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)


def _two_workers(worker):
    """worker(0) and worker(1) on threads of their own, as two worker scripts' clients; an
    error of either fails the test."""
    errors = []

    def run(i):
        try:
            worker(i)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    [t.start() for t in threads]
    [t.join(300) for t in threads]
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)


def worker_main(task_index, cluster, checkpoint_dir, losses, last_step=20, kill=None,
                recoveries=None):
    """What a TF1 script's worker does, with only `import opsdk.v1 as tf` changed (`kill`:
    the task the chief kills before its 25th step, `recoveries`: where each worker's
    session lists what it recovered from, for the tests below)."""
    server = tf.train.Server(cluster, job_name="worker", task_index=task_index)
    with tf.Graph().as_default():
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                             replicas_to_aggregate=2, total_num_replicas=2)
        x, y, w, loss, global_step, train_op = _regression(task_index, cluster, opt)
        hooks = [opt.make_session_run_hook(task_index == 0),
                 tf.train.StopAtStepHook(last_step=last_step)]
        rng = np.random.default_rng(task_index)
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=(task_index == 0),
                                               checkpoint_dir=checkpoint_dir, hooks=hooks,
                                               save_checkpoint_steps=10) as sess:
            while not sess.should_stop():
                if kill is not None and task_index == 0 and len(losses[0]) == 24:
                    _kill(server.target, kill)
                xb, yb = _batch(rng)
                losses[task_index].append(sess.run([loss, train_op], {x: xb, y: yb})[0])
            if recoveries is not None:
                recoveries[task_index] = list(sess.recoveries)


def _kill(target, task):
    from opsdk.dist import ClusterSession

    probe = ClusterSession(tf.Graph(), target.cluster, task=target.task)
    os.kill(probe.engine_info(task)["pid"], signal.SIGKILL)


def test_between_graph_tf1_script_trains_with_sync_replicas(ray_engine, tmp_path):
    cluster = tf.train.ClusterSpec({"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]})
    assert tf.train.Server(cluster, job_name="ps", task_index=0).join() is None
    losses = {0: [], 1: []}
    # the hosts are placeholders that name no Ray node: Ray places the tasks, with a warning
    with pytest.warns(UserWarning, match=r"its address '(ps0|w0|w1):2222' .*names no alive node") as caught:
        _two_workers(lambda i: worker_main(i, cluster, str(tmp_path), losses))
    # each at the script's line that led to it (worker_main's), not inside opsdk
    assert {w.filename for w in caught if "names no alive node" in str(w.message)} == {__file__}
    assert len(losses[0]) == len(losses[1]) == 20  # one round per step of each
    assert np.mean(losses[0][-3:]) < 0.5 * np.mean(losses[0][:3])
    assert (tmp_path / "checkpoint").exists()  # the chief checkpointed every 10 steps
    # An evaluation script in one process restores what the cluster trained, as with TF.
    latest = tf.train.latest_checkpoint(str(tmp_path))
    assert latest.endswith("ckpt-20.index")
    with tf.Graph().as_default():
        w = tf.Variable(tf.zeros([4, 1]), name="w")
        global_step = tf.train.get_or_create_global_step()
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, latest)
            assert sess.run(global_step) == 20
            np.testing.assert_allclose(sess.run(w).ravel(), [1, 2, 3, 4], atol=0.5)


PS, WORKER_1 = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:1"


@pytest.mark.parametrize("victim", [PS, WORKER_1])
def test_the_monitored_sessions_recover_from_a_killed_task(ray_engine, tmp_path, victim):
    # TensorFlow's MonitoredTrainingSession recovers from a preempted task: the chief
    # restores the latest checkpoint, the others wait for it, the failed call runs again
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"],
                                    "worker": ["localhost:2223", "localhost:2224"]})
    losses, recoveries = {0: [], 1: []}, {}
    _two_workers(lambda i: worker_main(i, cluster, str(tmp_path), losses, last_step=50,
                                       kill=victim, recoveries=recoveries))
    if victim == PS:  # both workers' steps met the dead ps; the chief restored step 20
        assert all(r and PS in r[0] for r in recoveries.values()), recoveries
        # then both ran the 30 rounds to step 50. The chief kills the ps once it has its 24th
        # result; worker 1's reply of that round may still be on its way (the round counted on
        # the ps, then was lost with it), so worker 1 may have 23 results from before the kill
        assert len(losses[0]) == 24 + 30 and len(losses[1]) in (23 + 30, 24 + 30)
    else:  # worker 1's client runs its steady steps itself: it meets the death, or not
        assert all(WORKER_1 in e for r in recoveries.values() for e in r), recoveries
        assert not recoveries[0]  # the chief restored nothing: the ps lost nothing
        # a step that failed on worker 1 after its gradient counted runs again, and counts
        # again (as TensorFlow's would): worker 1 may finish a step short
        assert len(losses[0]) == 50 and len(losses[1]) in (49, 50)
    for w in (0, 1):
        assert np.mean(losses[w][-5:]) < 0.2 * np.mean(losses[w][:5])


def test_monitored_session_needs_a_server_target():
    with pytest.raises(OpsdkError, match="tf.train.Server's target"):
        tf.train.MonitoredTrainingSession(master="grpc://localhost:2222")


def test_a_session_on_a_servers_target_runs_on_its_cluster(ray_engine):
    # the older between-graph form: tf.Session(server.target), variables living on the ps
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2232"],
                                    "worker": ["localhost:2233", "localhost:2234"]})
    server = tf.train.Server(cluster, job_name="worker", task_index=0)
    rng = np.random.default_rng(0)
    with tf.Graph().as_default():
        x, y, w, loss, _, train_op = _regression(0, cluster,
                                                 tf.train.GradientDescentOptimizer(0.1))
        with tf.Session(server.target) as sess:
            assert tf.get_default_session() is sess
            assert sess.task == "/job:worker/replica:0/task:0"
            sess.run(tf.global_variables_initializer())
            for _ in range(40):
                xb, yb = _batch(rng)
                sess.run(train_op, {x: xb, y: yb})
            trained = w.eval()  # through the default session
            with pytest.raises(tf.errors.InvalidArgumentError, match="must be fed"):
                sess.run(loss)
            # RunOptions: a traced step has every task time its nodes; each node's device is
            # its task's location
            meta = tf.RunMetadata()
            traced = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, timeout_in_ms=60_000)
            xb, yb = _batch(rng)
            before = time.time()
            sess.run(train_op, {x: xb, y: yb}, options=traced, run_metadata=meta)
            after = time.time()
            devices = {d.device: [n.node_name for n in d.node_stats]
                       for d in meta.step_stats.dev_stats}
            assert {d.rsplit("/device:", 1)[0] for d in devices} == {
                "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"}
            ps_nodes = next(nodes for d, nodes in devices.items() if d.startswith("/job:ps"))
            assert w.op.name in ps_nodes  # the variable is read where it lives
            every = [n for d in meta.step_stats.dev_stats for n in d.node_stats]
            assert all(before * 1e6 - 1e5 <= n.all_start_micros <= after * 1e6 for n in every)
            trained = w.eval()  # the traced step trained too
            with pytest.raises(TypeError, match="tf.RunOptions"):
                sess.run(loss, {x: xb, y: yb}, options={"timeout_in_ms": 5})
        assert tf.get_default_session() is None
    np.testing.assert_allclose(trained.ravel(), [1, 2, 3, 4], atol=0.1)
    # worker 1's client (another process in a real cluster) finds w where worker 0 left it
    server1 = tf.train.Server(cluster, job_name="worker", task_index=1)
    with tf.Graph().as_default():
        x, y, w, loss, _, train_op = _regression(1, cluster,
                                                 tf.train.GradientDescentOptimizer(0.1))
        sess = tf.Session(server1.target)
        try:
            np.testing.assert_array_equal(sess.run(w), trained)
        finally:
            sess.end_tasks()
    with pytest.raises(OpsdkError, match="tf.Session .* only"):
        tf.InteractiveSession(server.target)


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_a_supervised_between_graph_script_trains_on_the_cluster(ray_engine, tmp_path, sync):
    # the Supervisor form of a between-graph script: the chief initialises and checkpoints,
    # worker 1 waits for it; asynchronous updates of w on the ps, or TensorFlow's
    # synchronous-replicas form with its token queue's ops (nothing to run here)
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2242"],
                                    "worker": ["localhost:2243", "localhost:2244"]})
    losses = {0: [], 1: []}

    def worker(i):
        server = tf.train.Server(cluster, job_name="worker", task_index=i)
        rng = np.random.default_rng(i)
        with tf.Graph().as_default():
            opt = tf.train.GradientDescentOptimizer(0.05)
            if sync:
                opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2,
                                                     total_num_replicas=2)
            x, y, w, loss, global_step, train_op = _regression(i, cluster, opt)
            extra = {}
            if sync:
                extra = {"local_init_op": opt.chief_init_op if i == 0
                         else opt.local_step_init_op,
                         "ready_for_local_init_op": opt.ready_for_local_init_op}
            sv = tf.train.Supervisor(is_chief=(i == 0), logdir=str(tmp_path),
                                     global_step=global_step, save_model_secs=0.5,
                                     **extra)
            with sv.managed_session(server.target) as sess:
                if sync and i == 0:
                    sv.start_queue_runners(sess, [opt.get_chief_queue_runner()])
                    sess.run(opt.get_init_tokens_op())
                deadline = time.monotonic() + 120
                # asynchronous: the other worker may join late (its first step registers its
                # partitions on the ps), so the chief's 40 steps need not include one of it;
                # each goes on until both have stepped, to test that both updates land
                while not sv.should_stop() and (
                        sess.run(global_step) < 40
                        or (not sync and not all(losses.values())
                            and time.monotonic() < deadline)):
                    xb, yb = _batch(rng)
                    losses[i].append(sess.run([loss, train_op], {x: xb, y: yb})[0])

    _two_workers(worker)
    if sync:  # one round of both per global step
        assert len(losses[0]) == len(losses[1]) == 40
    else:
        assert len(losses[0]) + len(losses[1]) >= 40 and losses[1]
    assert np.mean(losses[0][-3:]) < 0.2 * np.mean(losses[0][:3])
    assert (tmp_path / "checkpoint").exists()  # the chief's checkpoint service wrote one


def test_a_tasks_node_error_keeps_its_kind_and_its_tf_errors_class(ray_engine):
    from opsdk.registry.errors import OpError
    from opsdk.runtime.exec.variable_store import UninitialisedVariableError

    cluster = tf.train.ClusterSpec({"ps": ["localhost:2292"], "worker": ["localhost:2293"]})
    server = tf.train.Server(cluster, job_name="worker", task_index=0)
    with tf.Graph().as_default():
        with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0",
                                                      cluster=cluster)):
            doubled = tf.Variable(tf.zeros([4]), name="never_initialised") * 2.0
        with tf.device("/job:ps/task:0"):
            a = tf.placeholder(tf.float32, [None])
            b = tf.placeholder(tf.float32, [None])
            total = a + b
        sess = tf.Session(server.target)
        try:
            with pytest.raises(tf.errors.FailedPreconditionError,
                               match="task /job:ps/replica:0/task:0: variable "
                                     "'never_initialised' is not initialised") as caught:
                sess.run(doubled)
            assert isinstance(caught.value, UninitialisedVariableError)
            with pytest.raises(tf.errors.InvalidArgumentError, match="do not broadcast") as caught:
                sess.run(total, {a: np.ones(2), b: np.ones(3)})
            assert isinstance(caught.value, OpError) and isinstance(caught.value, ValueError)
        finally:
            sess.end_tasks()


OPTIMIZERS = {"gd": lambda: tf.train.GradientDescentOptimizer(0.05),
              "adagrad": lambda: tf.train.AdagradOptimizer(0.1),
              "momentum": lambda: tf.train.MomentumOptimizer(0.05, 0.9),
              "adam": lambda: tf.train.AdamOptimizer(0.05),
              "rmsprop": lambda: tf.train.RMSPropOptimizer(0.05)}


def _two_ps_model(optimizer, cluster=None, inside=True):
    """x @ w + b, w and b on the two ps tasks when `cluster` is given (round robin), trained
    with `optimizer`'s plain minimize, called inside the setter's scope or after it;
    (x, y, variables, train_op)."""
    setter = (tf.train.replica_device_setter(worker_device="/job:worker/task:0",
                                             cluster=cluster)
              if cluster is not None else tf.device(None))
    with setter:
        x = tf.placeholder(tf.float32, [16, 4])
        y = tf.placeholder(tf.float32, [16, 1])
        w = tf.Variable(tf.zeros([4, 1]), name="w")
        b = tf.Variable(tf.zeros([1]), name="b")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        global_step = tf.train.get_or_create_global_step()
        if inside:
            train_op = optimizer.minimize(loss, global_step=global_step)
    if not inside:
        train_op = optimizer.minimize(loss, global_step=global_step)
    return x, y, [w, b, global_step, *tf.global_variables()[3:]], train_op


@pytest.mark.parametrize("name", [*sorted(OPTIMIZERS), "adam-after"])
def test_a_plain_optimizer_trains_variables_on_two_ps_tasks_as_in_one_process(ray_engine,
                                                                              name):
    """A TF1 minimize over variables on two ps tasks (its one update node split per task,
    slots beside their variables): the values of training in one process, with the variables
    pushed to the worker after each step (steady steps)."""
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2242", "localhost:2243"],
                                    "worker": ["localhost:2244"]})
    server = tf.train.Server(cluster, job_name="worker", task_index=0)
    name, _, after = name.partition("-")
    trained = {}
    for where in ("process", "cluster"):
        rng = np.random.default_rng(3)
        with tf.Graph().as_default():
            x, y, variables, train_op = _two_ps_model(
                OPTIMIZERS[name](), cluster if where == "cluster" else None, inside=not after)
            sess = tf.Session(server.target) if where == "cluster" else tf.Session()
            try:
                sess.run(tf.global_variables_initializer())
                for _ in range(12):
                    xb, yb = _batch(rng)
                    sess.run(train_op, {x: xb, y: yb + 1})
                if where == "cluster":  # pushed values: every step after the first steady
                    stats = sess.task_stats()
                    assert [stats[f"/job:ps/replica:0/task:{i}"]["steady_steps"]
                            for i in (0, 1)] == [11, 11]
                trained[where] = {v.op.name: (sess.run(v), v.device) for v in variables}
            finally:
                sess.end_tasks() if where == "cluster" else sess.close()
    assert trained["cluster"]["w"][1] == "/job:ps/task:0"
    assert trained["cluster"]["b"][1] == "/job:ps/task:1"
    assert trained["process"].keys() == trained["cluster"].keys()
    for var, (value, device) in trained["cluster"].items():
        if "/" in var and not var.startswith(name.capitalize()):  # a slot: with its variable
            assert device == trained["cluster"][var.split("/")[0]][1], var
        np.testing.assert_allclose(value, trained["process"][var][0], rtol=1e-6, err_msg=var)
    assert trained["cluster"]["global_step"][0] == 12


def test_sync_replicas_apply_gradients_takes_gradients_changed_in_between(ray_engine):
    """compute_gradients, a change of the gradients (halved, at twice the rate), then
    apply_gradients: the values of the plain minimize, on the cluster as in one process."""
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2252"], "worker": ["localhost:2253"]})
    server = tf.train.Server(cluster, job_name="worker", task_index=0)
    trained = []
    for rate, scale in ((0.1, None), (0.2, 0.5)):
        rng = np.random.default_rng(5)
        with tf.Graph().as_default():
            opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(rate),
                                                 replicas_to_aggregate=1)
            with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0",
                                                          cluster=cluster)):
                x, y = tf.placeholder(tf.float32, [16, 4]), tf.placeholder(tf.float32, [16, 1])
                w = tf.Variable(tf.zeros([4, 1]), name="w")
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
                step = tf.train.get_or_create_global_step()
                if scale is None:
                    train_op = opt.minimize(loss, global_step=step)
                else:
                    grads = opt.compute_gradients(loss, colocate_gradients_with_ops=True)
                    train_op = opt.apply_gradients([(g * scale, v) for g, v in grads],
                                                   global_step=step)
            assert opt.chief_init_op is not None
            sess = tf.Session(server.target)
            try:
                sess.run(tf.global_variables_initializer())
                for _ in range(8):
                    xb, yb = _batch(rng)
                    sess.run(train_op, {x: xb, y: yb})
                trained.append((sess.run(w), sess.run(step)))
            finally:
                sess.end_tasks()
    np.testing.assert_array_equal(trained[1][0], trained[0][0])
    assert trained[0][1] == trained[1][1] == 8


def test_a_checkpoint_of_one_process_restores_on_a_cluster(ray_engine, tmp_path):
    """A model saved by a Saver in one process: a Saver's restore on a cluster session, and a
    MonitoredTrainingSession given its folder, put each variable on its ps."""
    with tf.Graph().as_default():
        tf.Variable([[1.0], [2.0], [3.0], [4.0]], name="w")
        step = tf.train.get_or_create_global_step()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(tf.assign(step, 7))
            path = tf.train.Saver().save(sess, str(tmp_path / "model.ckpt"), global_step=step)
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2292", "localhost:2293"],
                                    "worker": ["localhost:2294"]})
    server = tf.train.Server(cluster, job_name="worker", task_index=0)
    with tf.Graph().as_default():
        with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0",
                                                      cluster=cluster)):
            w = tf.Variable(tf.zeros([4, 1]), name="w")
            step = tf.train.get_or_create_global_step()
            saver = tf.train.Saver()
        assert {w.device, step.device} == {"/job:ps/task:0", "/job:ps/task:1"}
        sess = tf.Session(server.target)
        try:
            saver.restore(sess, path)
            assert sess.run(step) == 7
            np.testing.assert_array_equal(sess.run(w).ravel(), [1, 2, 3, 4])
        finally:
            sess.end_tasks()
        with tf.train.MonitoredTrainingSession(master=server.target, checkpoint_dir=str(tmp_path),
                                               save_checkpoint_secs=None) as sess:
            assert sess.run(step) == 7
            np.testing.assert_array_equal(sess.run(w).ravel(), [1, 2, 3, 4])


def test_a_partitioned_embedding_trains_on_two_ps_tasks_as_in_one_process(ray_engine):
    """An embedding made by get_variable with a partitioner, its shards on the two ps tasks
    in turn, looked up "mod" and trained with Adagrad: the values of training in one
    process."""
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2252", "localhost:2253"],
                                    "worker": ["localhost:2254"]})
    server = tf.train.Server(cluster, job_name="worker", task_index=0)
    trained = {}
    for where in ("process", "cluster"):
        rng = np.random.default_rng(5)
        with tf.Graph().as_default():
            tf.set_random_seed(1)
            setter = (tf.train.replica_device_setter(worker_device="/job:worker/task:0",
                                                     cluster=cluster)
                      if where == "cluster" else tf.device(None))
            with setter:
                ids = tf.placeholder(tf.int64, [8])
                y = tf.placeholder(tf.float32, [8])
                emb = tf.get_variable("emb", [50, 3], partitioner=tf.fixed_size_partitioner(2))
                w = tf.get_variable("w", [3, 1])
                guess = tf.reshape(tf.matmul(tf.nn.embedding_lookup(emb, ids), w), [-1])
                loss = tf.reduce_mean(tf.square(guess - y))
                train_op = tf.train.AdagradOptimizer(0.2).minimize(loss)
            sess = tf.Session(server.target) if where == "cluster" else tf.Session()
            try:
                sess.run(tf.global_variables_initializer())
                for _ in range(10):
                    batch = rng.integers(0, 50, 8)
                    sess.run(train_op, {ids: batch, y: (batch % 5).astype(np.float32)})
                trained[where] = {v.op.name: (sess.run(v), v.device) for v in [*emb, w]}
            finally:
                sess.end_tasks() if where == "cluster" else sess.close()
    assert [trained["cluster"][f"emb/part_{k}"][1] for k in (0, 1)] == [
        "/job:ps/task:0", "/job:ps/task:1"]
    for var, (value, _) in trained["cluster"].items():
        np.testing.assert_allclose(value, trained["process"][var][0], rtol=1e-5, err_msg=var)


def test_a_lookup_of_a_partitioned_embedding_moves_rows_not_shards(ray_engine):
    """100 ids a step of a 100,000-row table split over two ps tasks: each ps task sends the
    rows asked of it (about 50 rows of 16 float32, 3.2 KB), the worker sends the ids and the
    rows' gradients, never a shard (3.2 MB)."""
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2272", "localhost:2273"],
                                    "worker": ["localhost:2274"]})
    server = tf.train.Server(cluster, job_name="worker", task_index=0)
    with tf.Graph().as_default():
        with tf.train.replica_device_setter(worker_device="/job:worker/task:0", cluster=cluster):
            ids = tf.placeholder(tf.int64, [100])
            emb = tf.get_variable("emb", [100_000, 16], partitioner=tf.fixed_size_partitioner(2),
                                  initializer=tf.random_uniform_initializer(-0.05, 0.05))
            loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(emb, ids)))
            step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        sess = tf.Session(server.target)
        try:
            sess.run(tf.global_variables_initializer())
            rng = np.random.default_rng(0)
            sess.run(step, {ids: rng.integers(0, 100_000, 100)})
            before = sess.task_stats()
            for _ in range(4):
                sess.run(step, {ids: rng.integers(0, 100_000, 100)})
            after = sess.task_stats()
        finally:
            sess.end_tasks()
    sent = {task: (after[task]["bytes_sent"] - before[task]["bytes_sent"]) / 4 for task in after}
    for k in (0, 1):
        assert 0 < sent[f"/job:ps/replica:0/task:{k}"] < 100 * 16 * 4, sent
    assert sent["/job:worker/replica:0/task:0"] < 100 * (16 * 4 + 2 * 8) * 2, sent
