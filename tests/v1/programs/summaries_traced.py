# TensorBoard's dashboards from a TF1 training loop: image, scalar and histogram summaries under
# name scopes, a traced step every 25 steps (RunOptions, RunMetadata, add_run_metadata) and its
# Chrome trace from the timeline module, log folders made with tf.gfile.
import json
import os
import tempfile

import numpy as np
import tensorflow as tf
from tensorflow.python.client import timeline

logdir = os.path.join(tempfile.mkdtemp(), "logs")
if tf.gfile.Exists(logdir):
    tf.gfile.DeleteRecursively(logdir)
tf.gfile.MakeDirs(logdir)

rng = np.random.RandomState(4)
prototypes = (rng.rand(4, 36) < 0.3).astype(np.float32)

with tf.name_scope("input"):
    x = tf.placeholder(tf.float32, [None, 36], name="x-input")
    y_ = tf.placeholder(tf.float32, [None, 4], name="y-input")
with tf.name_scope("input_reshape"):
    tf.summary.image("input", tf.reshape(x, [-1, 6, 6, 1]), 2)


def layer(inputs, size_in, size_out, name, act=tf.nn.relu):
    with tf.name_scope(name):
        w = tf.Variable(tf.truncated_normal([size_in, size_out], stddev=0.1), name="weights")
        b = tf.Variable(tf.constant(0.1, shape=[size_out]), name="biases")
        tf.summary.histogram("weights", w)
        tf.summary.scalar("bias_mean", tf.reduce_mean(b))
        out = act(tf.matmul(inputs, w) + b)
        tf.summary.histogram("activations", out)
        return out


hidden = layer(x, 36, 16, "layer1")
logits = layer(hidden, 16, 4, "layer2", act=tf.identity)
with tf.name_scope("cross_entropy"):
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=logits))
tf.summary.scalar("cross_entropy", loss)
train_step = tf.train.AdamOptimizer(0.01).minimize(loss)
merged = tf.summary.merge_all()

sess = tf.InteractiveSession()
writer = tf.summary.FileWriter(logdir + "/train", sess.graph)
tf.global_variables_initializer().run()
traces = 0
for i in range(60):
    labels = rng.randint(0, 4, size=20)
    xs = np.clip(prototypes[labels] + 0.3 * rng.randn(20, 36), 0, 1).astype(np.float32)
    feed = {x: xs, y_: np.eye(4, dtype=np.float32)[labels]}
    if i % 25 == 24:
        run_options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        run_metadata = tf.RunMetadata()
        summary, _, l = sess.run([merged, train_step, loss], feed_dict=feed,
                                 options=run_options, run_metadata=run_metadata)
        writer.add_run_metadata(run_metadata, "step%03d" % i)
        trace = timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format()
        ops = [e for e in json.loads(trace)["traceEvents"] if e.get("ph") == "X"]
        assert any(e["args"]["name"].startswith("layer1") for e in ops), ops[:3]
        traces += 1
    else:
        summary, _, l = sess.run([merged, train_step, loss], feed_dict=feed)
    writer.add_summary(summary, i)
    if i % 10 == 0:
        print("loss: %.4f" % l)
writer.close()
sess.close()
assert traces == 2
assert tf.gfile.ListDirectory(logdir + "/train")
