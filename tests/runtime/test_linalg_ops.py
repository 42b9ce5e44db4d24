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
def test_unsorted_segment_sum_drops_ids_out_of_range(dtype, id_dtype):
    data = np.arange(12).reshape(6, 2).astype(dtype)
    ids = np.array([3, -1, 0, 3, 7, 0], id_dtype)  # -1 and 7 are dropped; 1, 2 stay empty
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
    ids = rng.integers(-1, 4, size=ids_shape)
    got, (shape,) = run_graph(lambda d, i: ops.unsorted_segment_sum(d, i, num_segments=3),
                              data, ids)
    want = unsorted_reference(data, ids, 3)
    assert tuple(shape) == want.shape
    np.testing.assert_allclose(got[0], want, rtol=1e-12)


def test_unsorted_segment_sum_gradient_gathers_and_zeroes_dropped_ids():
    rng = np.random.default_rng(21)
    data, ids = rng.normal(size=(2, 3, 2)), np.array([[0, 4, 2], [-1, 2, 2]])
    (grad,) = check_gradients(lambda d, i: ops.unsorted_segment_sum(d, i, num_segments=3),
                              [data, ids], wrt=[0])
    assert not np.any(grad[0, 1]) and not np.any(grad[1, 0])  # ids 4 and -1 were dropped
    np.testing.assert_array_equal(grad[0, 2], grad[1, 1])  # both in segment 2


def test_unsorted_segment_sum_refuses_ids_that_are_not_a_prefix_of_data():
    with opsdk.Graph().as_default():
        d = opsdk.placeholder("float32", [3, 2])
        with pytest.raises(OpsdkError, match="unsorted_segment_sum.*not a prefix"):
            ops.unsorted_segment_sum(d, opsdk.placeholder("int32", [2]), num_segments=2)
    with pytest.raises(OpsdkError, match="unsorted_segment_sum.*not a prefix"):
        ops.unsorted_segment_sum(np.ones((3, 2)), np.zeros(2, np.int32), num_segments=2)


def test_unsorted_segment_sum_with_no_segments():
    got = ops.unsorted_segment_sum(np.ones((3, 2)), np.array([0, 1, 0]), num_segments=0)
    assert got.shape == (0, 2)
    grad = ops.unsorted_segment_sum_grad(np.ones((3, 2)), np.array([0, 1, 0]), np.ones((0, 2)),
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
