# Shapes known only when the graph runs, as the denoising autoencoders and RNN tutorials of TF1
# courses use them: noise drawn with tf.shape(x) and a tensor stddev, zeros of a run-time batch,
# a batch split into time steps along an axis of unknown size, TF1's arg_max.
import numpy as np
import tensorflow as tf

rng = np.random.RandomState(3)
protos = (rng.rand(4, 16) < 0.4).astype(np.float32)
def batch(n):
    labels = rng.randint(0, 4, size=n)
    return protos[labels] + 0.1 * rng.randn(n, 16).astype(np.float32), labels

x = tf.placeholder(tf.float32, [None, 16])
y = tf.placeholder(tf.int64, [None])
noise_level = tf.placeholder_with_default(tf.constant(0.2), [])
noisy = x + tf.random_normal(tf.shape(x), mean=0.0, stddev=noise_level)
time_major = tf.transpose(tf.reshape(noisy, [-1, 4, 4]), [1, 0, 2])  # [step, batch, 4]
steps = tf.split(tf.reshape(time_major, [-1, 4]), 4, 0)  # 4 steps of [batch, 4]: dim 0 unknown
state = tf.zeros([tf.shape(x)[0], 8])
W_in = tf.Variable(tf.truncated_normal([4, 8], stddev=0.3))
W_state = tf.Variable(tf.truncated_normal([8, 8], stddev=0.3))
for part in steps:
    state = tf.tanh(tf.matmul(part, W_in) + tf.matmul(state, W_state))
W_out = tf.Variable(tf.zeros([8, 4]))
logits = tf.matmul(state, W_out)
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
train = tf.train.AdamOptimizer(0.02).minimize(loss)
accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.arg_max(logits, 1), y), tf.float32))

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(150):
        xs, ys = batch(32)
        _, value = sess.run([train, loss], {x: xs, y: ys})
        if step % 15 == 0:
            print("step %d loss: %.4f" % (step, value))
    xs, ys = batch(200)
    print("accuracy %.3f" % sess.run(accuracy, {x: xs, y: ys, noise_level: 0.0}))
