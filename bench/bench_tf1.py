"""TF1 training steps per second: the seeds' sample program, an MLP (784-256-256-10, Adam,
batch 128) and the deep-MNIST CNN (batch 50), under opsdk.v1 and, when installed, TensorFlow's
compat.v1, side by side.

    .venv/bin/python bench/bench_tf1.py [--steps 300] [--repeats 5]

Prints the median steps/s of each, their ratio, and the load average (a shared machine).
NumPy's OpenBLAS starts its own threads for opsdk's matmuls: on a small busy machine they fight
the executor's (compare with OPENBLAS_NUM_THREADS=1; docs/tf1.md, "Speed").
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
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


def mlp(tf, batch: int = 128):
    x = tf.placeholder(tf.float32, [None, 784])
    y = tf.placeholder(tf.float32, [None, 10])
    h = x
    for width in (256, 256):
        w = tf.Variable(tf.truncated_normal([int(h.get_shape()[1]), width], stddev=0.05))
        h = tf.nn.relu(tf.matmul(h, w) + tf.Variable(tf.zeros([width])))
    logits = tf.matmul(h, tf.Variable(tf.truncated_normal([256, 10], stddev=0.05)))
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train_op = tf.train.AdamOptimizer(1e-3).minimize(loss)
    labels = np.eye(10, dtype=np.float32)[np.random.randint(0, 10, batch)]
    return train_op, {x: np.random.rand(batch, 784).astype(np.float32), y: labels}


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
    return statistics.median(rates)


def backends() -> dict:
    import opsdk.v1
    found = {"opsdk.v1": opsdk.v1}
    if importlib.util.find_spec("tensorflow") is not None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow.compat.v1 as tf
        tf.disable_eager_execution()
        found["tf compat.v1"] = tf
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    found = backends()
    print(f"load average before: {os.getloadavg()}; OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    models = (("sample program", sample_program, 1), ("MLP 784-256-256-10", mlp, 1),
              ("deep-MNIST CNN", cnn, 20))  # a CNN step is ~100x an MLP step: fewer of them
    for label, build, fewer in models:
        rates = {name: steps_per_second(tf, build, max(args.steps // fewer, 5), args.repeats)
                 for name, tf in found.items()}
        line = "  ".join(f"{n}: {r:8.1f} steps/s ({1e3 / r:.3f} ms)" for n, r in rates.items())
        ratio = (f"  opsdk/tf = {rates['opsdk.v1'] / rates['tf compat.v1']:.2f}"
                 if len(rates) == 2 else "  (TensorFlow not installed)")
        print(f"{label:20s} {line}{ratio}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
