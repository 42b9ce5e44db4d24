"""opsdk.dist figures, in one run on one embedded Ray instance (docs/distributed.md):

- a plain Ray actor round trip (tiny and 1 MiB), the baseline of everything below (measured
  again after the null steps, once their tasks' processes have ended: on a shared machine it
  drifts);
- the null step's exchange written directly in Ray (driver -> ps and worker, ps -> worker value,
  worker -> ps gradient): the floor under opsdk's step;
- a steady step's exchange written directly in Ray (the client calls the worker with the value
  the ps returned last step, then the ps with the worker's result as argument, and waits for
  both): the floor under opsdk's steady step (opsdk/dist/prefetch.py);
- the same steady exchange as a Ray compiled graph (set up once, shared-memory channels): the
  floor under opsdk's compiled steady step (opsdk/dist/compiled.py); and as 2 and 4 such
  graphs, one per worker, sharing one ps that answers a round once every worker has called;
- the synchronous-replica step of a null model (one scalar variable on the ps, each worker's
  gradient a constant) for 1, 2 and 4 workers (workers are threads of this client), four ways
  in alternating rounds of steps: the default (the ps pushes the next step's values, the
  steady step runs as a compiled graph, and each client runs its worker's part in its own
  process, opsdk/dist/inprocess.py), the same with the workers' parts on their actors
  (`in_process_worker=False`), pushed values with Ray task calls (`compiled_steps=False`), and
  values read at each step's start (`push_values=False`);
- the bytes a sparse-embedding step sends against the dense table;
- softmax-model throughput (examples/dist_softmax.py) for 1 and 2 workers;
- the time from a killed ps task to the first successful step after the restore.

    .venv/bin/python bench/bench_dist.py [--repeat 30] [--null-only]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# The plain compiled graphs below take channel buffers of opsdk's size (opsdk/dist/compiled.py):
# Ray's default, 10 of 1 MB per channel, overflows the embedded instance's object store.
BUFFER_BYTES = 64 * 1024


def _example(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ray_round_trip(repeat: int) -> dict:
    import ray

    @ray.remote(num_cpus=0)
    class Echo:
        def echo(self, x):
            return x

    echo = Echo.remote()
    out = {}
    for label, value in (("tiny", 1), ("1 MiB", np.zeros(1 << 18, np.float32))):
        ray.get(echo.echo.remote(value))
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            ray.get(echo.echo.remote(value))
            times.append(time.perf_counter() - start)
        out[label] = statistics.median(times) * 1e3
    return out


class _Exchange:
    """The null step's messages written directly in Ray (the floor opsdk's step stands on): the
    driver starts the ps and the worker at once, the ps sends the value to the worker, the
    worker sends the gradient back, both reply. Threaded actors like opsdk's tasks (a receiver
    waits while another thread takes the delivery)."""

    def __init__(self):
        self.values, self.cond, self.peer = {}, threading.Condition(), None

    def set_peer(self, peer):
        self.peer = peer

    def deliver(self, key, value):
        with self.cond:
            self.values[key] = value
            self.cond.notify_all()

    def _recv(self, key):
        with self.cond:
            while key not in self.values:
                self.cond.wait(0.05)
            return self.values.pop(key)

    def ps(self, step):
        self.peer.deliver.remote((step, "v"), np.float32(0))
        return self._recv((step, "grad")) * 0

    def worker(self, step):
        self.peer.deliver.remote((step, "grad"), self._recv((step, "v")) + 1)
        return None


def ray_exchange(repeat: int) -> float:
    """Median ms of the null step's exchange in plain Ray (`_Exchange`), one worker."""
    import ray

    actor = ray.remote(num_cpus=0, max_concurrency=16)(_Exchange)
    ps, worker = actor.remote(), actor.remote()
    ray.get([ps.set_peer.remote(worker), worker.set_peer.remote(ps)])
    times = []
    for step in range(repeat + 3):
        start = time.perf_counter()
        ray.get([ps.ps.remote(step), worker.worker.remote(step)])
        times.append(time.perf_counter() - start)
    return statistics.median(times[3:]) * 1e3


class _Chain:
    """The steady step's two calls: the worker computes from the pushed value, the ps applies
    the gradient and returns the next value (threaded, like opsdk's tasks)."""

    def worker(self, value):
        return {}, value + 1

    def ps(self, grad):
        return {}, grad * 0


