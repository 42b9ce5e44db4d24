"""A softmax classifier of MNIST-shaped digits written with TensorFlow 1's API, run by opsdk.v1.

The data are examples/input_data.py's synthetic digits (no download). The program trains
y = softmax(x W + b) by gradient descent on the mean cross-entropy, then prints the test
accuracy (its only line, unless --losses). It starts from zeros and draws nothing at random in
the graph, so two runs (on any device: `python -m opsdk.v1.run --device /test:0 examples/mnist_softmax.py`)
print the same numbers.

    .venv/bin/python examples/mnist_softmax.py [--steps 1000] [--batch 100] [--rate 0.5]
    .venv/bin/python examples/mnist_softmax.py --losses   # also the loss every 250 steps

`docs/tf1.md` says which public TensorFlow tutorials run unchanged but for their import line.
"""

import argparse

import input_data

import opsdk.v1 as tf

PIXELS, CLASSES = 28 * 28, 10


def build(rate):
    """The graph: images and one-hot labels fed, the loss, one training step, the accuracy."""
    images = tf.placeholder(tf.float32, [None, PIXELS], name="images")
    labels = tf.placeholder(tf.float32, [None, CLASSES], name="labels")
    weights = tf.Variable(tf.zeros([PIXELS, CLASSES]), name="weights")
    bias = tf.Variable(tf.zeros([CLASSES]), name="bias")
    logits = tf.matmul(images, weights) + bias
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    step = tf.train.GradientDescentOptimizer(rate).minimize(loss)
    hits = tf.equal(tf.argmax(logits, 1), tf.argmax(labels, 1))
    accuracy = tf.reduce_mean(tf.cast(hits, tf.float32))
    return images, labels, loss, step, accuracy


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rate", type=float, default=0.5)
    parser.add_argument("--losses", action="store_true", help="print the loss every 250 steps")
    args = parser.parse_args()
    digits = input_data.read_data_sets("", one_hot=True)
    images, labels, loss, step, accuracy = build(args.rate)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i in range(args.steps):
            batch_images, batch_labels = digits.train.next_batch(args.batch)
            _, value = sess.run([step, loss], {images: batch_images, labels: batch_labels})
            if args.losses and i % 250 == 0:
                print("step %d loss: %.4f" % (i, value))
        print(sess.run(accuracy, {images: digits.test.images, labels: digits.test.labels}))


if __name__ == "__main__":
    main()
