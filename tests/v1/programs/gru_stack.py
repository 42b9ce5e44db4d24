# A stacked recurrent model as TF1's sequence tutorials build it: tf.nn.rnn_cell.GRUCell and
# LSTMCell in a MultiRNNCell, run by dynamic_rnn over a batch of sequences, with an initial state
# from zero_state and a sequence regression loss.
import numpy as np
import tensorflow as tf

rng = np.random.RandomState(8)
steps, batch = 8, 16
def data():
    xs = rng.randn(batch, steps, 1).astype(np.float32)
    return xs, np.cumsum(xs, axis=1) * 0.5  # a running sum: the state must carry it

x = tf.placeholder(tf.float32, [batch, steps, 1])
y = tf.placeholder(tf.float32, [batch, steps, 1])
stack = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.GRUCell(12), tf.nn.rnn_cell.LSTMCell(12)])
initial = stack.zero_state(batch, tf.float32)
outputs, final_state = tf.nn.dynamic_rnn(stack, x, initial_state=initial)
assert outputs.get_shape().as_list() == [batch, steps, 12]
flat = tf.reshape(outputs, [-1, 12])
W = tf.Variable(tf.truncated_normal([12, 1], stddev=0.1))
pred = tf.reshape(tf.matmul(flat, W), [batch, steps, 1])
loss = tf.reduce_mean(tf.square(pred - y))
train = tf.train.RMSPropOptimizer(0.01).minimize(loss)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for i in range(121):
        xs, ys = data()
        _, l = sess.run([train, loss], {x: xs, y: ys})
        if i % 30 == 0:
            print("loss: %.4f" % l)
    assert l < 0.5 * np.mean(np.square(ys)), (l, np.mean(np.square(ys)))