def ray_chain(repeat: int) -> float:
    """Median ms of a steady step's exchange in plain Ray (`_Chain`), one worker."""
    import ray

    actor = ray.remote(num_cpus=0, max_concurrency=16)(_Chain)
    ps, worker = actor.remote(), actor.remote()
    value, times = np.float32(0), []
    for _ in range(repeat + 3):
        start = time.perf_counter()
        fetched_w, grad = worker.worker.options(num_returns=2).remote(value)
        fetched_p, value = ps.ps.options(num_returns=2).remote(grad)
        ray.wait([fetched_w, fetched_p], num_returns=2)
        times.append(time.perf_counter() - start)
    return statistics.median(times[3:]) * 1e3


def ray_compiled_chain(repeat: int) -> float:
    """Median ms of `_Chain`'s steady exchange as a Ray compiled graph, one worker."""
    import ray
    from ray.dag import InputNode, MultiOutputNode

    actor = ray.remote(num_cpus=0, max_concurrency=16)(_Chain)
    ps, worker = actor.remote(), actor.remote()
    with InputNode() as value:
        fetched_w, grad = worker.worker.options(num_returns=2).bind(value)
        fetched_p, nxt = ps.ps.options(num_returns=2).bind(grad)
        dag = MultiOutputNode([fetched_w, fetched_p, nxt])
    graph = dag.experimental_compile(
        _buffer_size_bytes=BUFFER_BYTES)
    value, times = np.float32(0), []
    for _ in range(repeat + 3):
        start = time.perf_counter()
        _, _, value = ray.get(graph.execute(value))
        times.append(time.perf_counter() - start)
    graph.teardown()
    return statistics.median(times[3:]) * 1e3


class _Round:
    """A ps that answers a round's callers once all `n` have called (a synchronous round,
    nothing computed)."""

    def __init__(self, n):
        self.n, self.cond, self.count, self.round = n, threading.Condition(), 0, 0

    def ps(self, grad):
        with self.cond:
            mine = self.round
            self.count += 1
            if self.count == self.n:
                self.count, self.round = 0, self.round + 1
                self.cond.notify_all()
            else:
                self.cond.wait_for(lambda: self.round > mine, timeout=60)
        return {}, grad * 0


