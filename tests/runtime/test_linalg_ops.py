"""The builtin linear-algebra ops (opdefs/builtin/linalg.yaml) and segment sums
(opdefs/builtin/segment.yaml) through graphs and Session.run: values against NumPy on batched
float32 and float64 inputs, gradients from `opsdk.gradients` against central finite differences
(float64) on inputs larger or better chosen than gradcheck's (Cholesky factors of x = a a^T + n I,
triangles with garbage in the half that is not read), and the errors for inputs the ops refuse."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk
from opsdk import ops
from opsdk.registry.errors import OpsdkError

from finite_differences import numeric_grad

DTYPES = (np.float32, np.float64)
BATCHES = [(), (3,), (2, 3)]
TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _t(a):
    return np.swapaxes(a, -1, -2)


def well_conditioned(rng, batch, n):
    """Random matrices with n on the diagonal added: far from singular."""
    return rng.uniform(-1, 1, batch + (n, n)) + n * np.eye(n)


def spd(rng, batch, n):
    """x = a a^T + n I: symmetric positive definite, well-conditioned."""
    a = rng.normal(size=batch + (n, n))
    return a @ _t(a) + n * np.eye(n)


def triangle_with_garbage(rng, batch, n, lower):
    """A well-conditioned triangle (diagonal in [1, 2]); the other triangle holds large random
    values the op must not read."""
    t = rng.uniform(-1, 1, batch + (n, n))
    idx = np.arange(n)
    t[..., idx, idx] = rng.uniform(1, 2, batch + (n,))
    garbage = rng.uniform(-50, 50, batch + (n, n))
    keep = np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool))
    return np.where(keep, t, garbage)


def run_graph(build, *values, dtype=np.float64, unknown=False):
    """Builds `build(*placeholders)` over placeholders fed `values` (all dims unknown when
    `unknown`), runs it and returns the results with the outputs' static shapes."""
    g = opsdk.Graph()
    with g.as_default():
        phs = [opsdk.placeholder(np.dtype(dtype).name if v.dtype.kind == "f" else v.dtype.name,
                                 [None] * v.ndim if unknown else list(v.shape), name=f"in{k}")
               for k, v in enumerate(values)]
        out = build(*phs)
    outs = out if isinstance(out, (list, tuple)) else [out]
    with opsdk.Session(g) as sess:
        got = sess.run(list(outs), {p: (v.astype(dtype) if v.dtype.kind == "f" else v)
                                    for p, v in zip(phs, values)})
    return got, [o.shape for o in outs]


def check_gradients(build, values, wrt=None, rtol=1e-6, atol=1e-8):
    """opsdk.gradients of sum(build(...) * w), a fixed random weighting, against central
    differences (float64), for each input of `wrt` (default: all)."""
    rng = np.random.default_rng(7)
    g = opsdk.Graph()
    with g.as_default():
        phs = [opsdk.placeholder("float64" if v.dtype.kind == "f" else v.dtype.name,
                                 list(v.shape), name=f"in{k}") for k, v in enumerate(values)]
        y = build(*phs)
        w = opsdk.constant(rng.uniform(0.5, 1.5, size=tuple(y.shape)))
        loss = ops.reduce_sum(y * w)
        xs = [phs[k] for k in (range(len(values)) if wrt is None else wrt)]
        grads = opsdk.gradients(loss, xs)
    feeds = dict(zip(phs, values))
    with opsdk.Session(g) as sess:
        got = sess.run(grads, feeds)
        for x, grad in zip(xs, got):
            assert grad.shape == feeds[x].shape and grad.dtype == np.float64
            np.testing.assert_allclose(grad, numeric_grad(sess, loss, x, feeds), rtol=rtol,
                                       atol=atol)
    return got


# ---- values against NumPy ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("adjoint", [False, True])
def test_matrix_inverse_matches_numpy(dtype, batch, adjoint):
    x = well_conditioned(np.random.default_rng(1), batch, 4)
    (got,), (shape,) = run_graph(lambda a: ops.matrix_inverse(a, adjoint=adjoint), x, dtype=dtype)
    want = np.linalg.inv(_t(x) if adjoint else x)
    assert got.dtype == dtype and got.shape == want.shape and tuple(shape) == want.shape
    np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_matrix_determinant_matches_numpy(dtype, batch):
    x = well_conditioned(np.random.default_rng(2), batch, 3)
    (got,), (shape,) = run_graph(ops.matrix_determinant, x, dtype=dtype)
    want = np.linalg.det(x)
    assert got.dtype == dtype and got.shape == batch and tuple(shape) == batch
    np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_cholesky_matches_numpy(dtype, batch):
    x = spd(np.random.default_rng(3), batch, 4)
    (got,), _ = run_graph(ops.cholesky, x, dtype=dtype)
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_allclose(got, np.linalg.cholesky(x), **TOL[dtype])
    assert not np.any(np.triu(got, 1))  # lower-triangular
    np.testing.assert_allclose(got @ _t(got), x, rtol=10 * TOL[dtype]["rtol"], atol=1e-4)


