"""Steady steps as Ray compiled graphs (opsdk/dist/compiled.py): the same values as Ray task
calls, several clients' graphs on one ps, a task without a free slot, errors, deadlines, close()
and Ctrl-C while a client waits in a graph."""

from __future__ import annotations

import _thread
import os
import threading
import time

import numpy as np
import pytest

from opsdk.dist import ClusterSession
from opsdk.dist.compiled import graph_slots
from opsdk.registry.errors import OpsdkError
from steady_model import LR, PS
from steady_model import feeds as _feeds
from steady_model import model as _model
from steady_model import worker as _worker


# The tests that count on a graph standing between their steps keep it however long the machine
# stalls (a graph whose step has not run for graph_idle_s, 2 s by default, is torn down: the idle
# test checks that).
KEEP = 3600.0


def _graphs(sess):
    return {t: s["graphs"] for t, s in sess.task_stats().items()}


def _compiled(sess):
    return [s for s in sess._steps.values() if s.graph is not None]


def _compile_attempts_ended(sess, limit_s=30.0):
    """Wait until no step of `sess` is being compiled (the attempt runs in a thread of its own,
    and may still be claiming slots when the steps that started it have ended)."""
    deadline = time.monotonic() + limit_s
    while any(s.compiling for s in sess._steps.values()):
        assert time.monotonic() < deadline, "a compile attempt did not end within the limit"
        time.sleep(0.01)


def _run_until_compiled(sess, step, at_least=8, limit_s=60.0):
    """Run `step()` at least `at_least` times and until `sess` has a compiled graph (compiled
    in the background) and ran 3 steps on it; the steps' results."""
    results, deadline, since = [], time.monotonic() + limit_s, 0
    while len(results) < at_least or since < 3:
        results.append(step())
        since = since + 1 if _compiled(sess) else 0
        assert time.monotonic() < deadline, "no compiled graph within the time limit"
    return results


@pytest.mark.parametrize("compiled,in_process", [(True, True), (True, False), (False, True),
                                                 (False, False)])
def test_compiled_steps_compute_what_ray_task_calls_do(ray_engine, compiled, in_process):
    # in_process: the worker's part of a steady step runs in the client (its actor is in no
    # graph); else on its actor, in the graph
    cluster = {"ps": 1, "worker": 1}
    g, _, x, i, fetches, init = _model(cluster)
    with ClusterSession(g, cluster, cluster_name=f"graph-exact-{compiled}-{in_process}",
                        compiled_steps=compiled, compile_after_s=0, graph_idle_s=KEEP,
                        in_process_worker=in_process) as sess:
        sess.run(init)

        def step():
            return float(sess.run(fetches, _feeds(x, i))[1])

        losses = (_run_until_compiled(sess, step) if compiled
                  else [step() for _ in range(12)])
        assert len(_compiled(sess)) == int(compiled)
        assert _graphs(sess) == {PS: int(compiled), _worker(0): int(compiled and not in_process)}
        assert all((s.head is not None) == in_process for s in sess._steps.values()
                   if s.steady_order is not None)
        assert sess.task_stats()[_worker(0)]["steady_steps"] == len(losses) - 1
        # Ray's channels did not import torch on the tasks (1.8 s on a graph's first run)
        import ray

        imported = ray.get(sess.actor(PS).__ray_call__.remote(
            lambda self: "torch" in __import__("sys").modules))
        assert not imported
    v, expected = 1.0, []
    for _ in losses:
        expected.append(v * v)
        v -= LR * 2 * v
    np.testing.assert_allclose(losses, expected, rtol=1e-6)
    assert _graphs(sess) == {PS: 0, _worker(0): 0}  # close() gave the threads back


def _pair(name, **options):
    """Two workers' sessions of one synchronous model (2 replicas), initialised."""
    cluster = {"ps": 1, "worker": 2}
    models = [_model(cluster, worker=w, replicas=2, scale=1.0 + w) for w in range(2)]
    sessions = [ClusterSession(m[0], cluster, task=f"/job:worker/task:{w}", cluster_name=name,
                               step_timeout=60, compile_after_s=0, graph_idle_s=KEEP, **options)
                for w, m in enumerate(models)]
    sessions[0].run(models[0][5])
    return models, sessions


