"""The gemm op (opdefs/builtin/gemm_cpu.cc) and the host products of matmul and matmul_grad that
run on it (opsdk/runtime/kernels/host_blas.py): one panel of c per thread, a single-threaded
OpenBLAS gemm on each, the OpenMP pool of every other compiled kernel instead of NumPy's BLAS
threads; products with a short side on the register-tiled product (opdefs/builtin/gemm_tiles.h).

Checked: every transpose and both dtypes against NumPy, on sizes that split into panels by
columns and by rows, with tails of a 16-wide block, one row, and empty sides, and on sizes that
reach every part of the tiled product's blocking; the contracted sizes' error; the tiled product
the kernel runs for every product where OpenBLAS is not loaded (with panels as wide as a short
side, and panels read in place); which products take the path
and which stay with NumPy; and that loading the library leaves NumPy's BLAS threads alone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk import ops
from opsdk.registry import load_registry
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.kernels import host_blas
from opsdk.runtime.kernels.choice import choose_kernel

REGISTRY = load_registry()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (m, n, k): c is m x n. The comment names what each reaches.
SIZES = [
    (300, 200, 150),   # m > n: panels of rows; 300 = 18 blocks of 16 and 12
    (50, 1024, 313),   # panels of columns (the deep-MNIST fc layer's shape), k odd
    (64, 64, 64),      # whole blocks both ways, a tie (by columns)
    (1, 700, 33),      # one row
    (700, 1, 33),      # one column
    (17, 33, 1),       # k = 1, tails of a block
    (5, 7, 0),         # an empty sum: zeros
    (0, 9, 4),         # no rows
    # the tiled product (a side of 64 or fewer): b packed in blocks of 512 columns and chunks of
    # 256 contracted values, with tails of both; b's rows broadcast in blocks of 256 (transpose_b)
    (50, 1100, 600),
    (300, 530, 40),    # k short: a's rows broadcast in blocks of 256, a tail of a 6-row tile
    (7, 129, 300),     # one 6-row tile and a row; two 64-column panels and one column
    (1100, 1030, 40),  # k short but c over 4 MB: OpenBLAS again, in panels of rows
    # panels as wide as a short side (transpose_b packs op(a)^T, m columns): 2 vectors of float32
    # and 3 of float64; 2 and 3; 3 and 4 (the most). Few rows read b's panels in place, the last,
    # narrower one packed; 60 rows x 1200 contracted values are over the in-place limit
    (32, 520, 200),
    (20, 300, 70),
    (40, 70, 130),
    (60, 130, 1200),
]


def _python(code: str, **env: str) -> str:
    """What `code` prints, run in a process of its own (from the checkout, `env` added)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _operands(rng, m, n, k, ta, tb, dtype):
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    return a, b, (a.T if ta else a) @ (b.T if tb else b)


def test_the_cpu_kernel_is_built_and_the_blas_loads():
    assert choose_kernel(REGISTRY.get("gemm")).kind == "cpu", "run `opsdk build`"
    assert host_blas.blas_problem() is None


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-4), (np.float64, 1e-12)])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("m,n,k", SIZES)
def test_gemm_agrees_with_numpy(m, n, k, ta, tb, dtype, tol):
    rng = np.random.default_rng(m * 7 + n * 3 + k + ta * 2 + tb)
    a, b, want = _operands(rng, m, n, k, ta, tb, dtype)
    got = ops.gemm(a, b, transpose_a=ta, transpose_b=tb)
    assert got.dtype == dtype and got.shape == (m, n)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(k, 1))


def test_contracted_sizes_that_disagree_are_an_error_naming_them():
    a, b = np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)
    with pytest.raises(OpsdkError, match=r"gemm: op\(a\) is 2 x 3 but op\(b\) is 4 x 5"):
        ops.gemm(a, b)
    # The message gives the sizes after the transposes.
    with pytest.raises(OpsdkError, match=r"op\(a\) is 3 x 2 but op\(b\) is 4 x 5"):
        ops.gemm(a, b, transpose_a=1)


def test_without_openblas_loaded_the_kernel_runs_its_tiled_product():
    """In a process that never loads the library (nothing calls host_blas), the kernel finds no
    CBLAS function and computes every product with the tiled one (gemm_tiles.h): same values."""
    code = textwrap.dedent(f"""
        import ctypes, numpy as np
        from opsdk import ops
        rng = np.random.default_rng(3)
        for m, n, k in {SIZES + [(40, 90, 70), (130, 150, 170)]!r}:
            for ta in (0, 1):
                for tb in (0, 1):
                    for dtype in (np.float32, np.float64):
                        a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
                        b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
                        want = (a.T if ta else a) @ (b.T if tb else b)
                        got = ops.gemm(a, b, transpose_a=ta, transpose_b=tb)
                        tol = 1e-4 if dtype == np.float32 else 1e-12
                        assert got.dtype == dtype and got.shape == (m, n)
                        assert np.allclose(got, want, rtol=tol, atol=tol * max(k, 1)), (m, n, k, ta, tb)
        try:
            ctypes.CDLL(None).scipy_cblas_dgemm
            print("loaded")
        except AttributeError:
            print("tiled")
    """)
    assert _python(code) == "tiled"


