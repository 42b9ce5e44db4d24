"""pairwise_manhattan and its gradient op, run through the built CPU kernels, against NumPy.

The shapes are chosen to reach every path of the kernels: empty dims, p below and off the
vector width (the scalar remainder), rows that do not fill a register tile, more rows of y than one
cache block, p longer than one k block, and enough work to run on every thread.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsdk import ops
from opsdk.registry import load_registry
from opsdk.registry.errors import OpError
from opsdk.runtime.ir.graph import Graph, placeholder
from opsdk.runtime.kernels.loader import load_kernel
from opsdk.runtime.exec.session import Session

DTYPES = (np.float32, np.float64)
# float32 sums of p terms: the kernel and NumPy add in different orders.
RTOL = {np.float32: 2e-5, np.float64: 1e-12}


def reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The declaration's reference, in float64."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    return np.abs(x[:, None, :] - y[None, :, :]).sum(-1)


def reference_grad(x: np.ndarray, y: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The gradient op's reference, in float64 (np.sign(0) == 0, as the op declares)."""
    x, y, g = (a.astype(np.float64) for a in (x, y, g))
    t = g[:, :, None] * np.sign(x[:, None, :] - y[None, :, :])
    return t.sum(1), -t.sum(0)


def draw(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> np.ndarray:
    return rng.uniform(-2.0, 2.0, size=shape).astype(dtype)


def check_forward(n: int, m: int, p: int, dtype, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    x, y = draw(rng, (n, p), dtype), draw(rng, (m, p), dtype)
    z = ops.pairwise_manhattan(x, y)
    assert z.dtype == dtype and z.shape == (n, m)
    # atol: p terms of size <= 4, each rounded to the dtype.
    atol = 4.0 * p * np.finfo(dtype).eps
    np.testing.assert_allclose(z, reference(x, y), rtol=RTOL[dtype], atol=atol)


def check_grad(x: np.ndarray, y: np.ndarray, g: np.ndarray) -> None:
    dtype = x.dtype.type
    gx, gy = ops.pairwise_manhattan_grad(x, y, g)
    assert gx.dtype == dtype and gy.dtype == dtype
    assert gx.shape == x.shape and gy.shape == y.shape
    rx, ry = reference_grad(x, y, g)
    atol = 4.0 * max(x.shape[0], y.shape[0]) * np.finfo(dtype).eps
    np.testing.assert_allclose(gx, rx, rtol=RTOL[dtype], atol=atol)
    np.testing.assert_allclose(gy, ry, rtol=RTOL[dtype], atol=atol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,m,p", [
    (0, 3, 4), (3, 0, 4), (0, 0, 0), (3, 4, 0),  # empty: z is empty, or all zeros when p == 0
    (1, 1, 1), (2, 3, 5), (7, 9, 13), (5, 11, 33),  # p below / off the vector width
    (13, 17, 16), (37, 41, 64), (4, 4, 8),  # whole vectors, partial and whole tiles
])
def test_forward_small_shapes_match_numpy(n, m, p, dtype):
    check_forward(n, m, p, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,m,p", [
    (70, 300, 1100),  # p beyond one k block, m beyond one block of rows of y
    (257, 131, 256),  # enough work to run on every thread; odd row counts at each boundary
])
def test_forward_blocked_paths_match_numpy(n, m, p, dtype):
    check_forward(n, m, p, dtype, seed=1)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 40), m=st.integers(0, 40), p=st.integers(0, 70),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_forward_random_shapes_match_numpy(n, m, p, dtype, seed):
    check_forward(n, m, p, dtype, seed)


def test_forward_distance_to_itself_is_exactly_zero():
    x = draw(np.random.default_rng(2), (19, 37), np.float32)
    np.testing.assert_array_equal(np.diag(ops.pairwise_manhattan(x, x)), np.zeros(19, np.float32))


