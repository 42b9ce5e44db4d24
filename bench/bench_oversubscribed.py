"""A TF1 training loop on a busy machine: the autoencoder tutorial beside 4 busy processes.

    .venv/bin/python bench/bench_oversubscribed.py [--steps 300] [--busy 4] [--json FILE]

The TF1 tutorial's MNIST autoencoder (784-256-128-256-784, sigmoid, mean squared error, RMSProp
0.01, batch 256; random images instead of MNIST, which the machine need not download) runs under
opsdk.v1 and, when installed, TensorFlow's compat.v1, each in a process of its own, first on the
machine as it is and then with `--busy` processes beside it that spin on a core each (started
here, stopped after). For each it prints the wall time and the CPU time of the steps, and CPU
time / (wall time x threads used): near 1 where every thread works, above 1.3 where threads spin
or wait for one another. Compare the two frameworks within one run only (the load changes).
The steps are timed in 5 runs of equal length: the median, min and max time per step over them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from typing import Optional

import numpy as np


def autoencoder(tf, batch: int = 256):
    """The TF1 tutorial's autoencoder graph; (train_op, feed)."""
    x = tf.placeholder(tf.float32, [None, 784])
    sizes = (784, 256, 128, 256, 784)
    h = x
    for a, b in zip(sizes, sizes[1:]):
        w = tf.Variable(tf.random_normal([a, b]))
        h = tf.nn.sigmoid(tf.matmul(h, w) + tf.Variable(tf.random_normal([b])))
    loss = tf.reduce_mean(tf.pow(x - h, 2))
    train_op = tf.train.RMSPropOptimizer(0.01).minimize(loss)
    images = np.random.default_rng(0).random((batch, 784), dtype=np.float32)
    return train_op, {x: images}


def framework(name: str):
    if name == "opsdk.v1":
        import opsdk.v1 as tf
        return tf
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    return tf


CHUNKS = 5  # the steps are timed in this many runs of equal length: median, min and max per step


def measure(name: str, steps: int) -> dict:
    """Wall and CPU seconds of `steps` training steps after 20 warm-up steps, in this process,
    and the seconds per step of each of CHUNKS equal runs of them (median, min, max)."""
    tf = framework(name)
    graph = tf.Graph()
    with graph.as_default():
        train_op, feed = autoencoder(tf)
        init = tf.global_variables_initializer()
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        for _ in range(20):
            sess.run(train_op, feed)
        start, start_cpu = time.perf_counter(), time.process_time()
        per_step, each = [], max(steps // CHUNKS, 1)
        for _ in range(CHUNKS):
            chunk = time.perf_counter()
            for _ in range(each):
                sess.run(train_op, feed)
            per_step.append((time.perf_counter() - chunk) / each)
        wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    return {"median_s": statistics.median(per_step), "min_s": min(per_step),
            "max_s": max(per_step), "repeats": CHUNKS, "steps": each * CHUNKS, "wall_s": wall,
            "cpu_s": cpu, "ms_per_step": wall / (each * CHUNKS) * 1e3}


def in_process(name: str, steps: int) -> dict:
    code = ("import sys, json; sys.path.insert(0, sys.argv[1]); import bench_oversubscribed as b; "
            "print(json.dumps(b.measure(sys.argv[2], int(sys.argv[3]))))")
    out = subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.abspath(__file__)),
                          name, str(steps)], capture_output=True, text=True)
    if out.returncode != 0:
        return {"skipped": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def case_label(machine: str) -> str:
    """The rows' case: the step, and the machine it ran on ("as it is", "4 busy processes")."""
    return f"autoencoder step, {machine}"


def spin() -> None:
    while True:
        pass


def frameworks() -> list[str]:
    names = ["opsdk.v1"]
    if importlib.util.find_spec("tensorflow") is not None:
        names.append("tf compat.v1")
    return names


def run_all(steps: int, busy: int) -> list[dict]:
    """Every framework, quiet then beside `busy` spinning processes."""
    cores = os.cpu_count() or 1
    rows = []
    for label, spinners in (("as it is", 0), (f"{busy} busy processes", busy)):
        label = case_label(label)
        procs = [multiprocessing.Process(target=spin, daemon=True) for _ in range(spinners)]
        for p in procs:
            p.start()
        try:
            time.sleep(1.0 if procs else 0.0)
            for name in frameworks():
                result = in_process(name, steps)
                rows.append({"case": label, "impl": name,
                             "load": os.getloadavg()[0], "cores": cores, **result})
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.join()
    return rows


def print_rows(rows: list[dict]) -> None:
    print(f"{'machine':22s} {'framework':14s} {'ms/step':>9s} {'CPU/wall':>9s} {'vs TF':>7s}  load")
    for r in rows:
        machine = r["case"].split(", ", 1)[1]
        if "skipped" in r:
            print(f"{machine:22s} {r['impl']:14s} skipped: {r['skipped']}")
            continue
        tf = next((t for t in rows if t["case"] == r["case"]
                   and t["impl"] == "tf compat.v1" and "wall_s" in t), None)
        ratio = f"{r['ms_per_step'] / tf['ms_per_step']:.2f}x" if tf else "-"
        print(f"{machine:22s} {r['impl']:14s} {r['ms_per_step']:9.2f} "
              f"{r['cpu_s'] / r['wall_s']:9.2f} {ratio:>7s}  {r['load']:.1f}")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--busy", type=int, default=4)
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} before; "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    rows = run_all(args.steps, args.busy)
    print_rows(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
