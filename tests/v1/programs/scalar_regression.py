# A line fitted with two 0-d variables, as the first lessons of TF1 courses write it: Python
# numbers become 0-d constants, the 0-d gradients reach the compiled gradient-descent update, and
# the printed values are 0-d ("%f" formats them). No random op: the losses must equal
# TensorFlow's step by step.
# opsdk-check: same-losses
import tensorflow as tf

xs = [1.0, 2.0, 3.0, 4.0]
ys = [2.1, 3.9, 6.2, 7.8]
W = tf.Variable(0.5, name="weight")
b = tf.Variable(-1.0, name="bias")
X = tf.placeholder(tf.float32, shape=(4))  # an int shape: one dim of 4
Y = tf.placeholder(tf.float32, shape=[None])
hypothesis = X * W + b
cost = tf.reduce_mean(tf.square(hypothesis - Y))
train = tf.train.GradientDescentOptimizer(learning_rate=0.02).minimize(cost)
two, three = tf.constant(2), tf.constant(3)

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    print("%i" % sess.run(two + three))
    for step in range(60):
        _, c = sess.run([train, cost], feed_dict={X: xs, Y: ys})
        if step % 5 == 0:
            print("step %d loss: %f" % (step, c))
    w_value, b_value = sess.run([W, b])
    print("W %.3f b %.3f" % (w_value, b_value))
