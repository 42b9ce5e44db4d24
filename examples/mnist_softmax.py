"""TensorFlow 1's MNIST softmax-regression tutorial, run by opsdk with only the imports changed:
`import opsdk.v1 as tf` for `import tensorflow as tf`, and `input_data` (synthetic MNIST-shaped
data, examples/input_data.py) for `tensorflow.examples.tutorials.mnist.input_data`.

    .venv/bin/python examples/mnist_softmax.py [--data_dir DIR]
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import argparse
import sys

import input_data  # was: from tensorflow.examples.tutorials.mnist import input_data

import opsdk.v1 as tf  # was: import tensorflow as tf

FLAGS = None


def main(_):
  # Import data
  mnist = input_data.read_data_sets(FLAGS.data_dir, one_hot=True)

  # Create the model
  x = tf.placeholder(tf.float32, [None, 784])
  W = tf.Variable(tf.zeros([784, 10]))
  b = tf.Variable(tf.zeros([10]))
  y = tf.matmul(x, W) + b

  # Define loss and optimizer
  y_ = tf.placeholder(tf.float32, [None, 10])

  # The raw formulation of cross-entropy can be numerically unstable, so the loss is the
  # mean over the batch of softmax_cross_entropy_with_logits on the raw outputs of the model.
  cross_entropy = tf.reduce_mean(
      tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y))
  train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)

  sess = tf.InteractiveSession()
  tf.global_variables_initializer().run()
  # Train
  for _ in range(1000):
    batch_xs, batch_ys = mnist.train.next_batch(100)
    sess.run(train_step, feed_dict={x: batch_xs, y_: batch_ys})

  # Test trained model
  correct_prediction = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
  accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
  print(sess.run(accuracy, feed_dict={x: mnist.test.images,
                                      y_: mnist.test.labels}))

if __name__ == '__main__':
  parser = argparse.ArgumentParser()
  parser.add_argument('--data_dir', type=str, default='/tmp/tensorflow/mnist/input_data',
                      help='Directory for storing input data')
  FLAGS, unparsed = parser.parse_known_args()
  tf.app.run(main=main, argv=[sys.argv[0]] + unparsed)