def _both(models, sessions, steps, compiled=True):
    """`steps` synchronous rounds of both workers (threads), then (if `compiled`) rounds until
    both clients' graphs are compiled and ran 3 rounds; returns the rounds run."""
    errors, rounds, since, done = [], [0], [0], [False]
    deadline = time.monotonic() + 60

    def decide():  # once per round, by the barrier's last thread: both go on or both stop
        rounds[0] += 1
        since[0] = since[0] + 1 if all(_compiled(s) for s in sessions) else 0
        done[0] = rounds[0] >= steps and (not compiled or since[0] >= 3)

    both = threading.Barrier(2, action=decide)

    def loop(w):
        g, _, x, i, fetches, _ = models[w]
        try:
            while not done[0]:
                sessions[w].run(fetches, _feeds(x, i))
                assert time.monotonic() < deadline, "no compiled graphs within the time limit"
                both.wait(30)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            both.abort()

    threads = [threading.Thread(target=loop, args=(w,)) for w in range(2)]
    [t.start() for t in threads]
    [t.join(120) for t in threads]
    assert not errors and not any(t.is_alive() for t in threads)
    return rounds[0]


def test_this_ray_version_is_one_several_graphs_per_task_were_tested_on():
    # A new Ray version in the lock file: run this file's tests on it, then add it to
    # TESTED_RAY (opsdk/dist/compiled.py).
    import ray

    assert graph_slots() > 1, f"Ray {ray.__version__} is not in compiled.TESTED_RAY"


def test_two_clients_graphs_on_one_ps_wait_for_each_other(ray_engine):
    # The ps's part of each client's step waits for the other client's gradient: with one
    # thread for every graph's loop on the ps (Ray's default), the first would wait forever.
    models, sessions = _pair("graph-sync")
    rounds = _both(models, sessions, 6)
    assert all(_compiled(s) for s in sessions)
    assert sessions[0].task_stats()[PS]["graphs"] == 2
    # the round's mean gradient is LR * 2 v * 1.5: v *= 1 - 0.3 per round
    # (float32: v reaches the subnormals, then 0, after a few hundred rounds)
    np.testing.assert_allclose(float(sessions[0].variable_values()["v"]), 0.7 ** rounds,
                               rtol=1e-4, atol=1e-37)
    for s in sessions:
        s.close()


def test_a_task_without_a_free_slot_keeps_ray_task_calls(ray_engine):
    cluster = {"ps": 1, "worker": 1}
    g, _, x, i, fetches, init = _model(cluster)
    with ClusterSession(g, cluster, cluster_name="graph-full", compile_after_s=0) as sess:
        sess.run(init)
        ps = sess.actor(PS)
        others = [("someone", n) for n in range(graph_slots())]
        import ray

        assert all(ray.get([ps.claim_graph_slot.remote(o) for o in others]))
        assert not ray.get(ps.claim_graph_slot.remote(("one", "more")))
        losses = [float(sess.run(fetches, _feeds(x, i))[1]) for _ in range(5)]
        _compile_attempts_ended(sess)
        assert not _compiled(sess)
        assert _graphs(sess) == {PS: graph_slots(), _worker(0): 0}  # the worker's claim undone
        ray.get([ps.release_graph_slot.remote(o) for o in others])
    np.testing.assert_allclose(losses[-1], 0.8 ** 8, rtol=1e-5)


def test_a_client_that_keeps_its_fetched_values_does_not_stall_the_graph(ray_engine,
                                                                           monkeypatch):
    """Ray reads arrays from a channel without copying; a kept one held the channel's buffer,
    and after about 30 runs the writer had none left (a run waited until its timeout)."""
    # the graph stays whatever its speed: on a busy machine one judged no faster than task
    # calls was torn down and tried again 1,000 runs later, and this loop ran on and on
    from opsdk.dist import compiled
    monkeypatch.setattr(compiled, "graph_pays", lambda *cycles: None)
    cluster = {"ps": 1, "worker": 1}
    g, _, x, i, fetches, init = _model(cluster)
    with ClusterSession(g, cluster, cluster_name="graph-kept", compile_after_s=0,
                        graph_idle_s=KEEP) as sess:
        sess.run(init)
        kept, on_graph, deadline = [], 0, time.monotonic() + 120
        while on_graph < 40:
            kept.append(sess.run(fetches, _feeds(x, i), timeout=30))
            on_graph += bool(_compiled(sess))
            assert time.monotonic() < deadline, f"{on_graph} runs on a compiled graph in 120 s"
        assert all(float(out[2][0]) == 1.0 for out in kept)  # gather([0, 1, 2], [1])
        kept[-1][2][0] = 5.0  # the client's own copy