def ray_compiled_rounds(workers: int, repeat: int) -> float:
    """Median ms of the steady exchange of `workers` workers sharing one ps (`_Round`), each
    worker's chain a compiled graph driven by a thread of this client, as opsdk's clients."""
    import ray
    from ray.dag import InputNode, MultiOutputNode

    # Each graph's loop takes a thread of the actor's `_ray_system` group: one per worker.
    ps = ray.remote(num_cpus=0, concurrency_groups={"_ray_system": workers})(_Round).remote(
        workers)
    graphs = []
    for _ in range(workers):
        worker = ray.remote(num_cpus=0)(_Chain).remote()
        with InputNode() as value:
            fetched_w, grad = worker.worker.options(num_returns=2).bind(value)
            fetched_p, nxt = ps.ps.options(num_returns=2).bind(grad)
            graphs.append(MultiOutputNode([fetched_w, fetched_p, nxt]).experimental_compile(
                _buffer_size_bytes=BUFFER_BYTES))
    times: dict[int, list] = {w: [] for w in range(workers)}

    def loop(w):
        value = np.float32(0)
        for _ in range(repeat + 3):
            start = time.perf_counter()
            _, _, value = ray.get(graphs[w].execute(value))
            times[w].append(time.perf_counter() - start)

    threads = [threading.Thread(target=loop, args=(w,)) for w in range(workers)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    for graph in graphs:
        graph.teardown()
    return statistics.median(times[0][3:]) * 1e3


# The null step's variants: ClusterSession options by label.
# The compiled kinds are compiled at once and warmed up until they are, before each of their
# rounds (the default waits for 2 s of steady runs first, so that a short run does not pay for
# the compile), keep their graphs through the round (by default a graph idle for 2 s is torn
# down) and tear them down after it.
NULL_KINDS = {"compiled": {"compile_after_s": 0, "graph_idle_s": 3600},
              "worker actors": {"compile_after_s": 0, "graph_idle_s": 3600,
                                "in_process_worker": False},
              "task calls": {"compiled_steps": False},
              "read at start": {"push_values": False}}
COMPILED_KINDS = ("compiled", "worker actors")
# Steps of each round left untimed: a compile's and the other kinds' processes settle (a
# graph's first steps after its compile ran 1.5-2x slower than its 100th).
WARM_STEPS = 50


def null_step(workers: int, repeat: int, rounds: int = 3) -> dict[str, float]:
    """Median ms of one synchronous step of `workers` replicas of the null model, by kind
    (NULL_KINDS; rounds of `repeat` steps, alternating, so that all see the same load)."""
    import opsdk.v1 as tf
    from opsdk.dist import ClusterSession, ReplicatedOptimizer, replica_device_setter

    cluster = {"ps": 1, "worker": workers}
    models = []
    for w in range(workers):
        g = tf.Graph()
        with g.as_default():
            with replica_device_setter(cluster=cluster, worker_device=f"/job:worker/task:{w}"):
                v = tf.Variable(np.float32(0.0), name="v")
                loss = v * tf.constant(np.float32(1.0))
            train = ReplicatedOptimizer(tf.train.GradientDescentOptimizer(0.0), workers).minimize(
                loss, var_list=[v])
            models.append((g, train, tf.global_variables_initializer()))
    # Each kind has tasks of its own (a ps shared by both would see rounds go on without the
    # other kind's workers, and drop their gradients as late), and its sessions live
    # throughout: tasks end with the last handle to them.
    by_kind = {kind: [ClusterSession(m[0], cluster, task=f"/job:worker/task:{w}",
                                     cluster_name=f"null{workers}-{n}", **options)
                      for w, m in enumerate(models)]
               for n, (kind, options) in enumerate(NULL_KINDS.items())}
    times: dict[str, list] = {kind: [] for kind in NULL_KINDS}

    def compiled(kind):
        """Run `kind`'s steps (untimed) until every client's graph is compiled."""
        warm = by_kind[kind]
        deadline = time.monotonic() + 60
        while not all(any(s.graph for s in sess._steps.values()) for sess in warm):
            threads = [threading.Thread(target=warm[w].run, args=(models[w][1],))
                       for w in range(workers)]
            [t.start() for t in threads]
            [t.join() for t in threads]
            if time.monotonic() > deadline:
                raise RuntimeError(f"the null step ({kind}) was not compiled within 60 s")

    for kind in list(NULL_KINDS) * rounds:
        sessions = by_kind[kind]
        sessions[0].run(models[0][2])
        # A compiled kind's graphs spin on its tasks and client while they exist: each kind's
        # are compiled before its round and torn down after it, so that they do not take the
        # cores from the other kinds' rounds.
        graphs = kind in COMPILED_KINDS
        if graphs:
            compiled(kind)
        mine: dict[int, list] = {w: [] for w in range(workers)}

        def loop(w):
            for _ in range(WARM_STEPS + repeat):
                start = time.perf_counter()
                sessions[w].run(models[w][1])
                mine[w].append(time.perf_counter() - start)

        threads = [threading.Thread(target=loop, args=(w,)) for w in range(workers)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        times[kind] += mine[0][WARM_STEPS:]
        if graphs:
            for sess in sessions:
                sess._drop_graphs()
    for sessions in by_kind.values():
        for sess in sessions:
            sess.close()
        sessions[0].end_tasks()  # the kind's tasks, shared by its sessions
    return {kind: statistics.median(t) * 1e3 for kind, t in times.items()}


def tasks_gone(limit_s: float = 15.0) -> bool:
    """Wait until no task actor's process is left on this machine (the null steps ended their
    tasks, and Ray ends the processes in the background: measured meanwhile, a round trip
    shares the cores with their exits); False if some are still there after `limit_s`."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        names = []
        for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    names.append(f.read(64))
            except OSError:  # not a process, or it ended meanwhile
                continue
        if not any(n.startswith(b"ray::TaskActor") for n in names):
            return True
        time.sleep(0.2)
    return False


def sparse_bytes() -> tuple[int, int]:
    import opsdk.v1 as tf
    from opsdk.dist import ClusterSession, ReplicatedOptimizer, ShardedEmbedding

    vocab, dim, k = 1_000_000, 16, 100
    g = tf.Graph()
    with g.as_default():
        table = ShardedEmbedding(vocab, dim, ["/job:ps/task:0", "/job:ps/task:1"])
        ids = tf.placeholder(tf.int64, [k])
        loss = tf.reduce_sum(tf.square(table.lookup(ids)))
        train = ReplicatedOptimizer(tf.train.GradientDescentOptimizer(0.1)).minimize(
            loss, var_list=[], embeddings=[table])
        init = tf.global_variables_initializer()
    with ClusterSession(g, {"ps": 2, "worker": 1}, cluster_name="bench-bytes") as sess:
        sess.run(init)
        chosen = np.arange(0, vocab, vocab // k, dtype=np.int64)[:k]
        sess.run(train, {ids: chosen})
        before = sum(s["bytes_sent"] for s in sess.task_stats().values())
        sess.run(train, {ids: chosen})
        after = sum(s["bytes_sent"] for s in sess.task_stats().values())
    return after - before, vocab * dim * 4 * 2  # dense: the table out and its gradient back


def recovery_seconds() -> float:
    sys.path.insert(0, str(ROOT / "tests" / "dist"))
    from test_faults import _regression, _data, PS  # the fault tests' model
    from opsdk.dist import ClusterSession
    from opsdk.dist.supervisor import train_supervised

    g, x, w, loss, train, init = _regression()
    sess = ClusterSession(g, {"ps": 1, "worker": 1}, cluster_name="bench-kill", step_timeout=60)
    killed = []

    def step(sess, i):
        if i == 15 and not killed:
            killed.append(time.monotonic())
            os.kill(sess.engine_info(PS)["pid"], signal.SIGKILL)
        sess.run(train, {x: _data(i)})

    with tempfile.TemporaryDirectory() as folder:
        recoveries = train_supervised(sess, step, 30, folder, every=10, init=init)
    return recoveries[0].resumed_at - killed[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--null-only", action="store_true",
                        help="only the round trips and the null steps")
    args = parser.parse_args()
    from opsdk.dist import engine

    engine.connect(temp_dir=tempfile.mkdtemp(prefix="opsdk-ray-"))
    print(f"load average before: {os.getloadavg()}")
    rt = ray_round_trip(args.repeat)
    print(f"Ray actor round trip (median): tiny {rt['tiny']:.2f} ms, 1 MiB {rt['1 MiB']:.2f} ms")
    print(f"the null step's exchange in plain Ray (1 worker): {ray_exchange(args.repeat):.2f} "
          "ms (median)")
    print(f"a steady step's exchange in plain Ray (1 worker): {ray_chain(args.repeat):.2f} ms "
          "(median)")
    print(f"the steady exchange as a Ray compiled graph: {ray_compiled_chain(args.repeat):.2f} "
          "ms (median)")
    floors = {w: ray_compiled_rounds(w, args.repeat) for w in (2, 4)}
    print("the steady exchange as Ray compiled graphs, workers sharing one ps in synchronous "
          f"rounds: {floors[2]:.2f} ms (2 workers), {floors[4]:.2f} ms (4) (medians)")
    for workers in (1, 2, 4):
        ms = null_step(workers, args.repeat)
        print(f"sync-replica null step, {workers} worker(s): {ms['compiled']:.2f} ms (median; "
              f"{ms['worker actors']:.2f} ms with the workers' parts on their actors, "
              f"{ms['task calls']:.2f} ms with Ray task calls, {ms['read at start']:.2f} ms "
              "with values read at each step's start)")
    gone = tasks_gone()
    rt = ray_round_trip(args.repeat)
    print(f"Ray actor round trip again (median): tiny {rt['tiny']:.2f} ms"
          + ("" if gone else " (task processes of the null steps were still running)"))
    if args.null_only:
        print(f"load average after: {os.getloadavg()}")
        engine.shutdown()
        return
    sent, dense = sparse_bytes()
    print(f"sparse embedding step (100 of 1M rows x 16): {sent} bytes on the wire; "
          f"dense equivalent {dense} bytes")
    softmax = _example("dist_softmax")
    for workers in (1, 2):
        r = softmax.train(steps=100, mode="sync", workers=workers,
                          cluster_name=f"bench-softmax{workers}")
        rate = 100 * workers * softmax.BATCH_SIZE / r["seconds"]
        print(f"softmax model, {workers} worker(s), sync: {rate:.0f} examples/s")
    print(f"killed ps -> training resumed: {recovery_seconds():.2f} s")
    print(f"load average after: {os.getloadavg()}")
    engine.shutdown()


if __name__ == "__main__":
    main()
