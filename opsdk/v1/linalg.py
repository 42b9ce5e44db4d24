"""TF1's linear algebra and segment sums over opsdk's builtin ops.

The decompositions and solvers are builtin ops with their own gradients (opdefs/builtin/
linalg.yaml: `matrix_inverse`, `matrix_determinant`, `cholesky`, `matrix_solve`,
`matrix_triangular_solve`, `self_adjoint_eig`, `svd`, `qr`); so are the segment sums
(opdefs/builtin/segment.yaml). Where an eigenvector's or a singular vector's sign (or the signs
in a QR decomposition) is free, the ops fix it, as their declarations say. The rest is made of
elementwise ops, reductions and masks, as TensorFlow's own Python defines several of them, so
gradients flow through it as through the ops it is made of: `diag` and `diag_part`,
`matrix_diag`, `matrix_diag_part`, `matrix_set_diag`, `matrix_band_part`, `trace`,
`matrix_transpose`, `cross`, `logdet`, and the segment means. Each works batched over leading
axes where TF's does, and takes sizes known only at run time.
"""

from __future__ import annotations

from typing import Any, Optional


from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import args
from opsdk.v1 import math_ops as _m
from opsdk.v1.tensors import convert_to_tensor as _t


def _matrices(who: str, x: Any, square: bool = True) -> Any:
    x = _t(x)
    if x.shape is not None and len(x.shape) < 2:
        raise OpsdkError(f"{who}: '{x.name}' must have rank >= 2 (matrices in its last two "
                         f"axes), got shape {list(x.shape)}")
    if square and x.shape is not None and None not in x.shape[-2:] and x.shape[-1] != x.shape[-2]:
        raise OpsdkError(f"{who}: '{x.name}' must hold square matrices, got shape "
                         f"{list(x.shape)}")
    return x


def _floats(who: str, x: Any) -> Any:
    if not x.dtype.is_floating:
        raise OpsdkError(f"{who}: '{x.name}' is {x.dtype}; give float32 or float64 matrices")
    return x


def matrix_inverse(input: Any, adjoint: bool = False, name: Optional[str] = None) -> Any:  # noqa: A002
    """The inverse of each square matrix of input's last two axes (of its transpose with
    `adjoint`); a singular matrix fails the step."""
    x = _floats("matrix_inverse", _matrices("matrix_inverse", input))
    return _ops.matrix_inverse(x, adjoint=bool(adjoint), name=name)


def matrix_determinant(input: Any, name: Optional[str] = None) -> Any:  # noqa: A002
    """The determinant of each square matrix of input's last two axes."""
    x = _floats("matrix_determinant", _matrices("matrix_determinant", input))
    return _ops.matrix_determinant(x, name=name)


def cholesky(input: Any, name: Optional[str] = None) -> Any:  # noqa: A002
    """The lower-triangular L with L L^T = input, per matrix (symmetric positive definite; a
    matrix that is not fails the step)."""
    x = _floats("cholesky", _matrices("cholesky", input))
    return _ops.cholesky(x, name=name)


def matrix_solve(matrix: Any, rhs: Any, adjoint: bool = False, name: Optional[str] = None) -> Any:
    """X with matrix @ X = rhs (matrix^T @ X with `adjoint`), per matrix of the batch."""
    a = _floats("matrix_solve", _matrices("matrix_solve", matrix))
    return _ops.matrix_solve(a, _matrices("matrix_solve", rhs, square=False),
                             adjoint=bool(adjoint), name=name)


def matrix_triangular_solve(matrix: Any, rhs: Any, lower: bool = True, adjoint: bool = False,
                            name: Optional[str] = None) -> Any:
    """X with tri(matrix) @ X = rhs, where only the lower (or upper) triangle of matrix is
    read."""
    a = _floats("matrix_triangular_solve", _matrices("matrix_triangular_solve", matrix))
    return _ops.matrix_triangular_solve(a, _matrices("matrix_triangular_solve", rhs, square=False),
                                        lower=bool(lower), adjoint=bool(adjoint), name=name)


def cholesky_solve(chol: Any, rhs: Any, name: Optional[str] = None) -> Any:
    """X with A X = rhs, given A's Cholesky factor `chol` (two triangular solves)."""
    y = matrix_triangular_solve(chol, rhs, lower=True)
    return matrix_triangular_solve(chol, y, lower=True, adjoint=True, name=name)


