"""`make demo`: the main job, end to end on the ops this repository declares and builds.

1. nearest-centroid assignment: a graph of `pairwise_manhattan` (C++ kernel built by `opsdk build`)
   and builtin ops, fed from NumPy, checked against NumPy;
2. TensorFlow 1's MNIST softmax tutorial (examples/mnist_softmax.py, synthetic MNIST-shaped data),
   run as written with `import opsdk.v1 as tf`: its test accuracy;
3. TensorFlow's sample program (examples/tf1_sample.py, as written) with its random labels made
   learnable (the one-hot argmax of a fixed random linear map of x): its loss going down.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import nearest_centroid  # noqa: E402


def sample_program_with_learnable_labels(steps: int = 3000) -> list[float]:
    """The sample program's graph and loop, fetching the loss, with learnable labels."""
    import opsdk.v1 as tf
    BATCH_SIZE = 10
    x = tf.placeholder(tf.float32, [BATCH_SIZE, 784])
    y = tf.placeholder(tf.float32, [BATCH_SIZE, 10])
    W_1 = tf.Variable(tf.random_uniform([784, 10]))
    b_1 = tf.Variable(tf.zeros([10]))
    layer_1 = tf.matmul(x, W_1) + b_1
    loss = tf.nn.softmax_cross_entropy_with_logits(logits=layer_1, labels=y)
    train_op = tf.train.AdagradOptimizer(0.01).minimize(loss)
    rng = np.random.default_rng(0)
    teacher = rng.normal(size=(784, 10))
    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(steps):
            x_data = rng.normal(size=(BATCH_SIZE, 784))
            y_data = np.eye(10)[np.argmax(x_data @ teacher, axis=1)]
            _, value = sess.run([train_op, loss], {x: x_data, y: y_data})
            losses.append(float(np.mean(value)))
    return losses


def main() -> None:
    print("== nearest-centroid assignment (pairwise_manhattan + builtin ops in one graph)")
    nearest_centroid.main()
    print("\n== TF1's MNIST softmax tutorial, as written, through opsdk.v1 (test accuracy)")
    run = subprocess.run([sys.executable, str(HERE / "mnist_softmax.py")], capture_output=True,
                         text=True)
    if run.returncode != 0:
        raise SystemExit(run.stderr)
    print(run.stdout.strip())
    print("\n== TensorFlow's sample program (Adagrad 0.01), its labels made learnable")
    start = time.perf_counter()
    losses = sample_program_with_learnable_labels()
    seconds = time.perf_counter() - start
    first, last = np.mean(losses[:500]), np.mean(losses[-500:])
    print(f"{len(losses)} steps in {seconds:.1f} s; mean loss of the first 500 steps {first:.3f}, "
          f"of the last 500 {last:.3f}")
    if not last < 0.8 * first:
        raise SystemExit("the training loss did not go down")


if __name__ == "__main__":
    main()
