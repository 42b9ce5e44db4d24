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
