"""Python kernels of the linear-algebra builtin ops and their gradients (linalg.yaml).

Matrices are the last two dims of an input, batched over the leading ones, which NumPy's linalg
functions (and CuPy's, on a GPU) take as they are. Real matrices only, so an adjoint is the
transpose of the last two dims. Where LAPACK refuses a matrix (singular, not positive definite),
the call fails with a ValueError that names the op, the input and, in a batch, which matrix.
"""

from __future__ import annotations

import contextlib

import numpy as np


def _t(xp, a):
    """The transpose of each matrix of a (a view)."""
    return xp.swapaxes(a, -1, -2)


def _linalg_errors(xp):
    """Where a refused matrix raises LinAlgError: NumPy always does; CuPy only when asked (it then
    waits for the device to read the solver's status)."""
    if getattr(xp, "__name__", "") == "cupy":
        import cupyx

        return cupyx.errstate(linalg="raise")
    return contextlib.nullcontext()


def _refused(fn, arrays) -> bool:
    try:
        fn(*arrays)
    except np.linalg.LinAlgError:
        return True
    return False


def _which_matrix(fn, arrays, name) -> str:
    """` (matrix x[1, 0])`: the first matrix of the batch that fn refuses, found by halving the
    flattened batch (a few batched calls, on the error path only); '' for a single matrix."""
    batch = arrays[0].shape[:-2]
    if not batch:
        return ""
    count = int(np.prod(batch, dtype=np.int64))
    flat = [a.reshape((count,) + a.shape[len(batch):]) for a in arrays]
    lo, hi = 0, count
    while hi - lo > 1:  # the first refused matrix lies in [lo, hi)
        mid = (lo + hi) // 2
        if _refused(fn, [a[lo:mid] for a in flat]):
            hi = mid
        else:
            lo = mid
    index = ", ".join(str(int(i)) for i in np.unravel_index(lo, batch))
    return f" (matrix {name}[{index}])"


def _checked(op, xp, fn, arrays, name, problem):
    """fn(*arrays), or a ValueError `op: input 'name' <problem>` naming the matrix it refused."""
    with _linalg_errors(xp):
        try:
            return fn(*arrays)
        except np.linalg.LinAlgError:
            pass
        where = _which_matrix(fn, arrays, name)
    raise ValueError(f"{op}: input '{name}' {problem.format(where=where)}")


# ---- inverse, determinant --------------------------------------------------------------------

def matrix_inverse(xp, x, adjoint):
    a = _t(xp, x) if adjoint else x
    return _checked("matrix_inverse", xp, xp.linalg.inv, [a], "x",
                    "is singular{where}; it has no inverse")


def matrix_inverse_grad(xp, x, y, grad_y, adjoint):
    # y = inv(a) for a = x (x^T with adjoint): grad_a = -y^T grad_y y^T, and grad_x its transpose
    # with adjoint.
    yt = _t(xp, y)
    grad_a = -xp.matmul(xp.matmul(yt, grad_y), yt)
    return _t(xp, grad_a) if adjoint else grad_a


def matrix_determinant(xp, x):
    return xp.asarray(xp.linalg.det(x))  # a 0-d array for one matrix, not a NumPy scalar


def _cofactors(xp, x):
    """The cofactor matrix of each matrix of x (det(x) inv(x)^T where x is invertible), from the
    SVD x = U S V^T: det(U) det(V) U diag(prod_{j != i} s_j) V^T, which holds for singular x too."""
    u, s, vt = xp.linalg.svd(x)
    ones = xp.ones(s.shape[:-1] + (1,), dtype=s.dtype)
    # prod_{j < i} s_j and prod_{j > i} s_j: exclusive running products, no division by s_i
    before = xp.cumprod(xp.concatenate([ones, s[..., :-1]], axis=-1), axis=-1)
    after = xp.flip(xp.cumprod(xp.concatenate([ones, xp.flip(s, axis=-1)[..., :-1]], axis=-1),
                               axis=-1), axis=-1)
    sign = xp.linalg.det(u) * xp.linalg.det(vt)  # each +-1
    scaled = u * xp.expand_dims(before * after, -2)  # column i of u times prod_{j != i} s_j
    return xp.expand_dims(xp.asarray(sign), (-2, -1)) * xp.matmul(scaled, vt)


