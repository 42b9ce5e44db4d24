"""The softmax model of examples/tf1_sample.py trained on 1 ps + 2 workers (between-graph).

Each worker's client builds its own graph of the model; `replica_device_setter` puts W and b on
the ps task and the rest on the worker; `ReplicatedOptimizer` sends each worker's gradients to
the ps, which applies them (synchronously: the mean of both per step; or asynchronously). The
workers run here as two threads of this process, each with its own ClusterSession; the tasks are
Ray actors of the embedded local instance, or of the cluster at --address / RAY_ADDRESS.

    .venv/bin/python examples/dist_softmax.py [--steps 200] [--mode sync|async] [--address HOST:PORT]

The data are synthetic but learnable (ten noisy class centres), so the loss falls.
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np

import opsdk.v1 as tf
from opsdk.dist import ClusterSession, ClusterSpec, ReplicatedOptimizer, replica_device_setter

BATCH_SIZE = 10
CLUSTER = ClusterSpec({"ps": 1, "worker": 2})


def batches(worker: int, seed: int = 0):
    """An endless stream of (x, y) for one worker: ten classes, each a point in 784 dims plus
    noise (scaled so that the sample's uniform [0, 1) initial weights give moderate logits)."""
    centres = np.random.default_rng(seed).standard_normal((10, 784)) / 28.0
    rng = np.random.default_rng(1000 + worker)
    while True:
        labels = rng.integers(0, 10, BATCH_SIZE)
        x = (centres[labels] + rng.standard_normal((BATCH_SIZE, 784)) / 28.0).astype(np.float32)
        yield x, np.eye(10, dtype=np.float32)[labels]


def build(worker: int, replicas: int, learning_rate: float = 0.01):
    """One worker's graph: (graph, x, y, loss, train_op, global_step)."""
    graph = tf.Graph()
    with graph.as_default():
        with replica_device_setter(cluster=CLUSTER, worker_device=f"/job:worker/task:{worker}"):
            x = tf.placeholder(tf.float32, [BATCH_SIZE, 784])
            y = tf.placeholder(tf.float32, [BATCH_SIZE, 10])
            W_1 = tf.Variable(tf.random_uniform([784, 10], seed=1), name="W_1")
            b_1 = tf.Variable(tf.zeros([10]), name="b_1")
            global_step = tf.Variable(np.int64(0), trainable=False, name="global_step")
            layer_1 = tf.matmul(x, W_1) + b_1
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(logits=layer_1, labels=y))
        opt = ReplicatedOptimizer(tf.train.AdagradOptimizer(learning_rate), replicas_to_aggregate=replicas)
        train_op = opt.minimize(loss, global_step=global_step, var_list=[W_1, b_1])
        init = tf.global_variables_initializer()
    return graph, x, y, loss, train_op, global_step, init


def train(steps: int = 200, mode: str = "sync", address: str | None = None,
          cluster_name: str = "softmax", workers: int = 2, learning_rate: float = 0.01) -> dict:
    """Train on `workers` workers; returns per-worker losses and the elapsed seconds."""
    replicas = workers if mode == "sync" else 0
    models = [build(w, replicas, learning_rate) for w in range(workers)]
    sessions = [ClusterSession(m[0], CLUSTER, task=f"/job:worker/task:{w}", address=address,
                               cluster_name=cluster_name) for w, m in enumerate(models)]
    sessions[0].run(models[0][6])  # the chief initialises the ps variables
    losses: dict[int, list] = {w: [] for w in range(workers)}
    errors: list = []

    def loop(w: int) -> None:
        graph, x, y, loss, train_op, _, _ = models[w]
        data = batches(w)
        try:
            for _ in range(steps):
                xb, yb = next(data)
                value, _ = sessions[w].run([loss, train_op], {x: xb, y: yb})
                losses[w].append(float(value))
        except Exception as exc:  # surfaced by the caller
            errors.append(exc)
            for s in sessions:
                s.close()

    start = time.perf_counter()
    threads = [threading.Thread(target=loop, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    step = int(sessions[0].run(models[0][5]))
    for s in sessions:
        s.close()
    return {"losses": losses, "seconds": elapsed, "global_step": step}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--mode", choices=["sync", "async"], default="sync")
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--address", default=None, help="a Ray cluster (default: RAY_ADDRESS, "
                        "else an embedded local instance)")
    args = parser.parse_args()
    result = train(args.steps, args.mode, args.address, learning_rate=args.learning_rate)
    for w, values in result["losses"].items():
        print(f"worker {w}: loss {np.mean(values[:10]):.3f} -> {np.mean(values[-10:]):.3f}")
    print(f"global step {result['global_step']}, {result['seconds']:.1f} s")


if __name__ == "__main__":
    main()
