"""ClusterSession.profile: every task of a step times its own nodes while the profile runs, the
client times each step whole; the steps train as runs do, and the timers stop after it."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.dist import ClusterSession, ReplicatedOptimizer, replica_device_setter
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph
from opsdk.runtime.train.optimizers import GradientDescentOptimizer
from test_master import _graph

PS, W0, W1 = ("/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0",
              "/job:worker/replica:0/task:1")


def _three_tasks():
    g, x, _, z, _ = _graph()  # x * w on worker 1 (w on the ps), + 1 on worker 0
    return g, x, z


def test_each_task_times_its_own_nodes_and_the_client_each_step(ray_engine, capsys):
    g, x, z = _three_tasks()
    feed = {x: np.arange(3, dtype=np.float32)}
    with ClusterSession(g, {"ps": 1, "worker": 2}, cluster_name="profile1") as sess:
        sess.run(global_variables_initializer(g))
        prof = sess.profile(z, feed, steps=4, warmup=2)
        printed = capsys.readouterr().out
        assert len(prof.walls) == 4 and prof.step_seconds > 0
        where = {(n.timing.name, n.task): n.timing for n in prof.nodes}
        assert where[("mul", W1)].calls == 4 and where[("mul", W1)].type == "mul"
        assert where[("add", W0)].calls == 4
        assert {task for task, _, _ in prof.by_task()} == {PS, W0, W1}
        assert all(n.timing.seconds > 0 for n in prof.nodes)
        assert 0 <= prof.outside_nodes() <= sum(prof.walls) / 4
        assert "4 steps after 2 warm-up runs" in printed and W1 in printed
        # the timers stopped: runs go on as before, and a second profile counts its own steps
        np.testing.assert_allclose(sess.run(z, feed), [1.0, 3.0, 5.0])
        again = sess.profile(z, feed, steps=2, warmup=0, show=False)
        assert {n.timing.calls for n in again.nodes if n.timing.name == "mul"} == {2}
        assert capsys.readouterr().out == ""


def test_a_profiled_training_step_trains_as_runs_do(ray_engine):
    # a steady step (values pushed by the ps) runs partitions of its own: they are timed too
    cluster = {"ps": 1, "worker": 1}
    g = Graph()
    with g.as_default():
        with replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0"):
            v = Variable(np.float32(1.0), name="v")
            loss = v.value() * v.value()
        train = ReplicatedOptimizer(GradientDescentOptimizer(0.1), 1).minimize(loss, var_list=[v])
    with ClusterSession(g, cluster, cluster_name="profile2") as sess:
        sess.run(global_variables_initializer(g))
        prof = sess.profile([train, loss], steps=5, warmup=1, show=False)
        value = float(sess.variable_values()["v"])
        steady = sess.task_stats()[W0]["steady_steps"]
    np.testing.assert_allclose(value, 0.8 ** 6, rtol=1e-6)  # 6 steps of v -= 0.1 * 2v
    assert steady >= 5
    tasks = {task for task, _, _ in prof.by_task()}
    assert tasks == {PS, W0}
    assert max(n.timing.calls for n in prof.nodes if n.task == PS) == 5


@pytest.mark.parametrize("steps, warmup", [(0, 1), (2, -1), (True, 0), (1.5, 0)])
def test_profile_refuses_counts_that_are_not_whole_numbers(ray_engine, steps, warmup):
    g, x, z = _three_tasks()
    with ClusterSession(g, {"ps": 1, "worker": 2}, cluster_name="profile3") as sess:
        with pytest.raises(OpsdkError, match="ClusterSession.profile"):
            sess.profile(z, {x: np.ones(3, np.float32)}, steps=steps, warmup=warmup)
