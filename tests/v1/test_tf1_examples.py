"""The TF1 programs of examples/ and the issue's sample program run as written under opsdk.v1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_mnist_softmax_tutorial_runs_and_learns():
    out = subprocess.run([sys.executable, "examples/mnist_softmax.py"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    accuracy = float(out.stdout.strip().splitlines()[-1])
    assert accuracy > 0.9  # 10 classes: chance is 0.1


def test_the_sample_program_as_written_learns_learnable_labels():
    import opsdk.v1 as tf
    tf.reset_default_graph()
    BATCH_SIZE = 10
    x = tf.placeholder(tf.float32, [BATCH_SIZE, 784])
    y = tf.placeholder(tf.float32, [BATCH_SIZE, 10])
    W_1 = tf.Variable(tf.random_uniform([784, 10]))
    b_1 = tf.Variable(tf.zeros([10]))
    layer_1 = tf.matmul(x, W_1) + b_1
    loss = tf.nn.softmax_cross_entropy_with_logits(logits = layer_1, labels = y)
    train_op = tf.train.AdagradOptimizer(0.01).minimize(loss)
    rng = np.random.default_rng(0)
    teacher = rng.normal(size=(784, 10))
    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(10000):  # the program's NUM_STEPS: Adagrad(0.01) from U[0, 1) is slow
            x_data = rng.normal(size=(BATCH_SIZE, 784))
            y_data = np.eye(10)[np.argmax(x_data @ teacher, axis=1)]
            _, value = sess.run([train_op, loss], {x: x_data, y: y_data})
            losses.append(float(np.mean(value)))
    assert np.mean(losses[-1000:]) < 0.7 * np.mean(losses[:1000])


def test_the_sample_program_file_runs_exactly_as_written():
    source = (ROOT / "examples" / "tf1_sample.py").read_text()
    assert source.startswith("import opsdk.v1 as tf\n")  # the only line that differs from TF's
    out = subprocess.run([sys.executable, "examples/tf1_sample.py"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
