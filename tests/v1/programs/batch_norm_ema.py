# What the public corpus taught beyond the first rounds, in one TF1 program started from fixed
# weights (no random op in the graph), so that its losses must equal TensorFlow's step by step:
# tf.layers.batch_normalization with a training placeholder and its UPDATE_OPS run with the
# step, the moving averages used at test time, tf.train.ExponentialMovingAverage of the weights
# applied after each step, float labels fed into an int32 placeholder (TF's session converts
# them), tf.sin / tf.cos features, tf.stack of a run-time batch size and Python ints, and
# tf.squared_difference.
# opsdk-check: same-losses
import numpy as np
import tensorflow as tf

rng = np.random.RandomState(3)
centers = rng.randn(3, 4).astype(np.float32) * 2
def batch(n):
    labels = rng.randint(0, 3, size=n)
    xs = (centers[labels] + 0.5 * rng.randn(n, 4) + 1.5).astype(np.float32)
    return xs, labels.astype(np.float32)  # float labels, as some tutorials keep them

x = tf.placeholder(tf.float32, [None, 4])
y = tf.placeholder(tf.int32, [None])
training = tf.placeholder(tf.bool)
features = tf.concat([x, tf.sin(x), tf.cos(x)], axis=1)
init = np.random.RandomState(5)
hidden = tf.layers.dense(features, 16, activation=tf.nn.relu,
                         kernel_initializer=tf.constant_initializer(
                             init.normal(0, 0.3, (12, 16)).astype(np.float32)))
normed = tf.layers.batch_normalization(hidden, momentum=0.9, training=training)
logits = tf.layers.dense(normed, 3, kernel_initializer=tf.constant_initializer(
    init.normal(0, 0.3, (16, 3)).astype(np.float32)))
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
# the same logits through a reshape whose shape is a stack of a tensor and Python ints
shape = tf.stack([tf.shape(logits)[0], 3, 1])
spread = tf.reduce_mean(tf.squared_difference(tf.reshape(logits, shape), 0.0))

with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
    step = tf.train.MomentumOptimizer(0.05, 0.9).minimize(loss)
ema = tf.train.ExponentialMovingAverage(0.8)
with tf.control_dependencies([step]):
    train = ema.apply(tf.trainable_variables())
kernel = [v for v in tf.trainable_variables() if v.name.startswith("dense/kernel")][0]
correct = tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), y)
accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for i in range(61):
        xs, ys = batch(32)
        if i % 15 == 0:
            print("loss: %.6f" % sess.run(loss, {x: xs, y: ys, training: False}))
        sess.run(train, {x: xs, y: ys, training: True})
    xs, ys = batch(300)
    acc, value = sess.run([accuracy, spread], {x: xs, y: ys, training: False})
    print("accuracy: %.4f spread: %.4f" % (acc, value))
    assert acc > 0.8, acc
    kept, shadow = sess.run([kernel, ema.average(kernel)])
    print("ema gap: %.6f" % np.abs(kept - shadow).mean())
    assert 0 < np.abs(kept - shadow).mean() < np.abs(kept).mean()
