"""A 2-way sharded embedding: lookups and sparse updates send rows, not tables."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

import opsdk.v1 as tf
from opsdk.dist import ClusterSession, ReplicatedOptimizer, ShardedEmbedding

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CLUSTER = {"ps": 2, "worker": 1}


def test_a_step_touching_100_rows_of_a_million_sends_about_100_rows(ray_engine):
    vocab, dim, k = 1_000_000, 16, 100
    g = tf.Graph()
    with g.as_default():
        table = ShardedEmbedding(vocab, dim, ["/job:ps/task:0", "/job:ps/task:1"])
        ids = tf.placeholder(tf.int64, [k])
        loss = tf.reduce_sum(tf.square(table.lookup(ids)))
        train = ReplicatedOptimizer(tf.train.GradientDescentOptimizer(0.1)).minimize(
            loss, var_list=[], embeddings=[table])
        init = tf.global_variables_initializer()
    with ClusterSession(g, CLUSTER, cluster_name="bytes") as sess:
        sess.run(init)
        chosen = np.random.default_rng(0).choice(vocab, k, replace=False).astype(np.int64)
        before = sess.run(loss, {ids: chosen})
        counts = {t: s["bytes_sent"] for t, s in sess.task_stats().items()}
        sess.run(train, {ids: chosen})
        sent = {t: s["bytes_sent"] - counts[t] for t, s in sess.task_stats().items()}
        after = sess.run(loss, {ids: chosen})
        shard0 = sess.variable_values()["embedding/shard_0"]
    row_bytes = k * dim * 4
    ps = sent["/job:ps/replica:0/task:0"] + sent["/job:ps/replica:0/task:1"]
    worker = sent["/job:worker/replica:0/task:0"]
    # forward: the 100 rows from the shards; backward: 100 gradient rows and the ids to them
    assert row_bytes <= ps <= row_bytes * 1.1
    assert row_bytes <= worker <= row_bytes * 1.1 + k * 8 * 2
    dense = vocab * dim * 4
    assert ps + worker < dense / 100
    assert after < before  # the update was applied
    assert shard0.shape == (500_000, dim)


def test_bag_of_words_example_learns_on_two_ps_and_two_workers(ray_engine):
    spec = importlib.util.spec_from_file_location("dist_bow", EXAMPLES / "dist_bow.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.train(steps=40, vocab=400, cluster_name="bow-test", learning_rate=8.0)
    for losses in result["losses"].values():
        assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:10])