def test_a_node_error_in_a_compiled_step_names_task_and_node_and_the_graph_goes_on(ray_engine):
    cluster = {"ps": 1, "worker": 1}
    g, _, x, i, fetches, init = _model(cluster)
    with ClusterSession(g, cluster, cluster_name="graph-error", compile_after_s=0,
                        graph_idle_s=KEEP) as sess:
        sess.run(init)
        _run_until_compiled(sess, lambda: sess.run(fetches, _feeds(x, i)))
        graph = _compiled(sess)[0].graph
        with pytest.raises(OpsdkError, match=r"task /job:worker/replica:0/task:0.*gather"):
            sess.run(fetches, _feeds(x, i, bad=True))
        v = float(sess.variable_values()["v"])
        loss = [float(sess.run(fetches, _feeds(x, i))[1]) for _ in range(4)][0]
        np.testing.assert_allclose(loss, v * v, rtol=1e-6)  # the full step after the error
        assert _compiled(sess)[0].graph is graph  # a node's error leaves the graph as it was


def _waiting_in_graph(name):
    """Client 0 of a synchronous pair, its step compiled, running alone: the ps's part waits
    for client 1's gradient, the client waits in the graph."""
    models, sessions = _pair(name)
    _both(models, sessions, 4)
    assert _compiled(sessions[0])
    g, _, x, i, fetches, _ = models[0]
    return sessions, lambda **kw: sessions[0].run(fetches, _feeds(x, i), **kw)


def test_a_compiled_step_past_its_deadline_fails_and_the_graph_is_dropped(ray_engine):
    sessions, step = _waiting_in_graph("graph-deadline")
    start = time.monotonic()
    with pytest.raises(OpsdkError, match="timeout"):
        step(timeout=1.5)
    assert time.monotonic() - start < 10
    assert not _compiled(sessions[0])
    for s in sessions:
        s.close()


def test_close_stops_a_client_waiting_in_a_graph(ray_engine):
    sessions, step = _waiting_in_graph("graph-close")
    threading.Timer(1.0, sessions[0].close).start()
    start = time.monotonic()
    with pytest.raises(OpsdkError, match="closed"):
        step()
    assert time.monotonic() - start < 6
    assert sessions[0].task_stats()[_worker(0)]["graphs"] == 0
    sessions[1].close()


def test_ctrl_c_stops_a_client_waiting_in_a_graph(ray_engine, ctrl_c_raises):
    sessions, step = _waiting_in_graph("graph-ctrl-c")
    threading.Timer(1.0, _thread.interrupt_main).start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        step()
    assert time.monotonic() - start < 6
    assert not _compiled(sessions[0])
    for s in sessions:
        s.close()


def test_a_graph_ray_refuses_leaves_task_calls_with_a_warning(ray_engine, monkeypatch):
    from opsdk.dist import compiled

    def refuse(*args, **kwargs):
        raise ValueError("no channels here")

    monkeypatch.setattr(compiled, "CompiledSteady", refuse)
    cluster = {"ps": 1, "worker": 1}
    g, _, x, i, fetches, init = _model(cluster)
    with ClusterSession(g, cluster, cluster_name="graph-refused", compile_after_s=0) as sess:
        sess.run(init)
        with pytest.warns(UserWarning, match="keeps Ray task calls.*no channels here") as caught:
            losses = [float(sess.run(fetches, _feeds(x, i))[1]) for _ in range(5)]
            _compile_attempts_ended(sess)  # the failure is the compiling thread's
            losses.append(float(sess.run(fetches, _feeds(x, i))[1]))  # the next run says so
        assert [w.filename for w in caught if "task calls" in str(w.message)] == [__file__]  # once
        assert not _compiled(sess)
        assert _graphs(sess) == {PS: 0, _worker(0): 0}  # the claims were given back
    np.testing.assert_allclose(losses[-1], 0.8 ** 10, rtol=1e-5)


def _cpu_seconds(sess, task):
    """The CPU time the process of `task`'s actor has used (it runs on this machine)."""
    import ray

    pid = ray.get(sess.actor(task).__ray_call__.remote(lambda self: os.getpid()))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc (Linux)")
