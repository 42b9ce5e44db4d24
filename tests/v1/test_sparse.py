"""TF1's sparse tensors in opsdk.v1 (opsdk/v1/sparse.py): SparseTensor and its fetched value,
sparse placeholders (strings too), and the ops over them, against NumPy computations of what TF1
gives (the same calls gave these values under TensorFlow's compat.v1)."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

from finite_differences import numeric_grad

INDICES = [[0, 1], [1, 0], [2, 2]]
VALUES = [1.5, -2.0, 3.0]
DENSE = np.array([[0, 1.5, 0, 0], [-2.0, 0, 0, 0], [0, 0, 3.0, 0]], np.float32)


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def sparse():
    return tf.SparseTensor(INDICES, VALUES, [3, 4])


def test_a_sparse_tensor_is_fetched_as_a_sparse_tensor_value():
    sp = sparse()
    assert sp.get_shape().as_list() == [3, 4] and sp.dtype == tf.float32
    assert sp.indices.dtype == tf.int64 and sp.dense_shape.dtype == tf.int64
    with tf.Session() as sess:
        value, [nested] = sess.run([sp, [sp]])
        evaluated = sp.eval()
    for got in (value, nested, evaluated):
        assert isinstance(got, tf.SparseTensorValue)
        np.testing.assert_array_equal(got.indices, INDICES)
        np.testing.assert_array_equal(got.values, np.float32(VALUES))
        np.testing.assert_array_equal(got.dense_shape, [3, 4])


def test_to_dense_with_and_without_a_default():
    sp = sparse()
    with tf.Session() as sess:
        plain, filled, alias = sess.run([tf.sparse_tensor_to_dense(sp),
                                         tf.sparse.to_dense(sp, default_value=7.0),
                                         tf.sparse_to_dense([1, 3], [5], 2.0, default_value=-1.0)])
    np.testing.assert_array_equal(plain, DENSE)
    np.testing.assert_array_equal(filled, np.where(DENSE != 0, DENSE, 7.0))
    np.testing.assert_array_equal(alias, [-1, 2, -1, 2, -1])


def test_a_sparse_placeholder_of_strings_feeds_edit_distance():
    # the layout of a public TF1 program matching addresses: one word per row, a character per
    # entry in the last coordinate, the shape's last size not covering it (TF does not read it)
    def words(texts):
        indices = [[i, 0, j] for i, text in enumerate(texts) for j in range(len(text))]
        return tf.SparseTensorValue(indices, list("".join(texts)), [len(texts), 1, 1])
    hyp, truth = tf.sparse_placeholder(tf.string), tf.sparse_placeholder(dtype=tf.string)
    distance = tf.edit_distance(hyp, truth, normalize=True)
    with tf.Session() as sess:
        got = sess.run(distance, {hyp: words(["bear"] * 3), truth: words(["beers", "bear", "b"])})
        echoed = sess.run(hyp, {hyp: ([[0, 0]], ["é"], [1, 1])})
    np.testing.assert_allclose(got, [[0.4], [0.0], [3.0]])
    assert echoed.values.tolist() == ["é".encode()]


def test_edit_distance_of_string_constants_matches_tf():
    # the cookbook's text-distance program, whose printed values TF1 gives as these
    h = tf.SparseTensor([[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 3]], list("bear"), [1, 1, 1])
    t = tf.SparseTensor([[0, 0, 0], [0, 0, 1], [0, 0, 1], [0, 0, 3], [0, 0, 4]], list("beers"),
                        [1, 1, 1])
    with tf.Session() as sess:
        raw, normalized = sess.run([tf.edit_distance(h, t, normalize=False), tf.edit_distance(h, t)])
        strings = sess.run(tf.SparseTensor([[0, 0], [1, 1]], ["ab", "c"], [2, 2]))
        dense = sess.run(tf.sparse.to_dense(tf.SparseTensor([[0, 0], [1, 1]], ["ab", "c"], [2, 2])))
    np.testing.assert_array_equal(raw, [[2.0]])
    np.testing.assert_allclose(normalized, [[0.4]])
    assert strings.values.tolist() == [b"ab", b"c"]
    assert dense.tolist() == [[b"ab", b""], [b"", b"c"]]


def test_edit_distance_refuses_strings_against_numbers():
    with pytest.raises(OpsdkError, match="one holds strings"):
        tf.edit_distance(tf.SparseTensor([[0, 0]], ["a"], [1, 1]),
                         tf.SparseTensor([[0, 0]], [1], [1, 1]))


def test_sparse_dense_matmul_values_adjoints_and_gradients():
    sp = sparse()
    b = np.arange(12, dtype=np.float64).reshape(4, 3)
    values = tf.placeholder(tf.float64, [3])
    dense_b = tf.placeholder(tf.float64, [4, 3])
    product = tf.sparse_tensor_dense_matmul(tf.SparseTensor(INDICES, values, [3, 4]), dense_b)
    adjoint_a = tf.sparse_tensor_dense_matmul(sp, tf.ones([3, 2]), adjoint_a=True)
    adjoint_b = tf.sparse.sparse_dense_matmul(sp, tf.constant(b.T.astype(np.float32)),
                                              adjoint_b=True)
    loss = tf.reduce_sum(product ** 2)
    grads = tf.gradients(loss, [values, dense_b])
    feeds = {values: np.array(VALUES), dense_b: b}
    with tf.Session() as sess:
        got, got_a, got_b, got_grads = sess.run([product, adjoint_a, adjoint_b, grads], feeds)
        for x, grad in zip((values, dense_b), got_grads):
            np.testing.assert_allclose(grad, numeric_grad(sess, loss, x, feeds), rtol=1e-6)
    np.testing.assert_allclose(got, DENSE @ b)
    np.testing.assert_allclose(got_a, DENSE.T @ np.ones((3, 2)))
    np.testing.assert_allclose(got_b, DENSE @ b)
    assert product.get_shape().as_list() == [3, 3]


def test_add_reduce_retain_softmax_and_from_dense():
    sp = sparse()
    with tf.Session() as sess:
        with_dense = sess.run(tf.sparse_add(sp, tf.ones([3, 4])))
        doubled = sess.run(tf.sparse_add(sp, sp))
        total, rows, kept = sess.run([tf.sparse_reduce_sum(sp), tf.sparse_reduce_sum(sp, 1),
                                      tf.sparse_reduce_sum(sp, axis=0, keepdims=True)])
        retained = sess.run(tf.sparse_retain(sp, [True, False, True]))
        soft = sess.run(tf.sparse_softmax(tf.SparseTensor([[0, 0], [0, 2], [1, 1]],
                                                          [1.0, 2.0, 3.0], [2, 3])))
        found = sess.run(tf.sparse.from_dense(tf.constant([[0, 3], [4, 0]])))
    np.testing.assert_array_equal(with_dense, DENSE + 1)
    np.testing.assert_array_equal(doubled.indices, INDICES)
    np.testing.assert_array_equal(doubled.values, 2 * np.float32(VALUES))
    assert total == np.float32(2.5)
    np.testing.assert_array_equal(rows, DENSE.sum(1))
    np.testing.assert_array_equal(kept, DENSE.sum(0, keepdims=True))
    np.testing.assert_array_equal(retained.indices, [[0, 1], [2, 2]])
    np.testing.assert_array_equal(retained.values, [1.5, 3.0])
    e = np.exp([1.0, 2.0])
    np.testing.assert_allclose(soft.values, [e[0] / e.sum(), e[1] / e.sum(), 1.0], rtol=1e-6)
    np.testing.assert_array_equal(found.indices, [[0, 1], [1, 0]])
    np.testing.assert_array_equal(found.values, [3, 4])
    np.testing.assert_array_equal(found.dense_shape, [2, 2])


def test_sparse_segment_reductions():
    data = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    with tf.Session() as sess:
        summed, mean, sqrt_n = sess.run([
            tf.sparse_segment_sum(data, [0, 2, 1], [0, 0, 1]),
            tf.sparse_segment_mean(data, [0, 2, 1], [0, 0, 1]),
            tf.sparse.segment_sqrt_n(data, [0, 2, 1], [0, 0, 2])])
    np.testing.assert_array_equal(summed, [data[0] + data[2], data[1]])
    np.testing.assert_array_equal(mean, [(data[0] + data[2]) / 2, data[1]])
    np.testing.assert_allclose(sqrt_n, [(data[0] + data[2]) / np.sqrt(2), [0, 0], data[1]],
                               rtol=1e-6)


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("weighted", [False, True])
def test_embedding_lookup_sparse(combiner, weighted):
    table = np.arange(10, dtype=np.float32).reshape(5, 2)
    rows = {0: [(1, 1.0), (3, 2.0)], 2: [(4, 0.5)]}  # row 1 has no ids: zeros, as in TF
    ids = tf.SparseTensor([[0, 0], [0, 1], [2, 0]], tf.constant([1, 3, 4], tf.int64), [3, 2])
    weights = tf.SparseTensor([[0, 0], [0, 1], [2, 0]], [1.0, 2.0, 0.5], [3, 2])
    out = tf.nn.embedding_lookup_sparse(tf.constant(table), ids, weights if weighted else None,
                                        combiner=combiner)
    with tf.Session() as sess:
        got = sess.run(out)
    want = np.zeros((3, 2), np.float32)
    for r, entries in rows.items():
        w = np.array([e[1] if weighted else 1.0 for e in entries])
        total = sum(wi * table[i] for (i, _), wi in zip(entries, w))
        norm = {"sum": 1.0, "mean": w.sum(), "sqrtn": np.sqrt((w * w).sum())}[combiner]
        want[r] = total / norm
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_feeds_and_errors_name_what_is_wrong():
    sp = tf.sparse_placeholder(tf.float32, shape=[None, 3])
    dense = tf.sparse_tensor_to_dense(sp)
    with tf.Session() as sess:
        got = sess.run(dense, {sp: ([[0, 2]], [5.0], [1, 3])})
        np.testing.assert_array_equal(got, [[0, 0, 5]])
        with pytest.raises(OpsdkError, match=r"indices\[0\] = \[4, 0\] does not index into "
                                             r"shape \[1, 3\]"):
            sess.run(dense, {sp: ([[4, 0]], [5.0], [1, 3])})
        with pytest.raises(OpsdkError, match="SparseTensorValue or an .indices, values, "
                                             "dense_shape. tuple"):
            sess.run(dense, {sp: [[0, 2]]})
    with pytest.raises(OpsdkError, match="indices have 3 coordinates per entry; dense_shape has "
                                         "rank 2"):
        tf.SparseTensor([[0, 0, 0]], [1.0], [2, 2])
    with pytest.raises(OpsdkError, match="give a SparseTensor"):
        tf.sparse_tensor_to_dense(tf.constant([1.0]))


def test_scatter_nd_and_tensor_scatter_updates():
    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    base = tf.placeholder(tf.float64, [4, 3])
    rows = tf.placeholder(tf.float64, [1, 3])
    replaced = tf.tensor_scatter_nd_update(base, [[1]], rows)
    loss = tf.reduce_sum(replaced * tf.constant(x))
    grads = tf.gradients(loss, [base, rows])
    feeds = {base: x, rows: np.array([[1.0, 2.0, 3.0]])}
    with tf.Session() as sess:
        scattered = sess.run(tf.scatter_nd([[1], [3], [1]], [[1., 2, 3], [4, 5, 6], [1, 1, 1]],
                                           [4, 3]))
        run_time = sess.run(tf.scatter_nd(tf.constant([[0, 1]]), [9.0], tf.constant([2, 2])))
        added, subtracted, updated, got = sess.run([
            tf.tensor_scatter_nd_add(x, [[0], [2]], [[1., 1, 1], [2, 2, 2]]),
            tf.tensor_scatter_nd_sub(x, [[0, 1]], [5.0]),
            tf.tensor_scatter_nd_update(x, [[0, 1], [3, 2]], [-1.0, -2.0]), replaced], feeds)
        grad_base, grad_rows = sess.run(grads, feeds)
        for p, g in zip((base, rows), (grad_base, grad_rows)):
            np.testing.assert_allclose(g, numeric_grad(sess, loss, p, feeds), rtol=1e-6)
    np.testing.assert_array_equal(scattered, [[0, 0, 0], [2, 3, 4], [0, 0, 0], [4, 5, 6]])
    np.testing.assert_array_equal(run_time, [[0, 9], [0, 0]])
    want = x.copy()
    want[0] += 1
    want[2] += 2
    np.testing.assert_array_equal(added, want)
    want = x.copy()
    want[0, 1] -= 5
    np.testing.assert_array_equal(subtracted, want)
    want = x.copy()
    want[0, 1], want[3, 2] = -1, -2
    np.testing.assert_array_equal(updated, want)
    want = x.copy()
    want[1] = [1, 2, 3]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(grad_base[1], [0, 0, 0])  # replaced: no gradient reaches it


def test_reorder_transpose_reshape_and_concat():
    sp = tf.SparseTensor([[1, 2], [0, 3], [1, 0]], [1.0, 2.0, 3.0], [2, 4])
    values = tf.placeholder(tf.float64, [3])
    weighted = tf.reduce_sum(tf.sparse_reorder(tf.SparseTensor(
        [[1, 2], [0, 3], [1, 0]], values, [2, 4])).values * tf.constant([1.0, 10.0, 100.0],
                                                                         tf.float64))
    grad, = tf.gradients(weighted, [values])
    with tf.Session() as sess:
        got = sess.run([tf.sparse_reorder(sp), tf.sparse_transpose(sp),
                        tf.sparse_reshape(sp, [4, 2]), tf.sparse_reshape(sp, [-1]),
                        tf.sparse_concat(0, [sp, tf.SparseTensor([[0, 0]], [9.0], [1, 4])]),
                        tf.sparse_concat(1, [sp, tf.SparseTensor([[0, 1]], [5.0], [2, 2])])])
        g = sess.run(grad, {values: [1.0, 2.0, 3.0]})
        with pytest.raises(OpsdkError, match="sizes outside axis 0 differ"):
            sess.run(tf.sparse_concat(0, [sp, tf.SparseTensor([[0, 0]], [1.0], [1, 3])]))
    dense = np.zeros((2, 4))
    dense[1, 2], dense[0, 3], dense[1, 0] = 1, 2, 3
    wanted = [dense, dense.T, dense.reshape(4, 2), dense.reshape(-1),
              np.concatenate([dense, [[9, 0, 0, 0]]]),
              np.concatenate([dense, [[0, 5], [0, 0]]], axis=1)]
    for k, (value, want) in enumerate(zip(got, wanted)):
        rebuilt = np.zeros(value.dense_shape)
        rebuilt[tuple(value.indices.T)] = value.values
        np.testing.assert_array_equal(rebuilt, want)
        if k not in (2, 3):  # reshape keeps the entries' order, as TF's
            order = np.ravel_multi_index(tuple(value.indices.T), tuple(value.dense_shape))
            assert (np.diff(order) > 0).all()  # row-major
    assert g.tolist() == [100.0, 1.0, 10.0]  # each value's gradient where it went


def test_reduce_max_and_slice():
    sp = tf.SparseTensor([[0, 1], [1, 0], [1, 2]], [-1.0, -2.0, 3.0], [3, 4])
    with tf.Session() as sess:
        total, rows, cols = sess.run([tf.sparse_reduce_max(sp), tf.sparse_reduce_max(sp, 1),
                                      tf.sparse_reduce_max(sp, 0, keepdims=True)])
        part = sess.run(tf.sparse_slice(sp, [1, 0], [2, 2]))
        corner = sess.run(tf.sparse.slice(sp, [2, 3], [5, 5]))
    # only the entries take part; a row or column without entries gives 0, as TF's
    assert total == 3.0 and rows.tolist() == [-1.0, 3.0, 0.0]
    assert cols.tolist() == [[-2.0, -1.0, 3.0, 0.0]]
    assert part.indices.tolist() == [[0, 0]] and part.values.tolist() == [-2.0]
    assert part.dense_shape.tolist() == [2, 2]
    assert corner.indices.shape == (0, 2) and corner.dense_shape.tolist() == [1, 1]