def logdet(matrix: Any, name: Optional[str] = None) -> Any:
    """log(det(matrix)) of symmetric positive definite matrices: 2 sum(log(diag(cholesky)))."""
    chol = cholesky(matrix)
    return _ops.mul(_m.reduce_sum(_m.log(matrix_diag_part(chol)), axis=-1),
                    _m.cast(2.0, chol.dtype), name=name)


def self_adjoint_eig(tensor: Any, name: Optional[str] = None) -> tuple[Any, Any]:
    """(e, v): the eigenvalues of each symmetric matrix, ascending, and its unit eigenvectors as
    the columns of v. The matrix's symmetric part (x + x^T) / 2 is read (TF reads its lower
    triangle); each eigenvector's sign makes its entry of largest magnitude positive."""
    x = _floats("self_adjoint_eig", _matrices("self_adjoint_eig", tensor))
    e, v = _ops.self_adjoint_eig(x, name=name)
    return e, v


def self_adjoint_eigvals(tensor: Any, name: Optional[str] = None) -> Any:
    """The eigenvalues of each symmetric matrix, ascending (self_adjoint_eig's e)."""
    x = _floats("self_adjoint_eigvals", _matrices("self_adjoint_eigvals", tensor))
    return _ops.self_adjoint_eig(x, name=name)[0]


def svd(tensor: Any, full_matrices: bool = False, compute_uv: bool = True,
        name: Optional[str] = None) -> Any:
    """(s, u, v) of each matrix, tensor = u diag(s) v^T (v, not its transpose), singular values
    descending; s alone when `compute_uv` is false. u's columns have their largest entry
    positive, v's paired columns follow them. A gradient with `full_matrices` needs square
    matrices."""
    x = _floats("svd", _matrices("svd", tensor, square=False))
    s, u, v = _ops.svd(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv),
                       name=name)
    return (s, u, v) if compute_uv else s


def qr(input: Any, full_matrices: bool = False,  # noqa: A002
       name: Optional[str] = None) -> tuple[Any, Any]:
    """(q, r) of each matrix: input = q r, q with orthonormal columns, r upper-triangular with
    its diagonal >= 0 (TF's may be negative). A gradient with `full_matrices` needs m <= n."""
    x = _floats("qr", _matrices("qr", input, square=False))
    q, r = _ops.qr(x, full_matrices=bool(full_matrices), name=name)
    return q, r


# ---- compositions ------------------------------------------------------------------------------

def _size(x: Any, axis: int) -> Any:
    """x's size along `axis`: an int when known when the graph is built, else a scalar tensor."""
    known = x.shape[axis] if x.shape is not None else None
    if known is not None:
        return int(known)
    return _m.gather(_m.shape(x, out_type="int32"), axis % len(x.shape))


def _eye_mask(rows: Any, cols: Any, dtype: Any) -> Any:
    """[rows, cols] of dtype, 1 on the diagonal and 0 elsewhere (sizes may be tensors)."""
    r = _m.expand_dims(_m.range(0, rows), 1)
    c = _m.expand_dims(_m.range(0, cols), 0)
    return _m.cast(_m.equal(r, c), dtype)


def _known_rank(who: str, x: Any, at_least: int) -> int:
    if x.shape is None or len(x.shape) < at_least:
        raise OpsdkError(f"{who}: '{x.name}' needs a rank of at least {at_least} known when the "
                         f"graph is built, got shape {x.shape}")
    return len(x.shape)


def matrix_diag(diagonal: Any, name: Optional[str] = None) -> Any:
    """[..., n] -> [..., n, n]: each vector of the last axis on a diagonal, zeros elsewhere."""
    v = _t(diagonal)
    _known_rank("matrix_diag", v, 1)
    n = _size(v, -1)
    return _ops.mul(_m.expand_dims(v, -1), _eye_mask(n, n, v.dtype), name=name)


