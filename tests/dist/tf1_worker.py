"""A between-graph TF1 worker script, run as its own process by tests/dist/test_join.py: the
form of TensorFlow's distributed examples, as written for TensorFlow (`import tensorflow`),
which `python -m opsdk.v1.run --as-tensorflow` answers with opsdk.v1.

    python -m opsdk.v1.run --as-tensorflow tf1_worker.py TASK_INDEX STEPS ADDRESS [--end-tasks]

Worker 0 is the chief (it initialises the variables); the others wait for it. With 0 steps it
only prints w; --end-tasks then ends the cluster's tasks."""

import sys

import numpy as np

import tensorflow as tf

task_index, steps, address = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
cluster = tf.train.ClusterSpec({"ps": ["localhost:2262"],
                                "worker": ["localhost:2263", "localhost:2264"]})
server = tf.train.Server(cluster, job_name="worker", task_index=task_index, address=address)
with tf.device(tf.train.replica_device_setter(
        worker_device="/job:worker/task:%d" % task_index, cluster=cluster)):
    x = tf.placeholder(tf.float32, [16, 4])
    y = tf.placeholder(tf.float32, [16, 1])
    w = tf.Variable(tf.zeros([4, 1]), name="w")
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)
sv = tf.train.Supervisor(is_chief=(task_index == 0), logdir=None, global_step=global_step)
rng = np.random.default_rng(task_index)
with sv.managed_session(server.target) as sess:
    for _ in range(steps):
        xb = rng.standard_normal((16, 4)).astype(np.float32)
        yb = xb @ np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
        sess.run(train_op, {x: xb, y: yb})
    print("worker %d: global step %d, w %s" % (task_index, sess.run(global_step),
                                               " ".join("%.3f" % v for v in sess.run(w).ravel())))
    if "--end-tasks" in sys.argv:
        sess.end_tasks()
