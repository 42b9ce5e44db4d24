# A small convolutional network: conv2d, max_pool, avg_pool, bias_add, sparse labels, in_top_k.
import numpy as np
import tensorflow as tf

# A graph seed: the conformance test asserts that the last printed loss is below the first, and in
# a sweep of 2,000 seeds one weight draw made this momentum run end on a batch above it.
tf.set_random_seed(1)
rng = np.random.RandomState(1)
protos = rng.rand(4, 12, 12, 1).astype(np.float32)
def batch(n):
    labels = rng.randint(0, 4, size=n)
    return (protos[labels] + 0.3 * rng.randn(n, 12, 12, 1)).astype(np.float32), labels

images = tf.placeholder(tf.float32, [None, 12, 12, 1], name="images")
labels = tf.placeholder(tf.int64, [None], name="labels")
def weight_variable(shape):
    return tf.Variable(tf.truncated_normal(shape, stddev=0.1))
W_conv = weight_variable([3, 3, 1, 8])
b_conv = tf.Variable(tf.constant(0.1, shape=[8]))
h_conv = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(images, W_conv, strides=[1, 1, 1, 1], padding="SAME"), b_conv))
h_pool = tf.nn.max_pool(h_conv, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
W_conv2 = weight_variable([3, 3, 8, 8])
h_conv2 = tf.nn.relu(tf.nn.conv2d(h_pool, W_conv2, [1, 2, 2, 1], "VALID"))
h_avg = tf.nn.avg_pool(h_conv2, [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
dim = np.prod(h_avg.get_shape().as_list()[1:])
flat = tf.reshape(h_avg, [-1, int(dim)])
W_fc = weight_variable([int(dim), 4])
logits = tf.matmul(flat, W_fc)
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
top1 = tf.reduce_mean(tf.to_float(tf.nn.in_top_k(logits, labels, 1)))
train_op = tf.train.MomentumOptimizer(0.05, 0.9).minimize(loss)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(61):
        xs, ys = batch(32)
        _, l = sess.run([train_op, loss], feed_dict={images: xs, labels: ys})
        if step % 20 == 0:
            print("loss: %.4f" % l)
    xs, ys = batch(200)
    print("precision@1: %.3f" % sess.run(top1, {images: xs, labels: ys}))
