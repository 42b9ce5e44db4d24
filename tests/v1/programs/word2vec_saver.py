# Embeddings with a sampled loss, checkpoints with a global step, strings, shapes and dtypes.
import os
import tempfile
import numpy as np
import tensorflow as tf

vocab, dim, batch = 50, 8, 32
rng = np.random.RandomState(4)
def pairs():
    center = rng.randint(0, vocab, size=batch)
    return center, ((center + 1) % vocab).reshape(batch, 1)

train_inputs = tf.placeholder(tf.int32, shape=[batch])
train_labels = tf.placeholder(tf.int64, shape=[batch, 1])
embeddings = tf.Variable(tf.random_uniform([vocab, dim], -1.0, 1.0))
embed = tf.nn.embedding_lookup(embeddings, train_inputs)
nce_weights = tf.Variable(tf.truncated_normal([vocab, dim], stddev=1.0 / np.sqrt(dim)))
nce_biases = tf.Variable(tf.zeros([vocab]))
nce = tf.reduce_mean(tf.nn.nce_loss(weights=nce_weights, biases=nce_biases, labels=train_labels,
                                    inputs=embed, num_sampled=10, num_classes=vocab))
sampled = tf.reduce_mean(tf.nn.sampled_softmax_loss(nce_weights, nce_biases, train_labels, embed,
                                                    10, vocab))
logits = tf.matmul(embed, nce_weights, transpose_b=True) + nce_biases
full = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
    labels=tf.reshape(train_labels, [-1]), logits=logits))
global_step = tf.Variable(0, name="global_step", trainable=False)
optimizer = tf.train.GradientDescentOptimizer(0.5).minimize(nce + sampled, global_step=global_step)
greeting = tf.constant("hello, opsdk")
dyn = tf.shape(embed)
idx = tf.range(5)
small = tf.constant([1, 2, 3], dtype=tf.int8)
half = tf.cast(tf.convert_to_tensor([0.5, 1.5]), tf.float16)
ckpt_dir = tempfile.mkdtemp()
saver = tf.train.Saver()
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    assert sess.run(greeting) == b"hello, opsdk"
    assert list(sess.run(dyn, {train_inputs: np.zeros(batch, np.int32)})) == [batch, dim] and list(sess.run(idx)) == [0, 1, 2, 3, 4]
    assert sess.run(small).dtype == np.int8 and sess.run(half).dtype == np.float16
    for step in range(121):
        inputs, labels = pairs()
        _, l = sess.run([optimizer, full], {train_inputs: inputs, train_labels: labels})
        if step % 40 == 0:
            print("loss: %.4f" % l)
            saver.save(sess, os.path.join(ckpt_dir, "model.ckpt"), global_step=global_step)
    final = embeddings.eval()
state = tf.train.get_checkpoint_state(ckpt_dir)
assert state and tf.gfile.Exists(ckpt_dir)
with tf.Session() as sess:
    saver.restore(sess, state.model_checkpoint_path)
    print("restored step", sess.run(global_step))