def matrix_diag_part(input: Any, name: Optional[str] = None) -> Any:  # noqa: A002
    """[..., m, n] -> [..., min(m, n)]: the main diagonal of each matrix."""
    x = _t(input)
    rank = _known_rank("matrix_diag_part", x, 2)
    m, n = _size(x, -2), _size(x, -1)
    if isinstance(m, int) and isinstance(n, int):
        k: Any = min(m, n)
        square = x if m == n else _ops.slice(x, begin=[0] * rank,
                                             size=[-1] * (rank - 2) + [k, k])
    else:
        from opsdk.v1.composed import slice_

        k = _m.minimum(m, n)
        sizes = [-1] * (rank - 2) + [k, k]
        square = slice_(x, [0] * rank, sizes)
    return _m.reduce_sum(_ops.mul(square, _eye_mask(k, k, x.dtype)), axis=-1, name=name)


def matrix_set_diag(input: Any, diagonal: Any, name: Optional[str] = None) -> Any:  # noqa: A002
    """input with the main diagonal of each (square) matrix replaced by `diagonal`."""
    x = _matrices("matrix_set_diag", input)
    _known_rank("matrix_set_diag", x, 2)
    n = _size(x, -1)
    mask = _eye_mask(n, n, x.dtype)
    kept = _ops.mul(x, _ops.sub(_m.cast(1, x.dtype), mask))
    return _ops.add(kept, matrix_diag(_m.cast(_t(diagonal), x.dtype)), name=name)


def matrix_band_part(input: Any, num_lower: Any, num_upper: Any,  # noqa: A002
                     name: Optional[str] = None) -> Any:
    """Each matrix with the entries outside its band set to 0: kept where i - j <= num_lower
    and j - i <= num_upper (a negative bound keeps that whole triangle); (-1, 0) is the lower
    triangle, (0, -1) the upper one, (0, 0) the diagonal."""
    x = _t(input)
    _known_rank("matrix_band_part", x, 2)
    rows = _m.expand_dims(_m.range(0, _size(x, -2)), 1)
    cols = _m.expand_dims(_m.range(0, _size(x, -1)), 0)
    from opsdk.v1.composed import logical_and, logical_or

    keep = None
    for arg, bound, distance in (("num_lower", num_lower, _ops.sub(rows, cols)),
                                 ("num_upper", num_upper, _ops.sub(cols, rows))):
        b = args.scalar("matrix_band_part", arg, bound)
        if not args.is_tensor(b) and b < 0:
            continue  # the whole triangle
        b = _m.cast(b, "int32") if args.is_tensor(b) else int(b)
        inside = _m.less_equal(distance, b)
        if args.is_tensor(b):
            inside = logical_or(inside, _m.less(b, 0))
        keep = inside if keep is None else logical_and(keep, inside)
    if keep is None:
        return _ops.identity(x, name=name)
    return _ops.mul(x, _m.cast(keep, x.dtype), name=name)


def trace(x: Any, name: Optional[str] = None) -> Any:
    """The sum of each matrix's main diagonal ([..., m, n] -> [...])."""
    return _m.reduce_sum(matrix_diag_part(x), axis=-1, name=name)


def matrix_transpose(a: Any, name: str = "matrix_transpose", conjugate: bool = False) -> Any:
    """Each matrix of a's last two axes transposed (real dtypes: `conjugate` changes nothing)."""
    x = _t(a)
    rank = _known_rank("matrix_transpose", x, 2)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return _ops.transpose(x, perm=perm, name=name)


def diag(diagonal: Any, name: Optional[str] = None) -> Any:
    """TF1's `tf.diag`: a tensor of rank k -> rank 2k, output[i..., i...] = diagonal[i...] and
    zeros elsewhere."""
    v = _t(diagonal)
    rank = _known_rank("diag", v, 1)
    if rank == 1:
        return matrix_diag(v, name=name)
    flat = matrix_diag(_ops.reshape(v, shape=[-1]))
    dims = _m.shape(v, out_type="int32")
    return _m.reshape(flat, _ops.concat([dims, dims], axis=0), name=name)


def diag_part(input: Any, name: Optional[str] = None) -> Any:  # noqa: A002
    """TF1's `tf.diag_part`, the inverse of `diag`: rank 2k -> rank k."""
    x = _t(input)
    rank = _known_rank("diag_part", x, 2)
    if rank % 2:
        raise OpsdkError(f"diag_part: '{x.name}' must have an even rank, got {rank}")
    half = rank // 2
    if rank == 2:
        return matrix_diag_part(x, name=name)
    dims = _m.shape(x, out_type="int32")
    lead = _ops.slice(dims, begin=[0], size=[half])
    m = _m.reduce_prod(lead)
    square = _m.reshape(x, _ops.stack([m, m], axis=0))
    return _m.reshape(matrix_diag_part(square), lead, name=name)