def test_which_products_take_the_host_path():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((128, 128)).astype(np.float32)  # 4.2 MFLOP
    assert host_blas.product(big, big) is not None
    assert host_blas.product(big[:8, :8], big[:8, :8]) is None                  # small
    assert host_blas.product(big.astype(np.int32), big.astype(np.int32)) is None  # not a float
    assert host_blas.product(big, big.astype(np.float64)) is None               # two dtypes
    assert host_blas.product(big[None], big[None]) is None                      # a batch
    assert host_blas.product(big[:, :100], big) is None                         # NumPy's error


def test_a_transposed_view_flips_the_flag_instead_of_copying(monkeypatch):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((96, 200))
    b = rng.standard_normal((150, 96))
    seen = []
    real = host_blas._gemm_call

    def spy(dtype, ta, tb):
        call = real(dtype, ta, tb)
        return lambda values: (seen.append((ta, tb, [v.flags.c_contiguous for v in values])),
                               call(values))[1]
    monkeypatch.setattr(host_blas, "_gemm_call", spy)
    got = host_blas.product(a.T, b.T)  # (200 x 96) @ (96 x 150), both F-contiguous views
    np.testing.assert_allclose(got, a.T @ b.T, rtol=1e-12)
    assert seen == [(True, True, [True, True])]


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-4), (np.float64, 1e-11)])
def test_matmul_and_its_gradients_run_on_the_host_path(monkeypatch, dtype, tol):
    """A dense layer's three products in a session: each goes through host_blas (counted), and
    equals NumPy's."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 300)).astype(dtype)
    w = rng.standard_normal((300, 130)).astype(dtype)
    calls = []
    real = host_blas._gemm_call

    def counting(dt, ta, tb):
        call = real(dt, ta, tb)
        return lambda values: (calls.append((ta, tb)), call(values))[1]
    monkeypatch.setattr(host_blas, "_gemm_call", counting)
    g = tf.Graph()
    with g.as_default():
        xt = tf.placeholder(dtype, [64, 300])
        wt = tf.constant(w)
        y = tf.matmul(xt, wt)
        gx, gw = tf.gradients(tf.reduce_sum(y * y), [xt, wt])
    with tf.Session(graph=g) as s:
        y_, gx_, gw_ = s.run([y, gx, gw], {xt: x})
    want_y = x @ w
    np.testing.assert_allclose(y_, want_y, rtol=tol, atol=tol)
    np.testing.assert_allclose(gx_, (2 * want_y) @ w.T, rtol=tol, atol=tol * 100)
    np.testing.assert_allclose(gw_, x.T @ (2 * want_y), rtol=tol, atol=tol * 100)
    assert sorted(calls) == [(False, False), (False, True), (True, False)]


def test_loading_the_library_leaves_numpys_blas_threads_alone():
    code = textwrap.dedent("""
        from threadpoolctl import threadpool_info
        import numpy as np
        from opsdk.runtime.kernels import host_blas
        def numpys():
            return sorted((i["filepath"], i["num_threads"]) for i in threadpool_info()
                          if i["internal_api"] == "openblas" and "scipy_openblas32" not in i["filepath"])
        before = numpys()
        assert host_blas.blas_problem() is None
        assert numpys() == before, (before, numpys())
        ours = [i for i in threadpool_info() if "scipy_openblas32" in i["filepath"]]
        assert [i["num_threads"] for i in ours] == [1], ours
        print("ok")
    """)
    assert _python(code) == "ok"


def test_opsdk_host_gemm_0_sends_every_product_to_numpy():
    code = textwrap.dedent("""
        import numpy as np
        from opsdk.runtime.kernels import host_blas
        big = np.ones((128, 128), np.float32)
        print(host_blas.product(big, big) is None)
    """)
    for value, want in (("0", "True"), ("1", "False")):
        assert _python(code, OPSDK_HOST_GEMM=value) == want, value


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-4), (np.float64, 1e-12)])
@pytest.mark.parametrize("shape,bias", [((50, 28, 28, 32), (32,)), ((2000, 7, 64), (7, 64)),
                                        ((3, 5, 4), (5, 4)), ((600, 3000), (1, 3000))])
def test_a_bias_gradient_sums_rows_on_the_host_path(monkeypatch, shape, bias, dtype, tol):
    """add's gradient for a bias of trailing axes: the sum over the leading axes, as the product
    ones @ rows where it is large enough (counted), else NumPy's sum; equal either way. A bias
    with a leading 1 ([1, 3000]) reduces an axis of its own too: NumPy's sum."""
    from opdefs.builtin.kernels_math import add_grad
    calls = []
    real = host_blas._gemm_call

    def counting(dt, ta, tb):
        call = real(dt, ta, tb)
        return lambda values: (calls.append(values[0].shape), call(values))[1]
    monkeypatch.setattr(host_blas, "_gemm_call", counting)
    rng = np.random.default_rng(len(shape))
    grad = rng.standard_normal(shape).astype(dtype)
    x, b = np.zeros(shape, dtype), np.zeros(bias, dtype)
    gx, gb = add_grad(np, x, b, grad)
    want = grad.astype(np.float64).reshape(-1, int(np.prod(bias))).sum(0).reshape(bias)
    assert gx is grad and gb.shape == bias and gb.dtype == dtype
    np.testing.assert_allclose(gb, want, rtol=tol, atol=tol * np.sqrt(grad.size / np.prod(bias)))
    rows = grad.size // int(np.prod(bias))
    on_path = bias[0] != 1 and 2 * grad.size >= host_blas.MIN_FLOPS
    assert calls == ([(1, rows)] if on_path else [])