def matrix_determinant_grad(xp, x, y, grad_y):
    grad = xp.expand_dims(xp.asarray(grad_y), (-2, -1))
    if x.shape[-1] == 0:
        return xp.zeros_like(x)
    with _linalg_errors(xp):
        try:
            inverse = xp.linalg.inv(x)
        except np.linalg.LinAlgError:  # a singular matrix in the batch
            inverse = None
    # det(x) inv(x)^T, unless some matrix has no inverse, or one that overflows (a tiny det times
    # an infinite inverse); then the cofactors without an inverse. (A NaN or infinity in x itself
    # is passed on as the inverse gives it.)
    if inverse is None or (not bool(xp.all(xp.isfinite(inverse)))
                           and bool(xp.all(xp.isfinite(x)))):
        return xp.asarray(grad * _cofactors(xp, x), dtype=x.dtype)
    return grad * xp.expand_dims(xp.asarray(y), (-2, -1)) * _t(xp, inverse)


# ---- Cholesky --------------------------------------------------------------------------------

def cholesky(xp, x):
    # x's symmetric part, exactly x for a symmetric x ((a + a) * 0.5 == a): what the gradient,
    # which is symmetric, is the derivative of.
    s = (x + _t(xp, x)) * x.dtype.type(0.5)
    return _checked("cholesky", xp, xp.linalg.cholesky, [s], "x",
                    "is not positive definite{where}; the Cholesky factor needs a symmetric "
                    "positive definite matrix")


def cholesky_grad(xp, x, y, grad_y):
    # With x = l l^T: grad_x = sym(l^-T Phi(l^T grad_y) l^-1), Phi the lower triangle with the
    # diagonal halved. l^-T m is a solve with l^T; m l^-1 = (l^-T m^T)^T another.
    n = y.shape[-1]
    lt = _t(xp, y)
    phi = xp.tril(xp.matmul(lt, grad_y)) * (1 - 0.5 * xp.eye(n, dtype=y.dtype))
    left = _checked("cholesky_grad", xp, xp.linalg.solve, [lt, phi], "y",
                    "is singular{where}; it is not a Cholesky factor")
    s = _t(xp, xp.linalg.solve(lt, _t(xp, left)))
    return (s + _t(xp, s)) * y.dtype.type(0.5)


# ---- solves ----------------------------------------------------------------------------------

def matrix_solve(xp, matrix, rhs, adjoint):
    a = _t(xp, matrix) if adjoint else matrix
    return _checked("matrix_solve", xp, xp.linalg.solve, [a, rhs], "matrix",
                    "is singular{where}; the system has no unique solution")


def matrix_solve_grad(xp, matrix, rhs, y, grad_y, adjoint):
    # grad_rhs solves the transposed system; grad_matrix = -grad_rhs y^T (-y grad_rhs^T with
    # adjoint, the transpose of the gradient of matrix^T).
    a = matrix if adjoint else _t(xp, matrix)
    grad_rhs = _checked("matrix_solve_grad", xp, xp.linalg.solve, [a, grad_y], "matrix",
                        "is singular{where}; the system has no unique solution")
    if adjoint:
        return -xp.matmul(y, _t(xp, grad_rhs)), grad_rhs
    return -xp.matmul(grad_rhs, _t(xp, y)), grad_rhs


def _triangle(xp, matrix, lower):
    return xp.tril(matrix) if lower else xp.triu(matrix)