def cross(a: Any, b: Any, name: Optional[str] = None) -> Any:
    """The cross product of the 3-vectors of a's and b's last axes."""
    x, y = _t(a), _t(b)
    for t in (x, y):
        if t.shape is not None and t.shape and t.shape[-1] not in (None, 3):
            raise OpsdkError(f"cross: '{t.name}' must have 3 entries in its last axis, got shape "
                             f"{list(t.shape)}")
    x0, x1, x2 = (x[..., i] for i in range(3))
    y0, y1, y2 = (y[..., i] for i in range(3))
    return _ops.stack([_ops.sub(_ops.mul(x1, y2), _ops.mul(x2, y1)),
                       _ops.sub(_ops.mul(x2, y0), _ops.mul(x0, y2)),
                       _ops.sub(_ops.mul(x0, y1), _ops.mul(x1, y0))], axis=-1, name=name)


# ---- segments ----------------------------------------------------------------------------------

def _ids(who: str, segment_ids: Any) -> Any:
    ids = _t(segment_ids)
    if ids.dtype not in ("int32", "int64"):
        raise OpsdkError(f"{who}: segment_ids '{ids.name}' must be int32 or int64, got {ids.dtype}")
    return ids


def unsorted_segment_sum(data: Any, segment_ids: Any, num_segments: Any,
                         name: Optional[str] = None) -> Any:
    """output[s] = the sum of data's slices whose id is s, for s < num_segments (a slice with a
    negative id is dropped, an id past the last segment is an error, as TF's); segment_ids'
    shape is a prefix of data's."""
    n = args.static_int("unsorted_segment_sum", "num_segments", num_segments)
    return _ops.unsorted_segment_sum(_t(data), _ids("unsorted_segment_sum", segment_ids),
                                     num_segments=n, name=name)


def unsorted_segment_mean(data: Any, segment_ids: Any, num_segments: Any,
                          name: Optional[str] = None) -> Any:
    """The mean of each segment's slices (0 for an empty segment)."""
    return _scaled_sum("unsorted_segment_mean", data, segment_ids, num_segments, False, name)


def _scaled_sum(who: str, data: Any, segment_ids: Any, num_segments: Any, root: bool,
                name: Optional[str]) -> Any:
    """Each segment's sum divided by its number of slices (its square root with `root`)."""
    x = _t(data)
    ids = _ids(who, segment_ids)
    total = unsorted_segment_sum(x, ids, num_segments)
    count = _counts(unsorted_segment_sum(_ops.ones_like(_m.cast(ids, x.dtype)), ids,
                                         num_segments), total)
    return _ops.div(total, _ops.sqrt(count) if root else count, name=name)


def segment_sum(data: Any, segment_ids: Any, name: Optional[str] = None) -> Any:
    """output[s] = the sum of data's rows whose id is s, for sorted ids (>= 0) of data's first
    axis; the output has ids[-1] + 1 rows (known when the step runs)."""
    ids = _ids("segment_sum", segment_ids)
    if ids.shape is not None and len(ids.shape) != 1:
        raise OpsdkError(f"segment_sum: segment_ids '{ids.name}' must be 1-d, got shape "
                         f"{list(ids.shape)}")
    return _ops.segment_sum(_t(data), ids, name=name)


def segment_mean(data: Any, segment_ids: Any, name: Optional[str] = None) -> Any:
    """The mean of each segment's rows, for sorted ids (0 for an id no row has)."""
    x = _t(data)
    ids = _ids("segment_mean", segment_ids)
    total = segment_sum(x, ids)
    count = segment_sum(_ops.ones_like(_m.cast(ids, x.dtype)), ids)
    return _ops.div(total, _counts(count, total), name=name)


def unsorted_segment_sqrt_n(data: Any, segment_ids: Any, num_segments: Any,
                            name: Optional[str] = None) -> Any:
    """Each segment's sum divided by the square root of its number of slices (0 if empty)."""
    return _scaled_sum("unsorted_segment_sqrt_n", data, segment_ids, num_segments, True, name)