def test_cholesky_reads_the_symmetric_part():
    rng = np.random.default_rng(4)
    x = spd(rng, (2,), 3)
    skew = rng.normal(size=(2, 3, 3))
    skew = skew - _t(skew)  # x + skew has x as its symmetric part
    (got,), _ = run_graph(ops.cholesky, x + skew)
    np.testing.assert_allclose(got, np.linalg.cholesky(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("adjoint", [False, True])
def test_matrix_solve_matches_numpy(dtype, batch, adjoint):
    rng = np.random.default_rng(5)
    a, b = well_conditioned(rng, batch, 4), rng.normal(size=batch + (4, 2))
    (got,), (shape,) = run_graph(lambda m, r: ops.matrix_solve(m, r, adjoint=adjoint), a, b,
                                 dtype=dtype)
    want = np.linalg.solve(_t(a) if adjoint else a, b)
    assert got.dtype == dtype and got.shape == want.shape and tuple(shape) == want.shape
    np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_matrix_triangular_solve_reads_only_its_triangle(dtype, batch, lower, adjoint):
    rng = np.random.default_rng(6)
    m, b = triangle_with_garbage(rng, batch, 4, lower), rng.normal(size=batch + (4, 3))
    (got,), _ = run_graph(lambda a, r: ops.matrix_triangular_solve(a, r, lower=lower,
                                                                   adjoint=adjoint), m, b,
                          dtype=dtype)
    t = np.tril(m) if lower else np.triu(m)
    want = np.linalg.solve(_t(t) if adjoint else t, b)
    assert got.dtype == dtype and got.shape == b.shape
    np.testing.assert_allclose(got, want, **TOL[dtype])
    # NaN where the op does not read changes nothing
    nan = np.where(np.tril(np.ones((4, 4), bool)) if lower else np.triu(np.ones((4, 4), bool)),
                   m, np.nan)
    (again,), _ = run_graph(lambda a, r: ops.matrix_triangular_solve(a, r, lower=lower,
                                                                     adjoint=adjoint), nan, b,
                            dtype=dtype)
    np.testing.assert_array_equal(again, got)


def test_unknown_dims_at_graph_time_are_known_at_run_time():
    rng = np.random.default_rng(8)
    x = well_conditioned(rng, (2,), 3)
    def build(a):
        a_at = ops.matmul(a, ops.transpose(a, perm=[0, 2, 1]))
        return [ops.matrix_inverse(a), ops.matrix_determinant(a), ops.cholesky(a_at)]

    got, shapes = run_graph(build, x, unknown=True)
    assert [len(s) for s in shapes] == [3, 1, 3]
    np.testing.assert_allclose(got[0], np.linalg.inv(x), rtol=1e-10)
    np.testing.assert_allclose(got[1], np.linalg.det(x), rtol=1e-10)
    np.testing.assert_allclose(got[2], np.linalg.cholesky(x @ _t(x)), rtol=1e-10)


def test_empty_matrices_and_batches():
    inv = ops.matrix_inverse(np.zeros((2, 0, 0)))
    assert inv.shape == (2, 0, 0)
    np.testing.assert_array_equal(ops.matrix_determinant(np.zeros((2, 0, 0))), [1.0, 1.0])
    assert ops.cholesky(np.zeros((0, 3, 3))).shape == (0, 3, 3)
    assert ops.matrix_solve(np.eye(3), np.zeros((3, 0))).shape == (3, 0)
    assert ops.matrix_triangular_solve(np.zeros((0, 2, 2)), np.zeros((0, 2, 1))).shape == (0, 2, 1)


# ---- gradients against finite differences ----------------------------------------------------

@pytest.mark.parametrize("adjoint", [False, True])
def test_matrix_inverse_gradient(adjoint):
    x = well_conditioned(np.random.default_rng(10), (2,), 4)
    check_gradients(lambda a: ops.matrix_inverse(a, adjoint=adjoint), [x])


def test_matrix_determinant_gradient():
    x = well_conditioned(np.random.default_rng(11), (2, 2), 4)
    check_gradients(ops.matrix_determinant, [x])


@pytest.mark.parametrize("rank", [2, 1])
def test_matrix_determinant_gradient_of_singular_matrices(rank):
    # det's gradient is the cofactor matrix, defined without an inverse: rank n - 1 gives a
    # rank-1 gradient, rank n - 2 a zero one
    rng = np.random.default_rng(12 + rank)
    u, v = rng.normal(size=(2, 3, rank)), rng.normal(size=(2, rank, 3))
    x = u @ v
    (grad,) = check_gradients(ops.matrix_determinant, [x], atol=1e-7)
    if rank == 1:
        np.testing.assert_allclose(grad, 0, atol=1e-12)
    else:
        assert np.abs(grad).max() > 1e-3


def test_matrix_determinant_gradient_of_tiny_matrices():
    # det(x) inv(x)^T would be 0 * inf: the cofactors are 1 for a 1 x 1 matrix
    x = np.array([[[1e-310]], [[2.0]]])
    got = ops.matrix_determinant_grad(x, ops.matrix_determinant(x), np.array([1.0, 3.0]))
    np.testing.assert_array_equal(got, [[[1.0]], [[3.0]]])


@pytest.mark.parametrize("batch", [(), (2,)])
def test_cholesky_gradient_on_spd_inputs(batch):
    x = spd(np.random.default_rng(14), batch, 4)
    (grad,) = check_gradients(ops.cholesky, [x])
    np.testing.assert_allclose(grad, _t(grad), rtol=1e-12, atol=1e-14)  # symmetric


def test_cholesky_gradient_through_a_a_transpose():
    # the usual construction: x = a a^T + n I built in the graph, differentiated in a
    a = np.random.default_rng(15).normal(size=(2, 3, 3))
    check_gradients(lambda p: ops.cholesky(ops.matmul(p, ops.transpose(p, perm=[0, 2, 1])) +
                                           opsdk.constant(3.0 * np.eye(3))), [a])


@pytest.mark.parametrize("adjoint", [False, True])
def test_matrix_solve_gradient(adjoint):
    rng = np.random.default_rng(16)
    a, b = well_conditioned(rng, (2,), 4), rng.normal(size=(2, 4, 3))
    check_gradients(lambda m, r: ops.matrix_solve(m, r, adjoint=adjoint), [a, b])


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_matrix_triangular_solve_gradient(lower, adjoint):
    rng = np.random.default_rng(17)
    m, b = triangle_with_garbage(rng, (2,), 4, lower), rng.normal(size=(2, 4, 2))
    grad_m, _ = check_gradients(lambda a, r: ops.matrix_triangular_solve(
        a, r, lower=lower, adjoint=adjoint), [m, b])
    other = np.triu(np.ones((4, 4), bool), 1) if lower else np.tril(np.ones((4, 4), bool), -1)
    assert not np.any(grad_m[..., other])  # the triangle that is not read gets no gradient


def test_float32_gradients_keep_the_dtype():
    rng = np.random.default_rng(18)
    x = spd(rng, (2,), 3).astype(np.float32)
    g = opsdk.Graph()
    with g.as_default():
        p = opsdk.placeholder("float32", [2, 3, 3])
        loss = ops.reduce_sum(ops.cholesky(p)) + ops.reduce_sum(ops.matrix_inverse(p)) + \
            ops.reduce_sum(ops.matrix_determinant(p)) + ops.reduce_sum(ops.matrix_solve(p, p)) + \
            ops.reduce_sum(ops.matrix_triangular_solve(p, p))
        (grad,) = opsdk.gradients(loss, [p])
    with opsdk.Session(g) as sess:
        got = sess.run(grad, {p: x})
    assert got.dtype == np.float32 and got.shape == x.shape and np.all(np.isfinite(got))


# ---- refused inputs ----------------------------------------------------------------------------

def test_a_non_square_matrix_is_refused_when_the_graph_is_built():
    with opsdk.Graph().as_default():
        for build in (ops.matrix_inverse, ops.matrix_determinant, ops.cholesky,
                      lambda p: ops.matrix_solve(p, opsdk.constant(np.ones((2, 1)))),
                      lambda p: ops.matrix_triangular_solve(p, opsdk.constant(np.ones((2, 1))))):
            p = opsdk.placeholder("float64", [2, 3])
            with pytest.raises(OpsdkError, match=r"^matrix_\w+|^cholesky") as info:
                build(p)
            assert "dim n" in str(info.value)


def test_a_non_square_matrix_known_only_at_run_time_is_refused_when_it_runs():
    g = opsdk.Graph()
    with g.as_default():
        p = opsdk.placeholder("float64", [None, None, None])
        y = ops.matrix_inverse(p, name="inv")
    with opsdk.Session(g) as sess:
        with pytest.raises(OpsdkError, match=r"^matrix_inverse \(node 'inv'\): input 'x' has "
                                             r"size 3 in axis 2 but x has 2 \(dim n\)"):
            sess.run(y, {p: np.ones((2, 2, 3))})


def _run_refused(build, *values):
    g = opsdk.Graph()
    with g.as_default():
        phs = [opsdk.placeholder("float64", list(v.shape)) for v in values]
        y = build(*phs)
    with opsdk.Session(g) as sess, pytest.raises(OpsdkError) as info:
        sess.run(y, dict(zip(phs, values)))
    return str(info.value)


def test_a_singular_matrix_has_no_inverse():
    x = np.stack([np.eye(3), np.ones((3, 3)), np.eye(3), np.zeros((3, 3))])  # the first is named
    message = _run_refused(lambda p: ops.matrix_inverse(p, name="inv"), x)
    assert message.startswith("matrix_inverse (node 'inv'): input 'x' is singular (matrix x[1])")
    with pytest.raises(OpsdkError, match=r"^matrix_inverse: input 'x' is singular; it has no "
                                         r"inverse"):
        ops.matrix_inverse(np.zeros((2, 2)))


def test_a_matrix_that_is_not_positive_definite_has_no_cholesky_factor():
    x = np.stack([np.eye(2), np.eye(2), np.diag([1.0, -1.0])]).reshape(1, 3, 2, 2)
    message = _run_refused(lambda p: ops.cholesky(p, name="chol"), x)
    assert message.startswith("cholesky (node 'chol'): input 'x' is not positive definite "
                              "(matrix x[0, 2])")
    with pytest.raises(OpsdkError, match=r"^cholesky: input 'x' is not positive definite"):
        ops.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]]))


