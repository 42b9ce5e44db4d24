"""TF1 training steps per second: the seeds' sample program, two MLPs (784-256-256-10, Adam,
batch 128; 784-512-512-10, Adam, batch 256), the deep-MNIST CNN (batch 50) and an LSTM through
dynamic_rnn (batch 32, 50 steps; TensorFlow's needs tf_keras), under opsdk.v1 and,
when installed, TensorFlow's compat.v1, side by side; the wider MLP also as PyTorch eager code
(the same layers, loss and optimizer), when torch is installed.

    .venv/bin/python bench/bench_tf1.py [--steps 300] [--repeats 5] [--same-process]

Prints the median steps/s of each, their ratio, and the load average (a shared machine). Each
framework runs in a process of its own (its models one after another: one import of TensorFlow,
about 6 s of CPU, serves them all), as a user runs one program: their thread pools (OpenBLAS,
OpenMP, TensorFlow's, torch's) then cannot touch the other's figure. opsdk runs twice: as
imported, and after `opsdk.tune_process()` (the opt-in process settings, opsdk/_process.py).
`--same-process` runs all in this one (the tuned row then tunes the process for the rows after it).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def sample_program(tf, batch: int = 10):
    x = tf.placeholder(tf.float32, [batch, 784])
    y = tf.placeholder(tf.float32, [batch, 10])
    W_1 = tf.Variable(tf.random_uniform([784, 10]))
    b_1 = tf.Variable(tf.zeros([10]))
    layer_1 = tf.matmul(x, W_1) + b_1
    loss = tf.nn.softmax_cross_entropy_with_logits(logits=layer_1, labels=y)
    train_op = tf.train.AdagradOptimizer(0.01).minimize(loss)
    feed = {x: np.random.normal(size=(batch, 784)), y: np.random.normal(size=(batch, 10))}
    return train_op, feed


def mlp(tf, batch: int = 128, width: int = 256):
    x = tf.placeholder(tf.float32, [None, 784])
    y = tf.placeholder(tf.float32, [None, 10])
    h = x
    for _ in range(2):
        w = tf.Variable(tf.truncated_normal([int(h.get_shape()[1]), width], stddev=0.05))
        h = tf.nn.relu(tf.matmul(h, w) + tf.Variable(tf.zeros([width])))
    logits = tf.matmul(h, tf.Variable(tf.truncated_normal([width, 10], stddev=0.05)))
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train_op = tf.train.AdamOptimizer(1e-3).minimize(loss)
    labels = np.eye(10, dtype=np.float32)[np.random.randint(0, 10, batch)]
    return train_op, {x: np.random.rand(batch, 784).astype(np.float32), y: labels}


def mlp_wide(tf):
    return mlp(tf, batch=256, width=512)


def torch_mlp_wide(steps: int, repeats: int) -> list[float]:
    """steps/s of mlp_wide's step written as PyTorch eager code: forward, backward, Adam."""
    import torch
    layers = [torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
              torch.nn.ReLU(), torch.nn.Linear(512, 10, bias=False)]
    model = torch.nn.Sequential(*layers)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(256, 784)
    labels = torch.randint(0, 10, (256,))

    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), labels).backward()
        optimizer.step()
    for _ in range(20):
        step()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        rates.append(steps / (time.perf_counter() - start))
    return rates


def cnn(tf, batch: int = 50):
    """TF's "deep MNIST for experts" network: two 5x5 conv + 2x2 max-pool layers, fc 1024."""
    x = tf.placeholder(tf.float32, [None, 28, 28, 1])
    y = tf.placeholder(tf.float32, [None, 10])
    h = x
    for c_in, c_out in ((1, 32), (32, 64)):
        w = tf.Variable(tf.truncated_normal([5, 5, c_in, c_out], stddev=0.1))
        h = tf.nn.relu(tf.nn.conv2d(h, w, strides=[1, 1, 1, 1], padding="SAME")
                       + tf.Variable(tf.constant(0.1, shape=[c_out])))
        h = tf.nn.max_pool(h, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
    h = tf.reshape(h, [-1, 7 * 7 * 64])
    h = tf.nn.relu(tf.matmul(h, tf.Variable(tf.truncated_normal([7 * 7 * 64, 1024], stddev=0.1))))
    logits = tf.matmul(h, tf.Variable(tf.truncated_normal([1024, 10], stddev=0.1)))
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train_op = tf.train.AdamOptimizer(1e-4).minimize(loss)
    labels = np.eye(10, dtype=np.float32)[np.random.randint(0, 10, batch)]
    return train_op, {x: np.random.rand(batch, 28, 28, 1).astype(np.float32), y: labels}


def lstm(tf, batch: int = 32, time: int = 50, depth: int = 64, units: int = 128):
    """A recurrent training step as TF1's sequence tutorials write it: dynamic_rnn of an LSTM over
    [batch, 50, 64], a softmax over its last output, Adam."""
    x = tf.placeholder(tf.float32, [None, time, depth])
    y = tf.placeholder(tf.float32, [None, 10])
    out, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(units), x, dtype=tf.float32)
    logits = tf.matmul(out[:, -1], tf.Variable(tf.truncated_normal([units, 10], stddev=0.1)))
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train_op = tf.train.AdamOptimizer(1e-3).minimize(loss)
    labels = np.eye(10, dtype=np.float32)[np.random.randint(0, 10, batch)]
    return train_op, {x: np.random.rand(batch, time, depth).astype(np.float32), y: labels}


