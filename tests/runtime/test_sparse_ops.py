"""The sparse tensors' builtin ops (opdefs/builtin/sparse.yaml): scatter_nd against a NumPy
scatter-add, its gradient against central differences on hypothesis-drawn shapes, coordinates
and updates (the declaration's checker cannot draw consistent ones), and edit_distance against a
plain Levenshtein recursion."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import opsdk
from opsdk import ops
from opsdk.registry.errors import OpsdkError

from finite_differences import numeric_grad


def scatter_reference(indices, updates, dims):
    y = np.zeros(dims, dtype=updates.dtype)
    k = indices.shape[-1]
    for coordinate, update in zip(indices.reshape(-1, k), updates.reshape((-1,) + tuple(dims[k:]))):
        y[tuple(coordinate)] += update
    return y


@st.composite
def scatters(draw):
    """A shape of rank 1-3, k coordinates per update (1..rank), 0-6 updates of any shape of
    leading dims, coordinates within the shape (repeats likely)."""
    rank = draw(st.integers(1, 3))
    dims = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    k = draw(st.integers(1, rank))
    lead = tuple(draw(st.lists(st.integers(0, 3), min_size=1, max_size=2)))
    count = int(np.prod(lead))
    coords = [[draw(st.integers(0, d - 1)) for d in dims[:k]] for _ in range(count)]
    indices = np.asarray(coords, dtype=np.int64).reshape(lead + (k,))
    seed = draw(st.integers(0, 2**31 - 1))
    updates = np.random.default_rng(seed).uniform(-2, 2, lead + dims[k:])
    return indices, updates, dims


def _graph(indices, updates, dims, index_dtype="int64"):
    g = opsdk.Graph()
    with g.as_default():
        i = opsdk.placeholder(index_dtype, [None] * indices.ndim, name="indices")
        u = opsdk.placeholder("float64", [None] * updates.ndim, name="updates")
        d = opsdk.placeholder(index_dtype, [len(dims)], name="dims")
        y = ops.scatter_nd(i, u, d)
    return g, i, u, d, y


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scatters(), st.sampled_from(["int32", "int64"]))
def test_scatter_nd_adds_updates_at_their_coordinates(case, index_dtype):
    indices, updates, dims = case
    g, i, u, d, y = _graph(indices, updates, dims, index_dtype)
    with opsdk.Session(g) as sess:
        got = sess.run(y, {i: indices.astype(index_dtype), u: updates,
                           d: np.asarray(dims, index_dtype)})
    np.testing.assert_allclose(got, scatter_reference(indices, updates, dims), rtol=1e-12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scatters())
def test_scatter_nd_gradient_matches_central_differences(case):
    indices, updates, dims = case
    g, i, u, d, y = _graph(indices, updates, dims)
    with g.as_default():
        w = opsdk.constant(np.random.default_rng(3).uniform(0.5, 1.5, dims))
        loss = ops.reduce_sum(ops.mul(ops.mul(y, y), w))
        grad, = opsdk.gradients(loss, [u])
    feeds = {i: indices, u: updates, d: np.asarray(dims, np.int64)}
    with opsdk.Session(g) as sess:
        got = sess.run(grad, feeds)
        np.testing.assert_allclose(got, numeric_grad(sess, loss, u, feeds), rtol=1e-6, atol=1e-7)


def test_scatter_nd_declared_sizes_are_static_and_checked():
    g = opsdk.Graph()
    with g.as_default():
        d = opsdk.placeholder("int64", [2])
        y = ops.scatter_nd(opsdk.constant(np.array([[0]], np.int64)),
                           opsdk.constant(np.ones((1, 3))), d, shape=[-1, 3])
    assert y.shape == (None, 3)
    with opsdk.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(y, {d: [2, 3]}), [[1, 1, 1], [0, 0, 0]])
        with pytest.raises(OpsdkError, match=r"'dims' \[2, 4\] does not have the sizes "
                                             r"declared .* \[-1, 3\]"):
            sess.run(y, {d: [2, 4]})


@pytest.mark.parametrize("indices, message", [
    ([[3]], r"indices\[0\] = \[3\] does not index into shape \[3, 2\]"),
    ([[0], [-1]], r"indices\[1\] = \[-1\] does not index into shape \[3, 2\]"),
])
def test_scatter_nd_refuses_coordinates_outside_the_shape(indices, message):
    indices = np.asarray(indices, np.int64)
    g, i, u, d, y = _graph(indices, np.ones((len(indices), 2)), (3, 2))
    with opsdk.Session(g) as sess, pytest.raises(OpsdkError, match=r"scatter_nd .*" + message):
        sess.run(y, {i: indices, u: np.ones((len(indices), 2)), d: [3, 2]})


def test_scatter_nd_refuses_mismatched_updates_when_the_graph_is_built():
    with opsdk.Graph().as_default(), pytest.raises(OpsdkError, match="updates has shape"):
        ops.scatter_nd(opsdk.constant(np.zeros((2, 1), np.int64)), opsdk.constant(np.ones((3,))),
                       opsdk.constant(np.array([4], np.int64)), shape=[4])


# ---- edit_distance ------------------------------------------------------------------------

def levenshtein(a, b):
    @functools.lru_cache(maxsize=None)
    def d(i, j):
        if i == 0 or j == 0:
            return i + j
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))
    return d(len(a), len(b))


def as_sparse(sequences):
    """Sequences laid out [batch, position] as a sparse tensor's indices and values (the rank
    2 layout TF1 programs use)."""
    indices = [[b, t] for b, seq in enumerate(sequences) for t in range(len(seq))]
    values = [v for seq in sequences for v in seq]
    longest = max((len(s) for s in sequences), default=0)
    return (np.asarray(indices, np.int64).reshape(-1, 2), np.asarray(values, np.int32),
            np.asarray([len(sequences), longest], np.int64))


def edit_distance(h, t, normalize):
    g = opsdk.Graph()
    with g.as_default():
        out = ops.edit_distance(*(opsdk.constant(a) for a in (*h, *t)), normalize=normalize)
    with opsdk.Session(g) as sess:
        return sess.run(out)


sequences = st.lists(st.lists(st.integers(0, 3), max_size=6), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequences, sequences, st.booleans())
def test_edit_distance_is_levenshtein(hyps, truths, normalize):
    got = edit_distance(as_sparse(hyps), as_sparse(truths), normalize)
    assert got.dtype == np.float32 and got.shape == (max(len(hyps), len(truths)),)
    for b in range(got.shape[0]):
        a = hyps[b] if b < len(hyps) else []
        t = truths[b] if b < len(truths) else []
        want = float(levenshtein(tuple(a), tuple(t)))
        if normalize:
            want = want / len(t) if t else (np.inf if a else 0.0)
        assert got[b] == np.float32(want), (b, a, t)


def test_edit_distance_compares_rows_padded_with_zeros():
    # strings as opsdk.v1 keeps them: one zero-padded row of bytes per entry, widths differing
    h = (np.array([[0, 0], [0, 1]], np.int64), np.array([[97, 98], [99, 0]], np.uint8),
         np.array([1, 2], np.int64))
    t = (np.array([[0, 0], [0, 1]], np.int64), np.array([[97, 98, 0], [100, 0, 0]], np.uint8),
         np.array([1, 2], np.int64))
    np.testing.assert_array_equal(edit_distance(h, t, False), [1.0])


def test_edit_distance_reads_sequences_in_the_order_given():
    # TF's kernel takes the entries as listed (it does not sort them), and so does this one
    h = (np.array([[0, 1], [0, 0]], np.int64), np.array([2, 1]), np.array([1, 2], np.int64))
    t = (np.array([[0, 0], [0, 1]], np.int64), np.array([1, 2]), np.array([1, 2], np.int64))
    np.testing.assert_array_equal(edit_distance(h, t, True), [1.0])


def test_edit_distance_refuses_a_leading_coordinate_outside_the_shape():
    h = (np.array([[2, 0]], np.int64), np.array([1]), np.array([2, 1], np.int64))
    t = (np.array([[0, 0]], np.int64), np.array([1]), np.array([2, 1], np.int64))
    with pytest.raises(OpsdkError, match=r"hypothesis_indices\[0\] = \[2, 0\] is outside"):
        edit_distance(h, t, True)


def test_edit_distance_refuses_sparse_tensors_of_different_ranks():
    h = (np.array([[0, 0]], np.int64), np.array([1]), np.array([1, 1], np.int64))
    t = (np.array([[0, 0, 0]], np.int64), np.array([1]), np.array([1, 1, 1], np.int64))
    with pytest.raises(OpsdkError, match="truth_shape"):
        edit_distance(h, t, True)