def test_a_singular_system_has_no_unique_solution():
    a = np.stack([np.eye(2), np.zeros((2, 2))])
    message = _run_refused(lambda m, r: ops.matrix_solve(m, r), a, np.ones((2, 2, 1)))
    assert "matrix_solve" in message and "input 'matrix' is singular (matrix matrix[1])" in message
    t = np.stack([np.eye(2), np.array([[1.0, 5.0], [3.0, 0.0]])])
    message = _run_refused(lambda m, r: ops.matrix_triangular_solve(m, r), t, np.ones((2, 2, 1)))
    assert ("matrix_triangular_solve" in message and "zero on the diagonal of its lower triangle "
            "(matrix matrix[1])" in message)


# ---- segment sums -------------------------------------------------------------------------------

def unsorted_reference(data, ids, num_segments):
    out = np.zeros((num_segments,) + data.shape[ids.ndim:], data.dtype)
    for index in np.ndindex(ids.shape):
        if 0 <= ids[index] < num_segments:
            out[ids[index]] += data[index]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_unsorted_segment_sum_drops_negative_ids(dtype, id_dtype):
    data = np.arange(12).reshape(6, 2).astype(dtype)
    ids = np.array([3, -1, 0, 3, -2, 0], id_dtype)  # -1 and -2 are dropped; 1, 2 stay empty
    got, (shape,) = run_graph(lambda d, i: ops.unsorted_segment_sum(d, i, num_segments=4),
                              data, ids, dtype=dtype)
    assert tuple(shape) == (4, 2) and got[0].dtype == dtype
    np.testing.assert_array_equal(got[0], unsorted_reference(data, ids, 4))
    np.testing.assert_array_equal(got[0][0], data[2] + data[5])
    np.testing.assert_array_equal(got[0][3], data[0] + data[3])
    np.testing.assert_array_equal(got[0][1:3], 0)


