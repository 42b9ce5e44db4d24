# A two-layer perceptron with dropout in the style of the TF1 MNIST tutorials: it must learn
# (accuracy > 0.9 on fresh digits), not merely print a falling loss.
import numpy as np
import tensorflow as tf

# MNIST replaced by synthetic digits of the same interface: each class is a fixed random stroke
# pattern of 28x28 pixels in [0, 1], drawn with noise and a random brightness.
rng = np.random.RandomState(0)
strokes = (rng.rand(10, 784) < 0.15).astype(np.float32)
def batch(n):
    labels = rng.randint(0, 10, size=n)
    ink = strokes[labels] * rng.uniform(0.5, 1.0, size=(n, 1))
    xs = np.clip(ink + rng.randn(n, 784), 0.0, 1.0).astype(np.float32)
    return xs, np.eye(10, dtype=np.float32)[labels]

x = tf.placeholder("float", [None, 784])
y_ = tf.placeholder("float", [None, 10])
keep_prob = tf.placeholder(tf.float32)
W1 = tf.Variable(tf.truncated_normal([784, 64], stddev=0.1))
b1 = tf.Variable(tf.constant(0.1, shape=[64]))
h1 = tf.nn.relu(tf.matmul(x, W1) + b1)
h1_drop = tf.nn.dropout(h1, keep_prob)
W2 = tf.Variable(tf.random_normal([64, 10], stddev=0.1))
b2 = tf.Variable(tf.zeros([10]))
y = tf.nn.softmax(tf.matmul(h1_drop, W2) + b2)
cross_entropy = -tf.reduce_sum(y_ * tf.log(y + 1e-8), reduction_indices=[1])
loss = tf.reduce_mean(cross_entropy, keep_dims=False)
train_step = tf.train.AdamOptimizer(1e-3).minimize(loss)
correct = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
assert W1.get_shape().as_list() == [784, 64]
assert x.get_shape().as_list() == [None, 784]

sess = tf.InteractiveSession()
tf.global_variables_initializer().run()
for i in range(201):
    xs, ys = batch(50)
    if i % 50 == 0:
        print("loss: %g" % loss.eval(feed_dict={x: xs, y_: ys, keep_prob: 1.0}))
    train_step.run(feed_dict={x: xs, y_: ys, keep_prob: 0.5})
xs, ys = batch(500)
acc = accuracy.eval(feed_dict={x: xs, y_: ys, keep_prob: 1.0})
print("accuracy: %g" % acc)
assert acc > 0.9, acc
print("b1 mean: %g" % np.mean(b1.eval()))
sess.close()
