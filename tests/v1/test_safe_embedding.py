"""tf.sparse.fill_empty_rows and tf.nn.safe_embedding_lookup_sparse in opsdk.v1 (v1/sparse.py),
over a partitioned table: invalid ids and non-positive weights dropped, empty rows zeros or the
default id's embedding, ids of rank 3, "div" and "mod". The expected values are those
TensorFlow 2.21's compat.v1 printed for the same program."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_fill_empty_rows_adds_the_default_at_each_empty_row():
    sp = tf.SparseTensor([[0, 1], [2, 0], [2, 2], [4, 1]], tf.constant([1.0, 2.0, 3.0, 4.0]),
                         [5, 3])
    filled, empty = tf.sparse.fill_empty_rows(sp, -1.0)
    ints, empty2 = tf.sparse_fill_empty_rows(
        tf.SparseTensor([[1, 0]], tf.constant([7], tf.int64), [3, 2]), 9)
    default = tf.constant(-1.0)
    grad = tf.gradients(tf.reduce_sum(tf.sparse.fill_empty_rows(sp, default)[0].values * 2.0),
                        [default])[0]
    with tf.Session() as s:
        got = s.run(filled)
        assert got.indices.tolist() == [[0, 1], [1, 0], [2, 0], [2, 2], [3, 0], [4, 1]]
        assert got.values.tolist() == [1.0, -1.0, 2.0, 3.0, -1.0, 4.0]
        assert got.dense_shape.tolist() == [5, 3]
        assert s.run(empty).tolist() == [False, True, False, True, False]
        got = s.run(ints)
        assert got.indices.tolist() == [[0, 0], [1, 0], [2, 0]] and got.values.tolist() == [9, 7, 9]
        assert s.run(empty2).tolist() == [True, False, True]
        assert s.run(grad) == 4.0  # two rows filled, each value's gradient 2


def test_safe_lookups_give_tensorflows_rows():
    emb = tf.get_variable("emb", [10, 2], initializer=tf.zeros_initializer(),
                          partitioner=tf.fixed_size_partitioner(3))
    where = [[0, 0], [0, 1], [1, 0], [3, 0], [3, 1], [3, 2]]
    ids = tf.SparseTensor(where, tf.constant([1, -1, 7, 2, 9, 4], tf.int64), [5, 3])
    w = tf.SparseTensor(where, tf.constant([1.0, 2.0, 0.5, 1.0, 0.0, 2.0]), [5, 3])
    a = tf.nn.safe_embedding_lookup_sparse(emb, ids)
    b = tf.nn.safe_embedding_lookup_sparse(emb, ids, w, combiner="sum")
    c = tf.nn.safe_embedding_lookup_sparse(list(emb), ids, w, combiner="sqrtn", default_id=0)
    d = tf.nn.safe_embedding_lookup_sparse(emb, ids, partition_strategy="mod")
    ids3 = tf.SparseTensor([[0, 0, 0], [0, 1, 1], [1, 1, 0]], tf.constant([3, 4, 5], tf.int64),
                           [2, 2, 2])
    e = tf.nn.safe_embedding_lookup_sparse(emb, ids3)
    grads = tf.gradients(tf.reduce_sum(b * b), list(emb))
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run([v.assign(tf.reshape(tf.range(float(v.get_shape().num_elements())),
                                   v.get_shape()) + 100.0 * k) for k, v in enumerate(emb)])
        check = lambda t, want: np.testing.assert_allclose(s.run(t), want, rtol=1e-6)  # noqa: E731
        check(a, [[2, 3], [200, 201], [0, 0], [102.66667, 103.66667], [0, 0]])
        check(b, [[2, 3], [100, 100.5], [0, 0], [204, 207], [0, 0]])
        check(c, [[2, 3], [200, 201], [0, 1], [91.23158, 92.57321], [0, 1]])
        check(d, [[100, 101], [104, 105], [0, 0], [102.66667, 103.66667], [0, 0]])
        check(e, [[[6, 7], [100, 101]], [[0, 0], [102, 103]]])
        got = s.run(grads)
        np.testing.assert_allclose(got[0], [[0, 0], [4, 6], [408, 414], [0, 0]])
        np.testing.assert_allclose(got[1], [[816, 828], [0, 0], [0, 0]])
        np.testing.assert_allclose(got[2], [[100, 100.5], [0, 0], [0, 0]])
