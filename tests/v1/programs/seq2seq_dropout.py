# An encoder-decoder over batches whose size and length are known only when the graph runs, as
# TF1 sequence tutorials build it: dynamic_rnn with a DropoutWrapper in both cells, the encoder's
# final state starting the decoder, tf.layers.dense over [batch, time, units] (both unknown) and
# a moving average of the weights updated after each training step.
import numpy as np
import tensorflow as tf

rng = np.random.RandomState(5)
symbols = 6

def batch(n, steps):
    words = rng.randint(0, symbols, size=(n, steps))
    one_hot = np.eye(symbols, dtype=np.float32)
    return one_hot[words], one_hot[np.roll(words, 1, axis=1)], words[:, ::-1]

enc_in = tf.placeholder(tf.float32, [None, None, symbols])
dec_in = tf.placeholder(tf.float32, [None, None, symbols])
targets = tf.placeholder(tf.int64, [None, None])
keep = tf.placeholder_with_default(1.0, [])
with tf.variable_scope("encode"):
    cell = tf.nn.rnn_cell.DropoutWrapper(tf.nn.rnn_cell.BasicRNNCell(24), output_keep_prob=keep)
    _, enc_state = tf.nn.dynamic_rnn(cell, enc_in, dtype=tf.float32)
with tf.variable_scope("decode"):
    cell = tf.nn.rnn_cell.DropoutWrapper(tf.nn.rnn_cell.BasicRNNCell(24), input_keep_prob=keep,
                                         output_keep_prob=keep)
    outputs, _ = tf.nn.dynamic_rnn(cell, dec_in, initial_state=enc_state, dtype=tf.float32)
logits = tf.layers.dense(outputs, symbols)
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets,
                                                                     logits=logits))
step = tf.train.AdamOptimizer(0.02).minimize(loss)
ema = tf.train.ExponentialMovingAverage(0.9)
with tf.control_dependencies([step]):
    train = ema.apply(tf.trainable_variables())
accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 2), targets), tf.float32))

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for i in range(60):
        a, b, c = batch(16, 3 + i % 3)  # another length every step
        _, value = sess.run([train, loss], {enc_in: a, dec_in: b, targets: c, keep: 0.9})
        if i % 10 == 0:
            print("step %d loss: %.4f" % (i, value))
    a, b, c = batch(32, 4)
    print("final loss: %.4f accuracy: %.2f" % tuple(sess.run([loss, accuracy],
                                                          {enc_in: a, dec_in: b, targets: c})))
