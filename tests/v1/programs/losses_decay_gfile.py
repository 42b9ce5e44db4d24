# tf.losses with weights and label smoothing, get_total_loss, a staircase exponential_decay driven
# by the global step, and tf.gfile for the run's files (in the style of the TF1 regression and
# CIFAR-10 tutorials). Nothing in the graph is random, so the losses must equal TensorFlow's.
# opsdk-check: same-losses
import os
import tempfile
import numpy as np
import tensorflow as tf

rng = np.random.RandomState(5)
true_w = rng.randn(6, 3).astype(np.float32)
def batch(n=32):
    xs = rng.randn(n, 6).astype(np.float32)
    scores = xs.dot(true_w)
    weights = (rng.rand(n) > 0.25).astype(np.float32)  # a quarter of the examples masked out
    return xs, scores, np.argmax(scores, 1), (scores > 0).astype(np.float32), weights

x = tf.placeholder(tf.float32, [None, 6])
target = tf.placeholder(tf.float32, [None, 3])
labels = tf.placeholder(tf.int64, [None])
multi = tf.placeholder(tf.float32, [None, 3])
example_weights = tf.placeholder(tf.float32, [None])
with tf.variable_scope("linear"):
    W = tf.get_variable("W", [6, 3], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", [3], initializer=tf.zeros_initializer())
pred = tf.matmul(x, W) + b
tf.losses.mean_squared_error(target, pred)
tf.losses.absolute_difference(target, pred, weights=0.5)
tf.losses.huber_loss(target, pred, delta=2.0)
tf.losses.sparse_softmax_cross_entropy(labels, pred, weights=example_weights)
tf.losses.softmax_cross_entropy(tf.one_hot(labels, 3), pred, label_smoothing=0.1)
tf.losses.sigmoid_cross_entropy(multi, pred, label_smoothing=0.1)
tf.losses.log_loss(multi, tf.sigmoid(pred))
assert len(tf.losses.get_losses()) == 7
total = tf.losses.get_total_loss()

global_step = tf.train.get_or_create_global_step()
learning_rate = tf.train.exponential_decay(0.05, global_step, 20, 0.5, staircase=True)
train_op = tf.train.GradientDescentOptimizer(learning_rate).minimize(total, global_step=global_step)

run_dir = os.path.join(tempfile.mkdtemp(), "run", "logs")
tf.gfile.MakeDirs(run_dir)
rates = []
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for i in range(61):
        xs, scores, ys, signs, ws = batch()
        feed = {x: xs, target: scores, labels: ys, multi: signs, example_weights: ws}
        _, loss, rate = sess.run([train_op, total, learning_rate], feed)
        rates.append(float(rate))
        if i % 20 == 0:
            print("loss: %.4f  learning rate: %.4f" % (loss, rate))
    assert sess.run(global_step) == 61
    with tf.gfile.GFile(os.path.join(run_dir, "final_loss.txt"), "w") as f:
        f.write("%.6f\n" % loss)
assert np.allclose(rates[:20], 0.05) and np.allclose(rates[20:40], 0.025) and np.allclose(rates[40:60], 0.0125)
assert tf.gfile.Exists(run_dir) and tf.gfile.IsDirectory(run_dir)
assert tf.gfile.ListDirectory(run_dir) == ["final_loss.txt"]
assert tf.gfile.Glob(os.path.join(run_dir, "*.txt"))
with tf.gfile.GFile(os.path.join(run_dir, "final_loss.txt")) as f:
    assert abs(float(f.read()) - loss) < 1e-5
tf.gfile.DeleteRecursively(os.path.dirname(run_dir))
assert not tf.gfile.Exists(run_dir)