def test_forward_propagates_nan_and_inf():
    x = np.array([[0.0, np.nan], [1.0, np.inf], [1.0, 2.0]])
    y = np.array([[0.0, 0.0], [1.0, 2.0]])
    z = ops.pairwise_manhattan(x, y)
    assert np.isnan(z[0]).all() and np.isposinf(z[1]).all()
    np.testing.assert_array_equal(z[2], [3.0, 0.0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [3, 40])  # the scalar tail alone, and the vector loop
def test_grad_propagates_a_nonfinite_grad_z_where_x_equals_y(dtype, p):
    """grad_z * sign(0) is NaN for a NaN or infinite grad_z, as in the reference: finite x and y
    take the bit-operation sign, which must not zero such a term."""
    rng = np.random.default_rng(7)
    x, y = draw(rng, (5, p), dtype), draw(rng, (4, p), dtype)
    y[1] = x[0]                       # every coordinate ties for the pair (0, 1)
    y[3, :2] = x[4, :2]               # two coordinates tie for the pair (4, 3)
    g = draw(rng, (5, 4), dtype)
    g[0, 1], g[4, 3], g[2, 2] = np.nan, np.inf, -np.inf   # (2, 2) has no tie: -inf * +-1
    gx, gy = ops.pairwise_manhattan_grad(x, y, g)
    s = np.sign(x[:, None, :].astype(np.float64) - y[None, :, :])
    with np.errstate(invalid="ignore"):
        want_x, want_y = (g[:, :, None] * s).sum(1), -(g[:, :, None] * s).sum(0)
    assert np.isnan(gx[0]).all() and np.isnan(gx[4, :2]).all() and np.isnan(gy[1]).all()
    np.testing.assert_allclose(gx, want_x, rtol=RTOL[dtype], atol=1e-5, equal_nan=True)
    np.testing.assert_allclose(gy, want_y, rtol=RTOL[dtype], atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,m,p", [
    (0, 3, 4), (3, 0, 4), (3, 4, 0), (1, 1, 1), (7, 9, 13), (5, 11, 33), (37, 41, 64),
    (130, 70, 210),  # several tiles and rounds of the thread schedule
])
def test_grad_matches_numpy(n, m, p, dtype):
    rng = np.random.default_rng(4)
    check_grad(draw(rng, (n, p), dtype), draw(rng, (m, p), dtype), draw(rng, (n, m), dtype))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 30), m=st.integers(0, 30), p=st.integers(0, 40),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_grad_random_shapes_match_numpy(n, m, p, dtype, seed):
    rng = np.random.default_rng(seed)
    check_grad(draw(rng, (n, p), dtype), draw(rng, (m, p), dtype), draw(rng, (n, m), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_grad_ties_contribute_nothing(dtype):
    """Integer-valued inputs make many x[i, k] == y[j, k]: there sign(0) = 0."""
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 3, size=(23, 19)).astype(dtype)
    y = rng.integers(-2, 3, size=(17, 19)).astype(dtype)
    check_grad(x, y, draw(rng, (23, 17), dtype))
    gx, gy = ops.pairwise_manhattan_grad(x, x, np.ones((23, 23), dtype))
    # Against itself with uniform weights, gx[i, k] = sum_j sign(x[i, k] - x[j, k]) = gy[i, k],
    # a count of smaller minus larger entries of column k (ties, the diagonal included, add 0).
    np.testing.assert_array_equal(gx, gy)
    ranks = (x[:, None, :] > x[None, :, :]).sum(1) - (x[:, None, :] < x[None, :, :]).sum(1)
    np.testing.assert_array_equal(gx, ranks.astype(dtype))


def test_grad_agrees_with_finite_differences_of_the_forward_kernel():
    """The two kernels agree with each other, not only each with its reference."""
    rng = np.random.default_rng(6)
    x, y, g = draw(rng, (4, 6), np.float64), draw(rng, (3, 6), np.float64), draw(rng, (4, 3), np.float64)
    gx, gy = ops.pairwise_manhattan_grad(x, y, g)
    eps = 1e-6
    for arr, grad in ((x, gx), (y, gy)):
        for idx in np.ndindex(*arr.shape):
            arr[idx] += eps
            up = (ops.pairwise_manhattan(x, y) * g).sum()
            arr[idx] -= 2 * eps
            down = (ops.pairwise_manhattan(x, y) * g).sum()
            arr[idx] += eps
            assert abs((up - down) / (2 * eps) - grad[idx]) < 1e-6


def test_mismatched_p_names_the_inputs_and_the_dim():
    x, y = np.zeros((3, 4), np.float32), np.zeros((2, 5), np.float32)
    with pytest.raises(OpError, match=r"pairwise_manhattan: input 'y' has 5 columns but x has 4 \(dim p\)"):
        ops.pairwise_manhattan(x, y)


def test_mismatched_grad_z_names_the_input():
    x, y = np.zeros((3, 4)), np.zeros((2, 4))
    with pytest.raises(OpError, match=r"pairwise_manhattan_grad: input 'grad_z'"):
        ops.pairwise_manhattan_grad(x, y, np.zeros((3, 3)))


def test_built_kernel_checks_inputs_itself():
    """The compiled glue refuses what the Python layer would, with the same wording."""
    kernel = load_kernel(load_registry().get("pairwise_manhattan"), "cpu")
    with pytest.raises(ValueError, match=r"^pairwise_manhattan: input 'y' has 5 columns but x has 4 \(dim p\)"):
        kernel(np.zeros((3, 4), np.float32), np.zeros((2, 5), np.float32))
    with pytest.raises(TypeError, match=r"^pairwise_manhattan: inputs 'x' and 'y'"):
        kernel(np.zeros((3, 4), np.float32), np.zeros((2, 4), np.float64))
    # A big-endian array called directly (eager calls and graphs convert it; the glue names it).
    with pytest.raises(TypeError, match=r"^pairwise_manhattan: input 'x' has dtype a non-native "
                                        r"byte order or a dtype opsdk does not take; expected"):
        kernel(np.zeros((3, 4), ">f4"), np.zeros((2, 4), np.float32))


def test_runs_in_a_graph_through_session_run():
    rng = np.random.default_rng(7)
    xv, yv = draw(rng, (12, 10), np.float32), draw(rng, (8, 10), np.float32)
    with Graph().as_default() as graph:
        x = placeholder("float32", [None, 10], name="x")
        y = placeholder("float32", [None, 10], name="y")
        z = ops.pairwise_manhattan(x, y, name="dist")
        assert tuple(z.shape) == (None, None)
        with Session(graph) as sess:
            out = sess.run(z, {x: xv, y: yv})
    np.testing.assert_allclose(out, reference(xv, yv), rtol=2e-5, atol=1e-5)


def test_strided_views_reach_the_kernel_as_copies():
    """The glue refuses strided arrays; the runtime copies the views it is handed or made itself
    (a transposed feed, a transpose node) so a user never meets that refusal through ops."""
    rng = np.random.default_rng(11)
    xt, yv = draw(rng, (6, 9), np.float32), draw(rng, (4, 6), np.float32)
    expected = reference(np.ascontiguousarray(xt.T), yv)
    kernel = load_kernel(load_registry().get("pairwise_manhattan"), "cpu")
    with pytest.raises(ValueError, match="not C-contiguous"):
        kernel(xt.T, yv)
    np.testing.assert_allclose(ops.pairwise_manhattan(xt.T, yv), expected, rtol=2e-5, atol=1e-5)
    with Graph().as_default() as graph:
        x = placeholder("float32", [6, 9], name="x")
        z = ops.pairwise_manhattan(ops.transpose(x), yv, name="dist")
        with Session(graph) as sess:
            out = sess.run(z, {x: xt})
    np.testing.assert_allclose(out, expected, rtol=2e-5, atol=1e-5)


def test_a_graph_step_of_the_built_kernel_leaves_the_checks_to_its_glue(monkeypatch, host_default):
    """On open shapes the step calls the glue at once (no inference in Python first), and a
    mismatch still reads as the inference's error, naming the node."""
    import opsdk.registry as registry_module
    graph = Graph()
    with graph.as_default():
        x = placeholder("float32", [None, None], name="x")
        y = placeholder("float32", [None, None], name="y")
        dist = ops.pairwise_manhattan(x, y, name="dist")
    checks = []
    real = registry_module.infer_outputs
    monkeypatch.setattr(registry_module, "infer_outputs",
                        lambda spec, *args: checks.append(spec.name) or real(spec, *args))
    with Session(graph) as sess:
        assert sess.plan_for([dist], (x, y)).program.kernel[dist.op].kind == "cpu"
        got = sess.run(dist, {x: np.zeros((3, 4), np.float32), y: np.ones((2, 4), np.float32)})
        np.testing.assert_array_equal(got, np.full((3, 2), 4.0))
        for _ in range(2):
            with pytest.raises(OpError, match=r"^pairwise_manhattan \(node 'dist'\): input 'y' has "
                                              r"5 columns but x has 4 \(dim p\)$"):
                sess.run(dist, {x: np.zeros((3, 4), np.float32), y: np.zeros((2, 5), np.float32)})
    assert checks == []


# The forward's two forms (opdefs/pairwise_manhattan_cpu.cc): with AVX-512 a call of 192 rows or
# more packs y's columns k-major and runs outer-product tiles over whole tiles of columns, the
# columns left over through the reducing tiles; fewer rows, or no AVX-512, run the reducing tiles
# alone. The shapes straddle the rows' threshold, leave columns over, and block k.
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, m, p", [(191, 200, 256), (192, 64, 256), (193, 65, 257),
                                     (200, 513, 600), (300, 1000, 31), (197, 130, 1), (256, 32, 5)])
