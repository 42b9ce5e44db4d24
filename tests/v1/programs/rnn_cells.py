# Recurrent models: BasicRNNCell with static_rnn over unstacked steps, an LSTM with dynamic_rnn.
import numpy as np
import tensorflow as tf

rng = np.random.RandomState(3)
steps, depth, batch = 5, 3, 16
def data():
    xs = rng.randn(batch, steps, depth).astype(np.float32)
    return xs, (xs[:, :, 0].sum(1) > 0).astype(np.int64)

x = tf.placeholder(tf.float32, [None, steps, depth])
y = tf.placeholder(tf.int64, [None])
with tf.variable_scope("static"):
    cell = tf.nn.rnn_cell.BasicRNNCell(8)
    outputs, state = tf.nn.static_rnn(cell, tf.unstack(x, steps, 1), dtype=tf.float32)
with tf.variable_scope("dynamic"):
    lstm = tf.nn.rnn_cell.BasicLSTMCell(8)
    seq_out, lstm_state = tf.nn.dynamic_rnn(lstm, x, dtype=tf.float32)
first, second = tf.split(seq_out, 2, axis=2)
features = tf.concat([outputs[-1], lstm_state.h, first[:, -1, :] * 0.0], 1)
W = tf.Variable(tf.random_normal([20, 2], stddev=0.1))
logits = tf.matmul(features, W)
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
train = tf.train.AdamOptimizer(0.02).minimize(loss)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for i in range(81):
        xs, ys = data()
        _, l = sess.run([train, loss], {x: xs, y: ys})
        if i % 20 == 0:
            print("loss: %.4f" % l)
