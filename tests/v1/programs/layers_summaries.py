# tf.layers, tf.losses, variable scopes with reuse, collections, flags and TensorBoard summaries.
import os
import tempfile
import numpy as np
import tensorflow as tf

flags = tf.app.flags
flags.DEFINE_integer("max_steps", 60, "Number of steps to run.")
flags.DEFINE_float("learning_rate", 0.05, "Initial learning rate.")
FLAGS = flags.FLAGS

def model(x, training, reuse):
    with tf.variable_scope("model", reuse=reuse):
        net = tf.reshape(x, [-1, 8, 8, 1])
        net = tf.layers.conv2d(net, 4, 3, padding="same", activation=tf.nn.relu, name="conv")
        net = tf.layers.max_pooling2d(net, 2, 2)
        net = tf.layers.flatten(net)
        net = tf.layers.dense(net, 16, activation=tf.nn.tanh, name="hidden")
        net = tf.layers.dropout(net, rate=0.2, training=training)
        return tf.layers.dense(net, 3, name="out")

def main(_):
    rng = np.random.RandomState(2)
    centers = rng.randn(3, 64).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 64])
    y = tf.placeholder(tf.int32, [None])
    training = tf.placeholder(tf.bool, [])
    logits = model(x, training, reuse=False)
    eval_logits = model(x, False, reuse=True)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
    mse = tf.losses.mean_squared_error(tf.one_hot(y, 3), tf.nn.softmax(eval_logits))
    assert len(tf.trainable_variables()) == 6, tf.trainable_variables()
    assert len(tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="model/hidden")) == 2
    tf.summary.scalar("loss", loss)
    tf.summary.histogram("out_kernel", tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES, "model/out")[0])
    merged = tf.summary.merge_all()
    train_op = tf.train.GradientDescentOptimizer(FLAGS.learning_rate).minimize(loss)
    logdir = tempfile.mkdtemp()
    writer = tf.summary.FileWriter(logdir, tf.get_default_graph())
    with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(FLAGS.max_steps):
            labels = rng.randint(0, 3, size=32)
            xs = centers[labels] + rng.randn(32, 64).astype(np.float32)
            summary, _, l = sess.run([merged, train_op, loss], {x: xs, y: labels, training: True})
            writer.add_summary(summary, step)
            if step % 20 == 0:
                print("loss: %.4f  mse: %.4f" % (l, sess.run(mse, {x: xs, y: labels})))
    writer.close()
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(logdir))
    print("summaries in", logdir)

if __name__ == "__main__":
    tf.app.run()