def test_both_forms_of_the_forward_match_numpy(dtype, n, m, p):
    rng = np.random.default_rng(n * 1000 + m + p)
    x, y = draw(rng, (n, p), dtype), draw(rng, (m, p), dtype)
    out = load_kernel(load_registry().get("pairwise_manhattan"), "cpu")(x, y)
    np.testing.assert_allclose(out, reference(x, y), rtol=4e-6 if dtype == np.float32 else 1e-13)


def test_the_packed_forward_keeps_nan_and_inf():
    rng = np.random.default_rng(17)
    x, y = draw(rng, (200, 70), np.float32), draw(rng, (90, 70), np.float32)
    x[3, 5], y[7, 9], x[10, 9] = np.nan, np.inf, np.inf
    out = load_kernel(load_registry().get("pairwise_manhattan"), "cpu")(x, y)
    with np.errstate(invalid="ignore"):
        expected = reference(x, y)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(out[finite], expected[finite], rtol=4e-6)


@pytest.mark.parametrize("n", [20, 300])  # the reducing tiles alone; packed where AVX-512 is
def test_the_forward_has_the_same_bits_on_one_thread_and_on_two(n):
    """Threads split the rows; neither form's sums depend on where a thread's rows begin."""
    from opsdk import SessionConfig
    rng = np.random.default_rng(n)
    x, y = draw(rng, (n, 256), np.float32), draw(rng, (777, 256), np.float32)
    with Graph().as_default() as graph:
        xp = placeholder("float32", [None, 256], name="x")
        z = ops.pairwise_manhattan(xp, y, name="dist")
        results = []
        for threads in (1, 2):
            with Session(graph, SessionConfig(intra_op_threads=threads)) as sess:
                results.append(sess.run(z, {xp: x}))
    np.testing.assert_array_equal(results[0], results[1])