def _triangular_solve(op, xp, matrix, rhs, lower, adjoint):
    t = _triangle(xp, matrix, lower)
    # A triangle is singular exactly where its diagonal holds a 0. Checked here: LAPACK's pivoting
    # solve would meet a rounding residue there instead of 0, and return garbage without error.
    singular = xp.any(xp.diagonal(matrix, axis1=-2, axis2=-1) == 0, axis=-1)
    if bool(xp.any(singular)):
        flags = getattr(xp, "asnumpy", np.asarray)(singular)
        where = ""
        if flags.ndim:
            index = ", ".join(str(int(i)) for i in np.argwhere(flags)[0])
            where = f" (matrix matrix[{index}])"
        side = "lower" if lower else "upper"
        raise ValueError(f"{op}: input 'matrix' has a zero on the diagonal of its {side} "
                         f"triangle{where}; the system has no unique solution")
    return _checked(op, xp, xp.linalg.solve, [_t(xp, t) if adjoint else t, rhs], "matrix",
                    "is singular{where}; the system has no unique solution")


def matrix_triangular_solve(xp, matrix, rhs, lower, adjoint):
    return _triangular_solve("matrix_triangular_solve", xp, matrix, rhs, lower, adjoint)


def matrix_triangular_solve_grad(xp, matrix, rhs, y, grad_y, lower, adjoint):
    # As matrix_solve_grad's, with the triangle for the matrix; the other triangle is not read,
    # so its gradient is 0.
    grad_rhs = _triangular_solve("matrix_triangular_solve_grad", xp, matrix, grad_y, lower,
                                 not adjoint)
    if adjoint:
        grad_t = -xp.matmul(y, _t(xp, grad_rhs))
    else:
        grad_t = -xp.matmul(grad_rhs, _t(xp, y))
    return _triangle(xp, grad_t, lower), grad_rhs


# ---- decompositions: eigenvalues, SVD, QR ----------------------------------------------------

def _column_signs(xp, a):
    """[..., 1, k]: per column of each matrix of a, the sign (+1 or -1) of its entry of largest
    magnitude (the first such entry on a tie; +1 for a column of zeros or no rows)."""
    if a.shape[-2] == 0:
        return xp.ones(a.shape[:-2] + (1, a.shape[-1]), dtype=a.dtype)
    biggest = xp.take_along_axis(a, xp.expand_dims(xp.argmax(xp.abs(a), axis=-2), -2), axis=-2)
    return xp.where(biggest < 0, -1, 1).astype(a.dtype)


def _nan_where_not_finite(xp, x, fn):
    """fn(x) (a tuple of arrays batched like x), the outputs of each matrix of x that holds a NaN
    or an infinity set to NaN: LAPACK returns garbage for such a matrix (eigh) or fails the whole
    batch (svd). The others are computed from x with those matrices zeroed."""
    bad = xp.logical_not(xp.all(xp.isfinite(x), axis=(-2, -1)))
    if not bool(xp.any(bad)):
        return fn(x)
    outs = fn(xp.where(xp.expand_dims(bad, (-2, -1)), 0, x))
    return tuple(xp.where(xp.reshape(bad, bad.shape + (1,) * (o.ndim - bad.ndim)), xp.nan, o)
                 for o in outs)


def _safe_reciprocal(xp, d):
    """1 / d where d is not (nearly) 0, else 0: d / (d^2 + 1e-20), as TensorFlow's gradients of
    eigh and svd take it, so that equal eigenvalues (singular values) give no infinite terms."""
    return d / (d * d + 1e-20)


def _diag(xp, d):
    """[..., k] -> [..., k, k]: each vector of d on a diagonal."""
    return xp.expand_dims(d, -2) * xp.eye(d.shape[-1], dtype=d.dtype)


def self_adjoint_eig(xp, x):
    # x's symmetric part, exactly x for a symmetric x, as cholesky reads it. eigh's eigenvalues
    # come ascending; each eigenvector's sign is fixed (its largest entry positive), so v is a
    # function of x that finite differences (and another device's solver) reproduce.
    s = (x + _t(xp, x)) * x.dtype.type(0.5)

    def eig(a):
        e, v = _checked("self_adjoint_eig", xp, xp.linalg.eigh, [a], "x",
                        "has no eigendecomposition{where}: LAPACK's iteration did not converge")
        return e, v * _column_signs(xp, v)

    return _nan_where_not_finite(xp, s, eig)