@pytest.mark.parametrize("ids_shape, data_shape", [((2, 3), (2, 3, 4)), ((2, 3), (2, 3)),
                                                   ((4,), (4, 2, 2)), ((), (3,))])
def test_unsorted_segment_sum_takes_ids_of_any_rank(ids_shape, data_shape):
    rng = np.random.default_rng(20)
    data = rng.normal(size=data_shape)
    ids = rng.integers(-1, 3, size=ids_shape)
    got, (shape,) = run_graph(lambda d, i: ops.unsorted_segment_sum(d, i, num_segments=3),
                              data, ids)
    want = unsorted_reference(data, ids, 3)
    assert tuple(shape) == want.shape
    np.testing.assert_allclose(got[0], want, rtol=1e-12)


def test_unsorted_segment_sum_gradient_gathers_and_zeroes_dropped_ids():
    rng = np.random.default_rng(21)
    data, ids = rng.normal(size=(2, 3, 2)), np.array([[0, -4, 2], [-1, 2, 2]])
    (grad,) = check_gradients(lambda d, i: ops.unsorted_segment_sum(d, i, num_segments=3),
                              [data, ids], wrt=[0])
    assert not np.any(grad[0, 1]) and not np.any(grad[1, 0])  # ids -4 and -1 were dropped
    np.testing.assert_array_equal(grad[0, 2], grad[1, 1])  # both in segment 2


@pytest.mark.parametrize("op", ["unsorted_segment_sum", "unsorted_segment_max",
                                "unsorted_segment_min"])
def test_an_id_past_the_last_segment_is_an_error_not_a_slice_lost(op):
    # It was dropped in silence, as a negative id is; TensorFlow refuses it, and so do these.
    data = np.arange(12.0).reshape(2, 3, 2)
    ids = np.array([[0, 1, 2], [2, 5, -1]])
    with pytest.raises(Exception, match=rf"{op}.*segment_ids\[1, 1\] = 5 is out of range "
                                        r"\[0, 3\)"):
        run_graph(lambda d, i: getattr(ops, op)(d, i, num_segments=3), data, ids)


def test_unsorted_segment_sum_refuses_ids_that_are_not_a_prefix_of_data():
    with opsdk.Graph().as_default():
        d = opsdk.placeholder("float32", [3, 2])
        with pytest.raises(OpsdkError, match="unsorted_segment_sum.*not a prefix"):
            ops.unsorted_segment_sum(d, opsdk.placeholder("int32", [2]), num_segments=2)
    with pytest.raises(OpsdkError, match="unsorted_segment_sum.*not a prefix"):
        ops.unsorted_segment_sum(np.ones((3, 2)), np.zeros(2, np.int32), num_segments=2)


def test_unsorted_segment_sum_with_no_segments():
    got = ops.unsorted_segment_sum(np.ones((3, 2)), np.array([-1, -1, -2]), num_segments=0)
    assert got.shape == (0, 2)
    grad = ops.unsorted_segment_sum_grad(np.ones((3, 2)), np.array([-1, -1, -2]), np.ones((0, 2)),
                                         num_segments=0)
    np.testing.assert_array_equal(grad, np.zeros((3, 2)))


def test_segment_sum_sizes_its_output_at_run_time():
    data = np.arange(10.0).reshape(5, 2)
    ids = np.array([0, 0, 2, 2, 3])
    got, (shape,) = run_graph(ops.segment_sum, data, ids)
    assert tuple(shape) == (None, 2)
    np.testing.assert_array_equal(got[0], [[2, 4], [0, 0], [10, 12], [8, 9]])
    empty = ops.segment_sum(np.zeros((0, 3)), np.zeros(0, np.int64))
    assert empty.shape == (0, 3)
    np.testing.assert_array_equal(ops.segment_sum(np.arange(3.0), np.array([1, 1, 1])), [0, 3])


