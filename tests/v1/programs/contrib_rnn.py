# tf.contrib as TF1 sequence tutorials use it: contrib.rnn cells (GRUCell, BasicLSTMCell,
# MultiRNNCell, DropoutWrapper) with contrib.rnn.static_rnn, and contrib.layers (flatten,
# fully_connected, xavier_initializer). TensorFlow 2 has no tf.contrib: this one runs under
# opsdk.v1 only (the agreement test skips it).
import numpy as np
import tensorflow as tf

rng = np.random.RandomState(6)
steps, depth, batch = 6, 4, 24
def data():
    xs = rng.randn(batch, steps, depth).astype(np.float32)
    # The class: which of the first two features has the larger sum over time.
    return xs, (xs[:, :, 0].sum(1) > xs[:, :, 1].sum(1)).astype(np.int64)

x = tf.placeholder(tf.float32, [None, steps, depth])
y = tf.placeholder(tf.int64, [None])
keep = tf.placeholder(tf.float32, [])
inputs = tf.unstack(x, steps, 1)
cells = [tf.contrib.rnn.DropoutWrapper(tf.contrib.rnn.GRUCell(16), output_keep_prob=keep),
         tf.contrib.rnn.BasicLSTMCell(16)]
stack = tf.contrib.rnn.MultiRNNCell(cells)
outputs, states = tf.contrib.rnn.static_rnn(stack, inputs, dtype=tf.float32)
assert len(outputs) == steps and len(states) == 2
features = tf.contrib.layers.flatten(tf.stack([outputs[-1], states[1].c], axis=1))
assert features.get_shape().as_list() == [None, 32]
hidden = tf.contrib.layers.fully_connected(features, 16,
                                           weights_initializer=tf.contrib.layers.xavier_initializer())
logits = tf.contrib.layers.fully_connected(hidden, 2, activation_fn=None)
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
train = tf.train.AdamOptimizer(0.01).minimize(loss)
try:
    tf.contrib.slim
except Exception as e:  # what is not provided says so, by name
    assert "contrib.slim" in str(e), e
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for i in range(151):
        xs, ys = data()
        _, l = sess.run([train, loss], {x: xs, y: ys, keep: 0.9})
        if i % 30 == 0:
            print("loss: %.4f" % l)
    xs, ys = data()
    acc = sess.run(accuracy, {x: xs, y: ys, keep: 1.0})
    print("accuracy: %.3f" % acc)
    assert acc > 0.8, acc