def self_adjoint_eig_grad(xp, x, e, v, grad_e, grad_v):
    # With f[i, j] = 1 / (e_j - e_i) off the diagonal (0 on it, and where two eigenvalues are
    # equal): g = v (diag(grad_e) + f * (v^T grad_v)) v^T is the gradient for symmetric
    # perturbations; x's symmetric part is what the forward op reads, so grad_x = (g + g^T) / 2.
    f = _safe_reciprocal(xp, xp.expand_dims(e, -2) - xp.expand_dims(e, -1))
    inner = f * xp.matmul(_t(xp, v), grad_v) + _diag(xp, grad_e)
    g = xp.matmul(xp.matmul(v, inner), _t(xp, v))
    return (g + _t(xp, g)) * x.dtype.type(0.5)


def _svd(op, xp, a, full_matrices):
    """(s, u, v) of each matrix of a (x = u diag(s) v^T), signs fixed: each column of u has its
    entry of largest magnitude positive, and v's paired column (of the first min(m, n)) goes with
    it, x staying u diag(s) v^T; the columns of v with no singular value (full_matrices, n > m)
    have their own largest entry positive."""
    u, s, vt = _checked(op, xp, lambda m: xp.linalg.svd(m, full_matrices=full_matrices), [a],
                        "x", "has no singular value decomposition{where}: LAPACK's iteration did "
                        "not converge")
    v = _t(xp, vt)
    k = s.shape[-1]
    signs_u = _column_signs(xp, u)
    signs_v = xp.concatenate([signs_u[..., :k], _column_signs(xp, v[..., k:])], axis=-1)
    return s, u * signs_u, v * signs_v


def svd(xp, x, full_matrices, compute_uv):
    if not compute_uv:
        empty = xp.zeros(x.shape[:-2] + (0, 0), dtype=x.dtype)
        (s,) = _nan_where_not_finite(xp, x, lambda a: (_checked(
            "svd", xp, lambda m: xp.linalg.svd(m, compute_uv=False), [a], "x",
            "has no singular value decomposition{where}: LAPACK's iteration did not converge"),))
        return s, empty, empty
    return _nan_where_not_finite(xp, x, lambda a: _svd("svd", xp, a, full_matrices))


def svd_grad(xp, x, s, u, v, grad_s, grad_u, grad_v, full_matrices, compute_uv):
    m, n = x.shape[-2], x.shape[-1]
    if not compute_uv:
        # only s was computed: d s_i = u_i^T dx v_i, from a decomposition made here (its signs do
        # not matter: u_i and v_i flip together)
        _, u, v = _nan_where_not_finite(xp, x, lambda a: _svd("svd_grad", xp, a, False))
        return xp.matmul(u * xp.expand_dims(grad_s, -2), _t(xp, v))
    if full_matrices and m != n:
        raise ValueError(f"svd_grad: full_matrices=true with {m} x {n} matrices (m != n) has no "
                         "gradient: the columns of u or v beyond min(m, n) are any orthonormal "
                         "basis of the rest of the space; differentiate svd with "
                         "full_matrices=false")
    # The reduced SVD's gradient (u: m x k, v: n x k; full_matrices with m == n is the same), with
    # f[i, j] = 1 / (s_j^2 - s_i^2) off the diagonal, 0 on it (1 / d as d / (d^2 + 1e-20)):
    # u (diag(grad_s) + (f * (u^T grad_u - grad_u^T u)) s + s (f * (v^T grad_v - grad_v^T v))) v^T
    # + (I - u u^T) grad_u s^-1 v^T + u s^-1 grad_v^T (I - v v^T); the last two vanish where u
    # (or v) is square.
    s2 = s * s
    f = _safe_reciprocal(xp, xp.expand_dims(s2, -2) - xp.expand_dims(s2, -1))
    ut_gu = xp.matmul(_t(xp, u), grad_u)
    vt_gv = xp.matmul(_t(xp, v), grad_v)
    s_row = xp.expand_dims(s, -2)  # a * s_row scales a's columns (a S), s_col * a its rows
    s_col = xp.expand_dims(s, -1)
    inner = (_diag(xp, grad_s) + (f * (ut_gu - _t(xp, ut_gu))) * s_row
             + s_col * (f * (vt_gv - _t(xp, vt_gv))))
    grad_x = xp.matmul(xp.matmul(u, inner), _t(xp, v))
    s_inv = xp.expand_dims(_safe_reciprocal(xp, s), -2)
    if m > s.shape[-1]:
        rest = grad_u - xp.matmul(u, ut_gu)  # (I - u u^T) grad_u
        grad_x = grad_x + xp.matmul(rest * s_inv, _t(xp, v))
    if n > s.shape[-1]:
        rest = grad_v - xp.matmul(v, vt_gv)  # (I - v v^T) grad_v
        grad_x = grad_x + xp.matmul(u * s_inv, _t(xp, rest))
    return grad_x


