"""The MNIST softmax tutorial's model trained with everything under one device scope: on the
test device in CI (and on the GPU where there is one), its losses match the host run, and each
step copies only its feeds in and its fetches out, never a value per op."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.runtime.devices import get_device

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STEPS = 20


def _losses(device: str) -> tuple[list[float], tuple[int, int]]:
    """Per-step losses of the tutorial's model under `device`, and the copies (in, out) that
    device counted over the training steps."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import input_data
    finally:
        sys.path.remove(str(EXAMPLES))
    mnist = input_data.read_data_sets("unused", one_hot=True)
    graph = tf.Graph()
    with graph.as_default(), tf.device(device):
        x = tf.placeholder(tf.float32, [None, 784])
        W = tf.Variable(tf.zeros([784, 10]))
        b = tf.Variable(tf.zeros([10]))
        y = tf.matmul(x, W) + b
        y_ = tf.placeholder(tf.float32, [None, 10])
        cross_entropy = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y))
        train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)
        init = tf.global_variables_initializer()
    where = get_device(device)
    losses = []
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        sess.run([train_step, cross_entropy], {x: np.zeros((1, 784)), y_: np.zeros((1, 10))})
        before = (where.copies_in, where.copies_out)
        for _ in range(STEPS):
            batch_xs, batch_ys = mnist.train.next_batch(100)
            _, loss = sess.run([train_step, cross_entropy], {x: batch_xs, y_: batch_ys})
            losses.append(float(loss))
        copies = (where.copies_in - before[0], where.copies_out - before[1])
    return losses, copies


def test_on_the_test_device_the_losses_match_the_host_and_only_feeds_and_fetches_move():
    host, _ = _losses("/cpu:0")
    on_device, copies = _losses("/test:0")
    np.testing.assert_allclose(on_device, host, rtol=1e-5)
    assert host[-1] < host[0]
    assert copies == (2 * STEPS, STEPS)  # x and y_ in, the loss out, per step


@pytest.mark.gpu
def test_on_the_gpu_the_losses_match_the_host_and_only_feeds_and_fetches_move(cupy):
    host, _ = _losses("/cpu:0")
    on_gpu, copies = _losses("/gpu:0")
    np.testing.assert_allclose(on_gpu, host, rtol=1e-4)
    assert copies == (2 * STEPS, STEPS)


def test_the_unchanged_example_runs_under_a_device_scope():
    runs = [subprocess.run([sys.executable, "-m", "opsdk.v1.run", *args,
                            str(EXAMPLES / "mnist_softmax.py")],
                           capture_output=True, text=True, timeout=300)
            for args in ([], ["--device", "/test:0"])]
    for run in runs:
        assert run.returncode == 0, run.stderr
    # The program prints its losses, then the test accuracy on its last line.
    assert runs[0].stdout == runs[1].stdout and float(runs[0].stdout.split()[-1]) > 0.9