def _extremes(who: str, sorted_ids: bool) -> Any:
    op = getattr(_ops, who)

    if sorted_ids:
        def extreme(data: Any, segment_ids: Any, name: Optional[str] = None) -> Any:
            ids = _ids(who, segment_ids)
            if ids.shape is not None and len(ids.shape) != 1:
                raise OpsdkError(f"{who}: segment_ids '{ids.name}' must be 1-d, got shape "
                                 f"{list(ids.shape)}")
            return op(_t(data), ids, name=name)
        extreme.__doc__ = (f"`tf.{who}`: per sorted segment id the {who[8:]}imum of its rows "
                           "(0 for an id no row has); the gradient goes to the rows equal to it.")
    else:
        def extreme(data: Any, segment_ids: Any, num_segments: Any,  # type: ignore[misc]
                    name: Optional[str] = None) -> Any:
            n = args.static_int(who, "num_segments", num_segments)
            return op(_t(data), _ids(who, segment_ids), num_segments=n, name=name)
        extreme.__doc__ = (f"`tf.{who}`: per segment id the {who[17:]}imum of its slices (the "
                           "dtype's extreme value for an empty segment, as TF's).")
    extreme.__name__ = who
    return extreme


segment_max, segment_min = _extremes("segment_max", True), _extremes("segment_min", True)
unsorted_segment_max = _extremes("unsorted_segment_max", False)
unsorted_segment_min = _extremes("unsorted_segment_min", False)
segment_prod = _extremes("segment_prod", True)
segment_prod.__doc__ = ("`tf.segment_prod`: per sorted segment id the product of its rows (1 for "
                        "an id no row has); its gradient divides by no zero.")
unsorted_segment_prod = _extremes("unsorted_segment_prod", False)
unsorted_segment_prod.__doc__ = ("`tf.unsorted_segment_prod`: per segment id the product of its "
                                 "slices (1 for an empty segment, as TF's).")


def _counts(count: Any, total: Any) -> Any:
    """Per segment its count (at least 1), shaped to divide `total` ([segments, 1, ...])."""
    count = _m.maximum(count, _m.cast(1, count.dtype))
    extra = (len(total.shape) - 1) if total.shape is not None else 0
    for _ in range(extra):
        count = _m.expand_dims(count, -1)
    return count


NAMES = {"matrix_inverse": matrix_inverse, "matrix_determinant": matrix_determinant,
         "cholesky": cholesky, "matrix_solve": matrix_solve,
         "matrix_triangular_solve": matrix_triangular_solve, "cholesky_solve": cholesky_solve,
         "self_adjoint_eig": self_adjoint_eig, "self_adjoint_eigvals": self_adjoint_eigvals,
         "svd": svd, "qr": qr,
         "matrix_diag": matrix_diag, "matrix_diag_part": matrix_diag_part,
         "matrix_set_diag": matrix_set_diag, "matrix_band_part": matrix_band_part,
         "trace": trace, "matrix_transpose": matrix_transpose, "diag": diag,
         "diag_part": diag_part, "cross": cross, "unsorted_segment_sum": unsorted_segment_sum,
         "unsorted_segment_mean": unsorted_segment_mean, "segment_sum": segment_sum,
         "segment_mean": segment_mean, "segment_max": segment_max, "segment_min": segment_min,
         "unsorted_segment_max": unsorted_segment_max,
         "unsorted_segment_min": unsorted_segment_min,
         "unsorted_segment_sqrt_n": unsorted_segment_sqrt_n, "segment_prod": segment_prod,
         "unsorted_segment_prod": unsorted_segment_prod}
# tf.linalg's names for them
LINALG = {"inv": matrix_inverse, "det": matrix_determinant, "cholesky": cholesky,
          "solve": matrix_solve, "triangular_solve": matrix_triangular_solve,
          "cholesky_solve": cholesky_solve, "logdet": logdet, "eigh": self_adjoint_eig,
          "eigvalsh": self_adjoint_eigvals, "svd": svd, "qr": qr, "diag": matrix_diag,
          "diag_part": matrix_diag_part, "set_diag": matrix_set_diag,
          "band_part": matrix_band_part, "trace": trace, "transpose": matrix_transpose,
          "matrix_transpose": matrix_transpose, "adjoint": matrix_transpose, "cross": cross,
          "tensor_diag": diag, "tensor_diag_part": diag_part}
MATH = {name: NAMES[name] for name in NAMES if "segment" in name}