def qr(xp, x, full_matrices):
    # LAPACK's Householder QR, with each of the first k = min(m, n) columns of q and rows of r
    # flipped where r's diagonal is negative: r's diagonal >= 0 makes (q, r) unique for x of
    # full rank, and a function of x without LAPACK's sign jumps (at triangular x, say). q's
    # columns beyond k (full_matrices, m > n) are LAPACK's; r's rows beyond k are zero.
    q, r = xp.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    diagonal = xp.diagonal(r, axis1=-2, axis2=-1)
    rest = xp.ones(r.shape[:-2] + (r.shape[-2] - diagonal.shape[-1],), dtype=r.dtype)
    signs = xp.concatenate([xp.where(diagonal < 0, -1, 1).astype(r.dtype), rest], axis=-1)
    return q * xp.expand_dims(signs, -2), r * xp.expand_dims(signs, -1)


def _times_inverse_transpose(xp, z, r):
    """z r^-T for the square upper-triangular r of a QR decomposition: the transposed solve."""
    return _t(xp, _checked("qr_grad", xp, xp.linalg.solve, [r, _t(xp, z)], "r",
                           "is singular{where}: x's rank is below min(m, n) there, where q and "
                           "r have no gradient"))


def _qr_grad_tall(xp, q, r, grad_q, grad_r):
    # m >= n, q: m x n, r: n x n. With M = tril(q^T grad_q - grad_q^T q + r grad_r^T -
    # grad_r r^T): grad_x = q grad_r + (q M + grad_q - q q^T grad_q) r^-T.
    qt_gq = xp.matmul(_t(xp, q), grad_q)
    r_gr = xp.matmul(r, _t(xp, grad_r))
    lower = xp.tril(qt_gq - _t(xp, qt_gq) + r_gr - _t(xp, r_gr))
    z = xp.matmul(q, lower) + grad_q - xp.matmul(q, qt_gq)
    return xp.matmul(q, grad_r) + _times_inverse_transpose(xp, z, r)


def qr_grad(xp, x, q, r, grad_q, grad_r, full_matrices):
    m, n = x.shape[-2], x.shape[-1]
    if full_matrices and m > n:
        raise ValueError(f"qr_grad: full_matrices=true with {m} x {n} matrices (m > n) has no "
                         "gradient: q's columns beyond n are any orthonormal basis of the rest "
                         "of the space; differentiate qr with full_matrices=false")
    if m >= n:
        return _qr_grad_tall(xp, q, r, grad_q, grad_r)
    # m < n: x = [x1 | y] with x1 m x m, r = [r1 | w]: x1 = q r1 is a square QR, and w = q^T y,
    # so y's gradient is q grad_w and grad_q gains y grad_w^T.
    y, r1 = x[..., :, m:], r[..., :, :m]
    grad_w = grad_r[..., :, m:]
    grad_x1 = _qr_grad_tall(xp, q, r1, grad_q + xp.matmul(y, _t(xp, grad_w)), grad_r[..., :, :m])
    return xp.concatenate([grad_x1, xp.matmul(q, grad_w)], axis=-1)