def test_an_idle_graph_is_let_go_of_and_its_tasks_stop_spinning(ray_engine):
    cluster = {"ps": 1, "worker": 1}
    g, _, x, i, fetches, init = _model(cluster)
    with ClusterSession(g, cluster, cluster_name="graph-idle", compile_after_s=0,
                        graph_idle_s=0.3) as sess:
        sess.run(init)

        def step():
            return float(sess.run(fetches, _feeds(x, i))[1])

        losses = _run_until_compiled(sess, step)
        # Ray's channels wait for a graph's next run in a busy loop: while the graph stands,
        # each task burns a core doing nothing
        deadline = time.monotonic() + 10
        while _compiled(sess) or _graphs(sess) != {PS: 0, _worker(0): 0}:  # torn down, slots back
            assert time.monotonic() < deadline, "an idle graph was not let go of"
            time.sleep(0.05)
        before = {t: _cpu_seconds(sess, t) for t in (PS, _worker(0))}
        time.sleep(1.0)
        used = {t: _cpu_seconds(sess, t) - before[t] for t in before}
        assert all(u < 0.2 for u in used.values()), used  # about 0.5-1 s each while spinning
        released = [s for s in sess._steps.values() if s.idle_releases]
        assert [(s.idle_releases, s.steady_seconds) for s in released] == [(1, 0.0)]
        # the steps go on, as task calls, then on a graph compiled again
        losses += _run_until_compiled(sess, step)
    # close() waited for the watcher: a thread of the session alive when Ray shuts down may
    # free a Ray object after it, which ends the process
    assert not sess._watcher.is_alive()
    v, expected = 1.0, []
    for _ in losses:
        expected.append(v * v)
        v -= LR * 2 * v
    # (the compile runs beside hundreds of steps: the loss reaches float32's subnormals)
    np.testing.assert_allclose(losses, expected, rtol=1e-6, atol=1e-30)


def test_a_graph_slower_than_the_task_calls_before_it_is_torn_down_and_tried_later(ray_engine,
                                                                                   monkeypatch):
    from opsdk.dist import compiled

    execute = compiled.CompiledSteady.execute

    def slow(self, *args):  # each compiled run 30 ms late: cycles far above the task calls'
        time.sleep(0.03)
        return execute(self, *args)

    monkeypatch.setattr(compiled.CompiledSteady, "execute", slow)
    monkeypatch.setattr(compiled, "RETRY_AFTER", 10)  # task-call runs before a second trial
    cluster = {"ps": 1, "worker": 1}
    g, _, x, i, fetches, init = _model(cluster)
    # 0.5 s of task calls before the compile: enough cycles to judge by (MIN_CALL_CYCLES) at
    # up to 50 ms a step
    with ClusterSession(g, cluster, cluster_name="graph-unpaid", compile_after_s=0.5) as sess:
        sess.run(init)

        def step():
            return float(sess.run(fetches, _feeds(x, i))[1])

        losses = _run_until_compiled(sess, step)
        (trained,) = [s for s in sess._steps.values() if s.steady_order is not None]
        assert len(trained.call_cycles) >= compiled.MIN_CALL_CYCLES
        for wait in (10, 20):  # RETRY_AFTER, then twice that
            for _ in range(compiled.GRAPH_WARMUP + compiled.GRAPH_TRIAL):  # judged by then
                losses.append(step())
                if not _compiled(sess):
                    break
            assert not _compiled(sess) and trained.compile_at == trained.steady_runs + wait
            assert _graphs(sess) == {PS: 0, _worker(0): 0}
            losses += [step() for _ in range(wait - 1)]  # task calls meanwhile
            assert not _compiled(sess) and not trained.compiling
            losses += _run_until_compiled(sess, step)  # tried again
    v, expected = 1.0, []
    for _ in losses:
        expected.append(v * v)
        v -= LR * 2 * v
    np.testing.assert_allclose(losses, expected, rtol=1e-6, atol=1e-30)


def test_graph_idle_s_must_be_a_positive_number():
    for bad in (0, -1, "2", True, float("inf")):
        with pytest.raises(OpsdkError, match=r"graph_idle_s must be a number of seconds above 0"):
            ClusterSession(None, {"worker": 1}, graph_idle_s=bad)


def test_a_step_is_compiled_once_its_steady_runs_took_compile_after_s(ray_engine):
    cluster = {"ps": 1, "worker": 1}
    g, _, x, i, fetches, init = _model(cluster)
    with ClusterSession(g, cluster, cluster_name="graph-later", compile_after_s=0.5,
                        graph_idle_s=KEEP) as sess:
        sess.run(init)
        start = time.monotonic()
        for _ in range(5):
            sess.run(fetches, _feeds(x, i))
        if time.monotonic() - start < 0.5:  # a short run: its steps stay Ray task calls
            assert not any(s.compiling or s.graph for s in sess._steps.values())
        _run_until_compiled(sess, lambda: sess.run(fetches, _feeds(x, i)))
        step = _compiled(sess)[0]
        assert step.steady_seconds >= 0.5