def steps_per_second(tf, build, steps: int, repeats: int) -> float:
    graph = tf.Graph()
    with graph.as_default():
        train_op, feed = build(tf)
        init = tf.global_variables_initializer()
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        for _ in range(20):
            sess.run(train_op, feed)
        rates = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(steps):
                sess.run(train_op, feed)
            rates.append(steps / (time.perf_counter() - start))
    return rates


def backends(only: str = "") -> dict:
    found = {}
    if only in ("", "opsdk.v1"):
        import opsdk.v1
        found["opsdk.v1"] = opsdk.v1
    if only in ("", "tf compat.v1") and importlib.util.find_spec("tensorflow") is not None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # compat.v1's RNN cells (tf_keras)
        import tensorflow.compat.v1 as tf
        tf.disable_eager_execution()
        found["tf compat.v1"] = tf
    return found


MODELS = (("sample program", sample_program, 1), ("MLP 784-256-256-10", mlp, 1),
          ("MLP 784-512-512-10, batch 256", mlp_wide, 8),
          ("deep-MNIST CNN", cnn, 20),  # a CNN step is ~100x an MLP step: fewer of them
          ("LSTM dynamic_rnn, 50 steps", lstm, 20))
TORCH = "torch eager"
TORCH_MODELS = {"MLP 784-512-512-10, batch 256": torch_mlp_wide}  # the models torch also runs


TUNED = "opsdk.v1 tune_process()"  # after the opt-in process settings (opsdk/_process.py)


def _framework_names() -> list[str]:
    names = ["opsdk.v1", TUNED]
    if importlib.util.find_spec("tensorflow") is not None:
        names.append("tf compat.v1")
    if importlib.util.find_spec("torch") is not None:
        names.append(TORCH)
    return names


def _one(framework: str, model: str, steps: int, repeats: int) -> list[float]:
    """steps/s of one (framework, model) pair per repeat, here or in a fresh process."""
    build = {label: fn for label, fn, _ in MODELS}[model]
    if framework == TORCH:
        return TORCH_MODELS[model](steps, repeats)
    if framework == TUNED:
        import opsdk
        opsdk.tune_process()
        framework = "opsdk.v1"
    return steps_per_second(backends(only=framework)[framework], build, steps, repeats)


def _models(framework: str, steps: int, repeats: int) -> dict[str, list[float]]:
    """steps/s per repeat of every model `framework` runs, one after another in this process; a
    model it cannot build (compat.v1's RNN cells without tf_keras) is left out, said on stderr."""
    rates = {}
    for label, _, fewer in MODELS:
        if framework == TORCH and label not in TORCH_MODELS:
            continue
        try:
            rates[label] = _one(framework, label, max(steps // fewer, 5), repeats)
        except Exception as exc:  # noqa: BLE001 - reported absent, never estimated
            print(f"{framework} cannot run {label}: {type(exc).__name__}: {exc}"[:300],
                  file=sys.stderr)
    return rates


def _in_process(framework: str, steps: int, repeats: int) -> dict[str, list[float]]:
    """_models in a fresh process: one import of the framework serves all its models."""
    code = ("import sys, json; sys.path.insert(0, sys.argv[1]); import bench_tf1; "
            "print(json.dumps(bench_tf1._models(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))")
    out = subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.abspath(__file__)),
                          framework, str(steps), str(repeats)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="also write the rows (seconds per step) to this JSON file")
    parser.add_argument("--same-process", action="store_true",
                        help="run every framework in this process (their thread pools meet)")
    args = parser.parse_args()
    names = _framework_names()
    print(f"load average before: {os.getloadavg()}; OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; "
          f"{'one process' if args.same_process else 'a process per framework'}")
    run = _models if args.same_process else _in_process
    measured = {name: run(name, args.steps, args.repeats) for name in names}
    rows = []
    for label, _, _ in MODELS:
        every = {name: measured[name][label] for name in names if label in measured[name]}
        rates = {name: statistics.median(r) for name, r in every.items()}
        rows += [{"case": label, "impl": name, "median_s": 1 / statistics.median(r),
                  "min_s": 1 / max(r), "max_s": 1 / min(r), "repeats": len(r),
                  "load": os.getloadavg()[0]} for name, r in every.items()]
        line = "  ".join(f"{n}: {r:8.1f} steps/s ({1e3 / r:.3f} ms)" for n, r in rates.items())
        ratio = (f"  opsdk/tf = {rates['opsdk.v1'] / rates['tf compat.v1']:.2f}"
                 if "tf compat.v1" in rates and "opsdk.v1" in rates
                 else "  (TensorFlow absent: not installed, or it cannot run this model)")
        print(f"{label:20s} {line}{ratio}")
    print(f"load average after: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