def test_segment_sum_gradient_gathers_grad_y_at_the_ids():
    data = np.random.default_rng(22).normal(size=(5, 2, 2))
    ids = np.array([0, 0, 1, 3, 3])
    g = opsdk.Graph()
    with g.as_default():
        d = opsdk.placeholder("float64", [5, 2, 2])
        i = opsdk.placeholder("int64", [5])
        y = ops.segment_sum(d, i)
        loss = ops.reduce_sum(y * y)
        (grad,) = opsdk.gradients(loss, [d])
    feeds = {d: data, i: ids}
    with opsdk.Session(g) as sess:
        got = sess.run(grad, feeds)
        np.testing.assert_allclose(got, numeric_grad(sess, loss, d, feeds), rtol=1e-6, atol=1e-8)
    sums = np.zeros((4, 2, 2))
    np.add.at(sums, ids, data)
    np.testing.assert_allclose(got, 2 * sums[ids], rtol=1e-12)


@pytest.mark.parametrize("ids, message", [
    ([0, 2, 1], r"must be sorted.*segment_ids\[2\] = 1 follows 2"),
    ([-1, 0, 0], "must be >= 0"),
])
def test_segment_sum_refuses_unsorted_or_negative_ids(ids, message):
    g = opsdk.Graph()
    with g.as_default():
        d = opsdk.placeholder("float64", [3])
        i = opsdk.placeholder("int32", [3])
        y = ops.segment_sum(d, i, name="seg")
    with opsdk.Session(g) as sess:
        with pytest.raises(OpsdkError, match=f"^segment_sum \\(node 'seg'\\): .*{message}"):
            sess.run(y, {d: np.ones(3), i: np.array(ids, np.int32)})


def test_segment_sum_refuses_ids_that_are_not_one_per_row():
    with opsdk.Graph().as_default():
        with pytest.raises(OpsdkError, match="segment_sum.*1-d"):
            ops.segment_sum(opsdk.placeholder("float32", [3, 2]),
                            opsdk.placeholder("int32", [3, 2]))
        with pytest.raises(OpsdkError, match="segment_sum.*2 ids but data has 3 rows"):
            ops.segment_sum(opsdk.placeholder("float32", [3, 2]), opsdk.placeholder("int32", [2]))


# ---- self_adjoint_eig ---------------------------------------------------------------------------

def with_eigenvalues(rng, batch, values):
    """Symmetric matrices q diag(values) q^T, q a random orthogonal matrix per matrix."""
    q, _ = np.linalg.qr(rng.normal(size=batch + (len(values), len(values))))
    return (q * np.asarray(values, float)) @ _t(q)


def largest_entries(v):
    """Per column of each matrix of v, its entry of largest magnitude."""
    return np.take_along_axis(v, np.abs(v).argmax(-2)[..., None, :], -2)[..., 0, :]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_self_adjoint_eig_matches_numpy(dtype, batch):
    rng = np.random.default_rng(30)
    a = rng.normal(size=batch + (4, 4))
    x = a + _t(a)
    got, shapes = run_graph(ops.self_adjoint_eig, x, dtype=dtype)
    e, v = got
    want_e, want_v = np.linalg.eigh(x)
    assert e.dtype == v.dtype == dtype and e.shape == batch + (4,) and v.shape == x.shape
    assert [tuple(s) for s in shapes] == [batch + (4,), x.shape]
    np.testing.assert_allclose(e, want_e, **TOL[dtype])
    assert np.all(np.diff(e, axis=-1) > 0)  # ascending
    # each eigenvector is NumPy's up to its sign, which makes its largest entry positive
    assert np.all(largest_entries(v) > 0)
    np.testing.assert_allclose(v, want_v * np.sign(largest_entries(want_v))[..., None, :],
                               rtol=10 * TOL[dtype]["rtol"], atol=10 * TOL[dtype]["atol"])
    np.testing.assert_allclose((v * e[..., None, :]) @ _t(v), x, rtol=1e-4, atol=1e-4)


