"""TensorFlow 1's MNIST softmax regression, run by opsdk with only the import changed.

The data is synthetic and MNIST-shaped (no download): 28x28 images in [0, 1] drawn around one
prototype per digit class, so a linear softmax layer can separate them. Run:

    .venv/bin/python examples/mnist_softmax.py
"""

from __future__ import annotations

import numpy as np

import opsdk.v1 as tf  # the one changed line: `import tensorflow as tf`


class SyntheticMnist:
    """Images (n, 784) float32 and one-hot labels (n, 10), with `next_batch` as in the tutorial."""

    def __init__(self, n: int, seed: int, prototypes: np.ndarray):
        rng = np.random.default_rng(seed)
        self.labels = rng.integers(0, 10, size=n)
        noise = rng.normal(0.0, 0.35, size=(n, 784))
        self.images = np.clip(prototypes[self.labels] + noise, 0.0, 1.0).astype(np.float32)
        self.one_hot = np.eye(10, dtype=np.float32)[self.labels]
        self._rng = rng

    def next_batch(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        pick = self._rng.integers(0, len(self.labels), size=size)
        return self.images[pick], self.one_hot[pick]


def make_data(seed: int = 0) -> tuple[SyntheticMnist, SyntheticMnist]:
    """Train and test sets sharing the class prototypes (random strokes of 28x28 pixels)."""
    rng = np.random.default_rng(seed)
    prototypes = (rng.random((10, 784)) < 0.2).astype(np.float64)
    return SyntheticMnist(5000, seed + 1, prototypes), SyntheticMnist(1000, seed + 2, prototypes)


def main(steps: int = 300, report_every: int = 50, seed: int = 0) -> list[float]:
    """Train the softmax layer; print and return the training loss every `report_every` steps."""
    train_set, test_set = make_data(seed)
    tf.reset_default_graph()

    # ---- the tutorial's program, unchanged ------------------------------------------------
    x = tf.placeholder(tf.float32, [None, 784])
    W = tf.Variable(tf.zeros([784, 10]))
    b = tf.Variable(tf.zeros([10]))
    y = tf.matmul(x, W) + b
    y_ = tf.placeholder(tf.float32, [None, 10])
    cross_entropy = tf.reduce_mean(
        tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y))
    train_step = tf.train.AdagradOptimizer(0.01).minimize(cross_entropy)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    losses = []
    for step in range(steps + 1):
        batch_xs, batch_ys = train_set.next_batch(100)
        if step % report_every == 0:
            losses.append(float(sess.run(cross_entropy, feed_dict={x: batch_xs, y_: batch_ys})))
            print(f"step {step:4d}  loss {losses[-1]:.4f}")
        if step < steps:
            sess.run(train_step, feed_dict={x: batch_xs, y_: batch_ys})
    # ---------------------------------------------------------------------------------------

    logits = sess.run(y, feed_dict={x: test_set.images})
    accuracy = float(np.mean(np.argmax(logits, axis=1) == test_set.labels))
    print(f"test accuracy {accuracy:.3f}")
    sess.close()
    return losses


if __name__ == "__main__":
    main()
