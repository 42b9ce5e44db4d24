import opsdk.v1 as tf
import numpy as np
BATCH_SIZE = 10
NUM_STEPS = 10000
x = tf.placeholder(tf.float32, [BATCH_SIZE, 784])
y = tf.placeholder(tf.float32, [BATCH_SIZE, 10])
W_1 = tf.Variable(tf.random_uniform([784, 10]))
b_1 = tf.Variable(tf.zeros([10]))
layer_1 = tf.matmul(x, W_1) + b_1
loss = tf.nn.softmax_cross_entropy_with_logits(logits = layer_1, labels = y)
train_op = tf.train.AdagradOptimizer(0.01).minimize(loss)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(NUM_STEPS):
        x_data,y_data= np.random.normal(size=(BATCH_SIZE, 784)),np.random.normal(size=(BATCH_SIZE, 10))
        sess.run(train_op, {x: x_data, y: y_data})