def test_self_adjoint_eig_reads_the_symmetric_part():
    rng = np.random.default_rng(31)
    x = with_eigenvalues(rng, (2,), [-1.0, 0.5, 2.0])
    skew = rng.normal(size=(2, 3, 3))
    skew = skew - _t(skew)
    (e, v), _ = run_graph(ops.self_adjoint_eig, x + skew)
    (e0, v0), _ = run_graph(ops.self_adjoint_eig, x)
    np.testing.assert_allclose(e, [[-1.0, 0.5, 2.0]] * 2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(e, e0, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(v, v0, rtol=1e-12, atol=1e-12)


def test_self_adjoint_eig_of_diagonal_and_empty_matrices():
    e, v = ops.self_adjoint_eig(np.diag([3.0, -1.0, 2.0]))
    np.testing.assert_array_equal(e, [-1.0, 2.0, 3.0])
    np.testing.assert_array_equal(v, np.eye(3)[:, [1, 2, 0]])  # unit vectors, signs +
    e, v = ops.self_adjoint_eig(np.zeros((2, 0, 0)))
    assert e.shape == (2, 0) and v.shape == (2, 0, 0)
    e, v = ops.self_adjoint_eig(np.zeros((0, 3, 3)))
    assert e.shape == (0, 3) and v.shape == (0, 3, 3)


def test_self_adjoint_eig_of_a_matrix_with_nan_is_nan():
    x = np.stack([np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([[np.nan, 1.0], [1.0, 2.0]]),
                  np.array([[1.0, np.inf], [0.0, 1.0]])])
    e, v = ops.self_adjoint_eig(x)
    assert np.all(np.isnan(e[1:])) and np.all(np.isnan(v[1:]))
    want_e, _ = np.linalg.eigh(x[0])
    np.testing.assert_allclose(e[0], want_e, rtol=1e-12)
    assert np.all(np.isfinite(v[0]))


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_self_adjoint_eig_gradient(which, batch):
    # v's signs are fixed by the op, so even a loss that depends on them is a function of x
    # (away from ties); x is not symmetric: its symmetric part is what the op reads
    x = np.random.default_rng(32).normal(size=batch + (4, 4))
    (grad,) = check_gradients(lambda a: ops.self_adjoint_eig(a)[which], [x])
    np.testing.assert_allclose(grad, _t(grad), rtol=1e-12, atol=1e-14)  # symmetric


def test_self_adjoint_eig_gradient_of_sign_free_losses():
    # sum(v * v * w) and v diag(c) v^T do not depend on the eigenvectors' signs
    x = with_eigenvalues(np.random.default_rng(33), (2,), [-2.0, -0.5, 1.0, 3.0])

    def build(a):
        c = opsdk.constant(np.array([0.3, -1.0, 2.0, 0.7]))
        e, v = ops.self_adjoint_eig(a)
        return ops.concat([ops.reshape(v * v, shape=[2, 16]),
                           ops.reshape(ops.matmul(v * c, ops.transpose(v, perm=[0, 2, 1])),
                                       shape=[2, 16]), e], axis=1)

    check_gradients(build, [x])


def test_self_adjoint_eig_gradient_with_a_repeated_eigenvalue():
    # eigenvalue 1 twice: its eigenvectors are not determined, but the projection onto their
    # plane is, and so is its gradient; the gradient op's terms for the equal pair are 0, not inf
    x = with_eigenvalues(np.random.default_rng(34), (), [1.0, 1.0, 3.0])

    def build(a):
        w = opsdk.constant(np.random.default_rng(35).normal(size=(3, 3)))
        e, v = ops.self_adjoint_eig(a)
        plane = ops.slice(v, begin=[0, 0], size=[3, 2])
        # e[0] and e[1] alone are not differentiable there (their sum is), e[2] is
        return ops.concat([ops.reshape(ops.matmul(plane, ops.transpose(plane, perm=[1, 0])) * w,
                                       shape=[9]), ops.reshape(e[0] + e[1], shape=[1]),
                           ops.slice(e, begin=[2], size=[1])], axis=0)

    (grad,) = check_gradients(build, [x], rtol=1e-5, atol=1e-6)
    assert np.all(np.isfinite(grad))


def test_self_adjoint_eig_gradient_keeps_float32():
    x = with_eigenvalues(np.random.default_rng(36), (2,), [-1.0, 0.5, 2.0]).astype(np.float32)
    g = opsdk.Graph()
    with g.as_default():
        p = opsdk.placeholder("float32", [2, 3, 3])
        e, v = ops.self_adjoint_eig(p)
        (grad,) = opsdk.gradients(ops.reduce_sum(e) + ops.reduce_sum(v * v), [p])
    with opsdk.Session(g) as sess:
        got = sess.run(grad, {p: x})
    assert got.dtype == np.float32 and got.shape == x.shape
    # d sum(e) / dx = I (the trace), and sum(v * v) = n is constant
    np.testing.assert_allclose(got, np.broadcast_to(np.eye(3), x.shape), atol=1e-5)


def test_self_adjoint_eig_refuses_non_square_matrices():
    with opsdk.Graph().as_default():
        with pytest.raises(OpsdkError, match=r"^self_adjoint_eig.*dim n"):
            ops.self_adjoint_eig(opsdk.placeholder("float64", [2, 3]))


# ---- svd -----------------------------------------------------------------------------------------

def with_singular_values(rng, batch, m, n, values):
    """[..., m, n] matrices u diag(values) v^T, u and v random with orthonormal columns."""
    k = len(values)
    u, _ = np.linalg.qr(rng.normal(size=batch + (m, k)))
    v, _ = np.linalg.qr(rng.normal(size=batch + (n, k)))
    return (u * np.asarray(values, float)) @ _t(v)


SVD_SHAPES = [(4, 3), (3, 4), (3, 3)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("m, n", SVD_SHAPES)
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_matches_numpy(dtype, batch, m, n, full_matrices):
    x = np.random.default_rng(40).normal(size=batch + (m, n))
    (s, u, v), shapes = run_graph(lambda a: ops.svd(a, full_matrices=full_matrices), x,
                                  dtype=dtype)
    want_u, want_s, want_vt = np.linalg.svd(x, full_matrices=full_matrices)
    k = min(m, n)
    cols_u, cols_v = (m, n) if full_matrices else (k, k)
    assert s.dtype == u.dtype == v.dtype == dtype
    assert (s.shape, u.shape, v.shape) == (batch + (k,), batch + (m, cols_u), batch + (n, cols_v))
    assert [tuple(t) for t in shapes] == [s.shape, u.shape, v.shape]
    np.testing.assert_allclose(s, want_s, **TOL[dtype])
    tol = dict(rtol=10 * TOL[dtype]["rtol"], atol=10 * TOL[dtype]["atol"])
    # NumPy's up to signs: u's largest entries are positive, v's paired columns follow them, v's
    # columns without a singular value have their own largest entry positive
    signs = np.sign(largest_entries(want_u))
    np.testing.assert_allclose(u, want_u * signs[..., None, :], **tol)
    want_v = _t(want_vt)
    v_signs = np.concatenate([signs[..., :k], np.sign(largest_entries(want_v))[..., k:]], -1)
    np.testing.assert_allclose(v, want_v * v_signs[..., None, :], **tol)
    assert np.all(largest_entries(u) > 0)
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ _t(v[..., :k]), x,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_without_u_and_v(dtype, full_matrices):
    x = np.random.default_rng(41).normal(size=(2, 3, 5))
    (s, u, v), shapes = run_graph(lambda a: ops.svd(a, full_matrices=full_matrices,
                                                    compute_uv=False), x, dtype=dtype)
    np.testing.assert_allclose(s, np.linalg.svd(x, compute_uv=False), **TOL[dtype])
    assert u.shape == v.shape == (2, 0, 0) and u.dtype == v.dtype == dtype
    assert [tuple(t) for t in shapes] == [(2, 3), (2, 0, 0), (2, 0, 0)]


def test_svd_of_empty_matrices_and_matrices_with_nan():
    for shape, k in [((2, 0, 3), 0), ((0, 3, 2), 2), ((3, 0), 0)]:
        s, u, v = ops.svd(np.zeros(shape))
        assert s.shape == shape[:-2] + (k,)
        assert u.shape == shape[:-1] + (k,) and v.shape == shape[:-2] + (shape[-1], k)
    s, u, v = ops.svd(np.zeros((2, 3)), full_matrices=True)
    np.testing.assert_array_equal(s, [0.0, 0.0])
    assert u.shape == (2, 2) and v.shape == (3, 3)
    np.testing.assert_allclose(v @ _t(v), np.eye(3), atol=1e-15)
    x = np.stack([np.eye(2) * 3.0, [[np.nan, 1.0], [0.0, 1.0]], [[1.0, 2.0], [np.inf, 0.0]]])
    for compute_uv in (True, False):
        s, u, v = ops.svd(x, compute_uv=compute_uv)
        np.testing.assert_array_equal(s[0], [3.0, 3.0])
        assert np.all(np.isnan(s[1:]))
        if compute_uv:
            assert np.all(np.isnan(u[1:])) and np.all(np.isnan(v[1:]))
            np.testing.assert_array_equal(u[0], np.eye(2))


@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("m, n", SVD_SHAPES + [(5, 2), (2, 5)])
def test_svd_gradient(which, m, n):
    # distinct singular values, well apart; the op fixes the vectors' signs, so any loss is a
    # function of x
    rng = np.random.default_rng(42)
    x = with_singular_values(rng, (2,), m, n, [3.0, 2.0, 1.0, 0.5][:min(m, n)])
    check_gradients(lambda a: ops.svd(a)[which], [x])


@pytest.mark.parametrize("m, n", SVD_SHAPES)
def test_svd_gradient_of_sign_free_losses(m, n):
    # u u^T, v v^T projections and u diag(s) v^T (which is x) do not depend on the signs
    x = with_singular_values(np.random.default_rng(43), (), m, n, [2.5, 1.5, 0.7][:min(m, n)])

    def build(a):
        s, u, v = ops.svd(a)
        return ops.concat([ops.reshape(ops.matmul(u, ops.transpose(u, perm=[1, 0])), shape=[-1]),
                           ops.reshape(ops.matmul(v * s, ops.transpose(v, perm=[1, 0])),
                                       shape=[-1]),
                           ops.reshape(ops.matmul(u * s, ops.transpose(v, perm=[1, 0])),
                                       shape=[-1])], axis=0)

    check_gradients(build, [x])


@pytest.mark.parametrize("m, n", SVD_SHAPES)
def test_svd_gradient_without_u_and_v(m, n):
    x = np.random.default_rng(44).normal(size=(2, m, n))
    check_gradients(lambda a: ops.svd(a, compute_uv=False)[0], [x])
    check_gradients(lambda a: ops.svd(a, full_matrices=True, compute_uv=False)[0], [x])


def test_svd_gradient_with_full_square_matrices():
    x = with_singular_values(np.random.default_rng(45), (2,), 3, 3, [3.0, 1.0, 0.2])
    for which in range(3):
        check_gradients(lambda a: ops.svd(a, full_matrices=True)[which], [x])


def test_svd_gradient_refuses_full_matrices_that_are_not_square():
    g = opsdk.Graph()
    with g.as_default():
        p = opsdk.placeholder("float64", [2, 4, 3])
        s, u, v = ops.svd(p, full_matrices=True)
        (grad,) = opsdk.gradients(ops.reduce_sum(s) + ops.reduce_sum(u), [p])
    with opsdk.Session(g) as sess:
        with pytest.raises(OpsdkError, match=r"^svd_grad .*full_matrices=true with 4 x 3 "
                                             r"matrices \(m != n\) has no gradient"):
            sess.run(grad, {p: np.ones((2, 4, 3))})


def test_svd_gradient_keeps_float32():
    x = with_singular_values(np.random.default_rng(46), (2,), 4, 3, [3.0, 2.0, 1.0])
    g = opsdk.Graph()
    with g.as_default():
        p = opsdk.placeholder("float32", [2, 4, 3])
        s, u, v = ops.svd(p)
        (grad,) = opsdk.gradients(ops.reduce_sum(s) + ops.reduce_sum(u * u) +
                                  ops.reduce_sum(v), [p])
    with opsdk.Session(g) as sess:
        got = sess.run(grad, {p: x.astype(np.float32)})
    assert got.dtype == np.float32 and got.shape == x.shape and np.all(np.isfinite(got))


# ---- qr ------------------------------------------------------------------------------------------

QR_SHAPES = [(4, 3), (3, 4), (3, 3)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("m, n", QR_SHAPES)
@pytest.mark.parametrize("full_matrices", [False, True])
def test_qr_matches_numpy(dtype, batch, m, n, full_matrices):
    x = np.random.default_rng(50).normal(size=batch + (m, n))
    (q, r), shapes = run_graph(lambda a: ops.qr(a, full_matrices=full_matrices), x, dtype=dtype)
    want_q, want_r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    k = min(m, n)
    cols = m if full_matrices else k
    assert q.dtype == r.dtype == dtype
    assert (q.shape, r.shape) == (batch + (m, cols), batch + (cols, n))
    assert [tuple(t) for t in shapes] == [q.shape, r.shape]
    # NumPy's (LAPACK's) with the first k columns of q and rows of r flipped where r's diagonal
    # is negative
    signs = np.ones(batch + (cols,))
    signs[..., :k] = np.sign(np.diagonal(want_r, axis1=-2, axis2=-1))
    tol = dict(rtol=10 * TOL[dtype]["rtol"], atol=10 * TOL[dtype]["atol"])
    np.testing.assert_allclose(q, want_q * signs[..., None, :], **tol)
    np.testing.assert_allclose(r, want_r * signs[..., :, None], **tol)
    assert np.all(np.diagonal(r, axis1=-2, axis2=-1) >= 0)
    assert not np.any(np.tril(r, -1))
    np.testing.assert_allclose(q @ r, x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_t(q) @ q, np.broadcast_to(np.eye(cols), batch + (cols, cols)),
                               atol=1e-5)


def test_qr_of_triangular_and_empty_matrices():
    # r's diagonal >= 0: an upper triangle with a positive diagonal is its own r, q = I
    t = np.triu(np.random.default_rng(51).uniform(0.5, 2.0, (3, 3)))
    q, r = ops.qr(t)
    np.testing.assert_allclose(q, np.eye(3), atol=1e-15)
    np.testing.assert_allclose(r, t, rtol=1e-14)
    q, r = ops.qr(-t)  # a negative diagonal goes into q
    np.testing.assert_allclose(q, -np.eye(3), atol=1e-15)
    np.testing.assert_allclose(r, t, rtol=1e-14)
    for shape, full in [((2, 0, 3), False), ((0, 3, 2), False), ((3, 0), False), ((3, 0), True)]:
        q, r = ops.qr(np.zeros(shape), full_matrices=full)
        m, n = shape[-2:]
        cols = m if full else min(m, n)
        assert q.shape == shape[:-2] + (m, cols) and r.shape == shape[:-2] + (cols, n)


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("m, n", QR_SHAPES + [(5, 2), (2, 5)])
def test_qr_gradient(which, m, n):
    x = well_conditioned(np.random.default_rng(52), (2,), max(m, n))[..., :m, :n]
    check_gradients(lambda a: ops.qr(a)[which], [x])


def test_qr_gradient_at_a_triangular_matrix():
    # where LAPACK's signs jump (its reflections are skipped for a column already triangular),
    # the op's do not: finite differences agree there too
    t = np.triu(np.random.default_rng(53).uniform(0.5, 2.0, (3, 3)))
    for which in (0, 1):
        check_gradients(lambda a: ops.qr(a)[which], [t])


@pytest.mark.parametrize("m, n", [(3, 3), (3, 5)])
def test_qr_gradient_with_full_matrices_that_are_not_tall(m, n):
    x = well_conditioned(np.random.default_rng(54), (2,), n)[..., :m, :n]
    for which in (0, 1):
        check_gradients(lambda a: ops.qr(a, full_matrices=True)[which], [x])


def test_qr_gradient_refuses_full_matrices_that_are_tall():
    g = opsdk.Graph()
    with g.as_default():
        p = opsdk.placeholder("float64", [4, 3])
        q, r = ops.qr(p, full_matrices=True)
        (grad,) = opsdk.gradients(ops.reduce_sum(q) + ops.reduce_sum(r), [p])
    with opsdk.Session(g) as sess:
        with pytest.raises(OpsdkError, match=r"^qr_grad .*full_matrices=true with 4 x 3 matrices "
                                             r"\(m > n\) has no gradient"):
            sess.run(grad, {p: np.random.default_rng(55).normal(size=(4, 3))})


def test_qr_gradient_of_a_matrix_without_full_rank_is_refused():
    x = np.stack([np.eye(2), [[1.0, 0.0], [0.0, 0.0]]])  # r[1] has a zero on its diagonal
    q, r = ops.qr(x)
    with pytest.raises(OpsdkError, match=r"^qr_grad: input 'r' is singular \(matrix r\[1\]\): "
                                         r"x's rank is below min\(m, n\)"):
        ops.qr_grad(x, q, r, np.ones_like(q), np.ones_like(r))


def test_qr_gradient_keeps_float32():
    x = well_conditioned(np.random.default_rng(56), (2,), 4)[..., :3]
    g = opsdk.Graph()
    with g.as_default():
        p = opsdk.placeholder("float32", [2, 4, 3])
        q, r = ops.qr(p)
        (grad,) = opsdk.gradients(ops.reduce_sum(q) + ops.reduce_sum(r * r), [p])
    with opsdk.Session(g) as sess:
        got = sess.run(grad, {p: x.astype(np.float32)})
    assert got.dtype == np.float32 and got.shape == x.shape and np.all(np.isfinite(got))
