"""tf.contrib.factorization.KMeans (opsdk/v1/factorization.py): the TF1 k-means tutorial's pattern
on synthetic blobs for each distance and initialisation, one Lloyd iteration and one mini-batch
step against NumPy, the distances against NumPy, and clear refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

factorization = tf.contrib.factorization
rng = np.random.default_rng(21)
# Apart in direction as well as in place, so that every metric can separate them.
CENTERS = 10.0 * np.eye(4, dtype=np.float32) + 1.0


def _blobs(per_blob=60, spread=0.6):
    labels = np.repeat(np.arange(len(CENTERS)), per_blob)
    points = CENTERS[labels] + rng.normal(0, spread, (len(labels), CENTERS.shape[1]))
    order = rng.permutation(len(labels))
    return points[order].astype(np.float32), labels[order]


def _tutorial(points, metric, init, mini_batch, steps=15):
    """The TF1 k-means tutorial's lines: the graph, its init op, the training loop fetching the
    average distance and the cluster of each point."""
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, shape=[None, points.shape[1]])
        kmeans = factorization.KMeans(inputs=x, num_clusters=len(CENTERS), distance_metric=metric,
                                      initial_clusters=init, use_mini_batch=mini_batch)
        (all_scores, cluster_idx, scores, cluster_centers_initialized, init_op,
         train_op) = kmeans.training_graph()
        cluster_idx = cluster_idx[0]  # one tensor per input shard
        avg_distance = tf.reduce_mean(scores)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer(), feed_dict={x: points})
            assert not sess.run(cluster_centers_initialized)
            sess.run(init_op, feed_dict={x: points})
            assert sess.run(cluster_centers_initialized)
            distances = []
            for _ in range(steps):
                _, d, idx = sess.run([train_op, avg_distance, cluster_idx], feed_dict={x: points})
                distances.append(d)
            scores_all = sess.run(all_scores[0], feed_dict={x: points})
    return np.array(distances), idx, scores_all


def _purity(idx, labels):
    """The share of points whose cluster's majority label is their own."""
    right = sum(np.bincount(labels[idx == c]).max() for c in np.unique(idx))
    return right / len(labels)


@pytest.mark.parametrize("metric,init,mini_batch", list(itertools.product(
    ["squared_euclidean", "cosine", "manhattan"], ["random", "kmeans_plus_plus"], [False, True])))
def test_the_tutorial_separates_blobs(metric, init, mini_batch):
    points, labels = _blobs()
    if init == "random":  # a random start may merge two blobs: start from one point of each
        init = points[[np.flatnonzero(labels == c)[0] for c in range(len(CENTERS))]]
    distances, idx, all_scores = _tutorial(points, metric, init, mini_batch)
    assert _purity(idx, labels) == 1.0
    assert len(np.unique(idx)) == len(CENTERS)
    assert distances[-1] <= distances[0] + 1e-6
    np.testing.assert_array_equal(idx, all_scores.argmin(1))


def test_kmeans_plus_plus_finds_the_blobs_from_its_own_start():
    # Well-separated blobs: k-means++ starts in four different ones with high probability; the
    # draw is seeded (random_seed), so this is one fixed draw, not a flaky one.
    points, labels = _blobs(spread=0.3)
    for seed in range(3):
        with tf.Graph().as_default():
            x = tf.constant(points)
            kmeans = factorization.KMeans(x, 4, initial_clusters="kmeans_plus_plus",
                                          random_seed=seed)
            _, (idx,), _, _, init_op, train_op = kmeans.training_graph()
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                sess.run(init_op)
                for _ in range(10):
                    sess.run(train_op)
                assert _purity(sess.run(idx), labels) == 1.0


def test_random_init_takes_distinct_rows_and_init_op_runs_once():
    points = rng.standard_normal((9, 3)).astype(np.float32)
    with tf.Graph().as_default():
        kmeans = factorization.KMeans(tf.constant(points), 9, random_seed=3)
        _, _, _, _, init_op, _ = kmeans.training_graph()
        centers = [v for v in tf.global_variables() if v.name.startswith("kmeans/clusters")][0]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(init_op)
            first = sess.run(centers)
            sess.run(init_op)
            np.testing.assert_array_equal(sess.run(centers), first)
    assert sorted(map(tuple, first)) == sorted(map(tuple, points))  # every row, once


def _upstream(op):
    """Every op that `op` waits for, by data or control edges."""
    seen, todo = set(), [op]
    while todo:
        current = todo.pop()
        for parent in [t.op for t in current.inputs] + list(current.control_inputs):
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return seen


@pytest.mark.parametrize("mini_batch", [False, True])
def test_every_write_of_a_step_waits_for_the_reads_of_its_variable(mini_batch):
    # A write that a read of the same step does not precede is a race: the init op's flag
    # assignment once ran before the read deciding whether to keep the centers (on a GPU
    # machine every point then ended in one cluster).
    with tf.Graph().as_default() as graph:
        x = tf.placeholder(tf.float32, [None, 3])
        kmeans = factorization.KMeans(x, 3, initial_clusters="kmeans_plus_plus",
                                      use_mini_batch=mini_batch)
        _, _, _, _, init_op, train_op = kmeans.training_graph()
    for step in (init_op, train_op):
        ops = _upstream(step)
        writes = [op for op in ops if op.type == "assign"]
        assert writes
        for write in writes:
            reads = [op for op in ops if op.type == "variable"
                     and op.name == write.attrs["variable"]]
            before = _upstream(write)
            assert all(read in before for read in reads), (step.name, write.name)


def _numpy_distances(x, c, metric):
    if metric == "manhattan":
        return np.abs(x[:, None] - c[None]).sum(-1)
    if metric == "cosine":
        xn = x / np.linalg.norm(x, axis=1, keepdims=True)
        cn = c / np.linalg.norm(c, axis=1, keepdims=True)
        return 1.0 - xn @ cn.T
    return ((x[:, None] - c[None]) ** 2).sum(-1)


@pytest.mark.parametrize("metric", ["squared_euclidean", "cosine", "manhattan"])
@pytest.mark.parametrize("mini_batch", [False, True])
def test_one_step_is_numpys(metric, mini_batch):
    x = rng.standard_normal((40, 5))
    start = rng.standard_normal((3, 5))
    if metric == "cosine":  # the centers are kept normalised
        start /= np.linalg.norm(start, axis=1, keepdims=True)
    with tf.Graph().as_default():
        kmeans = factorization.KMeans(tf.constant(x), 3, initial_clusters=start,
                                      distance_metric=metric, use_mini_batch=mini_batch)
        (scores_all,), (idx,), (scores,), _, init_op, train_op = kmeans.training_graph()
        centers = [v for v in tf.global_variables() if v.name.startswith("kmeans/clusters")][0]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(init_op)
            got_all, got_idx, got_scores = sess.run([scores_all, idx, scores])
            sess.run(train_op)
            moved = sess.run(centers)
    want = _numpy_distances(x, start, metric)
    np.testing.assert_allclose(got_all, want, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(got_idx, want.argmin(1))
    np.testing.assert_allclose(got_scores, want.min(1), rtol=1e-9, atol=1e-9)
    data = x / np.linalg.norm(x, axis=1, keepdims=True) if metric == "cosine" else x
    hot = np.eye(3)[want.argmin(1)]
    sums, counts = hot.T @ data, hot.sum(0)
    if mini_batch:  # from zero points seen: each center is its points' mean (or unchanged)
        expect = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], start)
    else:
        expect = sums / (counts + 1e-6)[:, None]
    if metric == "cosine":
        expect /= np.linalg.norm(expect, axis=1, keepdims=True)
    np.testing.assert_allclose(moved, expect, rtol=1e-9, atol=1e-9)


def test_bad_arguments_are_refused_naming_kmeans_and_the_argument():
    x = tf.placeholder(tf.float32, [None, 3])
    cases = [
        (dict(distance_metric="euclid"), "distance_metric must be one of squared_euclidean"),
        (dict(initial_clusters="kmc2"), "initial_clusters='kmc2' is not supported"),
        (dict(use_mini_batch=True, mini_batch_steps_per_iteration=5),
         "mini_batch_steps_per_iteration=1 only"),
        (dict(initial_clusters="first"), "initial_clusters 'first' is not one of"),
    ]
    for kwargs, message in cases:
        with pytest.raises(OpsdkError, match=f"contrib.factorization.KMeans: .*{message}"):
            factorization.KMeans(x, 2, **kwargs).training_graph()
    with pytest.raises(OpsdkError, match="KMeans: 3 input rows cannot give 4 initial clusters"):
        factorization.KMeans(tf.zeros([3, 2]), 4).training_graph()
    with pytest.raises(OpsdkError, match="num_clusters must be an int"):
        factorization.KMeans(x, tf.constant(2))
    with pytest.raises(OpsdkError, match=r"inputs must be \[n, d\] with d known"):
        factorization.KMeans(tf.placeholder(tf.float32, [None, None]), 2)
    with pytest.raises(OpsdkError, match="tf.contrib.factorization.GMM is not provided"):
        factorization.GMM  # noqa: B018
