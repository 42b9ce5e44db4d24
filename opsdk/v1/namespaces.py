"""TF 1.13-1.15's newer namespaces over the names opsdk.v1 already provides: `tf.math`,
`tf.random`, `tf.linalg` (with opsdk/v1/linalg.py's functions under its names), `tf.initializers`,
`tf.debugging`, `tf.image` and `tf.io` (opsdk/v1/image.py), `tf.test` (whether a GPU is
usable), and `tf.compat.v1` (opsdk.v1 itself), so `tf.math.log(x)`, `tf.random.normal([2])`
and `tf.compat.v1.placeholder(...)` run.

Each entry is the top-level (or `nn.`) function TensorFlow 2.21's compat.v1 also has under that
name (the lists were drawn from it: 36 of `tf.math`'s entries are the very same function objects
there, the others its top-level aliases of the same op). A name a namespace lacks is refused
naming it, as the top level's are. A few
compositions are here too: `tf.math.log_sigmoid`, `reduce_variance`, `reduce_std` and
`divide_no_nan`; `tf.random.categorical` (`tf.multinomial`) and `tf.random.shuffle`
(`tf.random_shuffle`); `tf.broadcast_to`; `tf.norm` (`tf.linalg.norm`).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Optional

import numpy as np

from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import image as _image, linalg as _linalg, math_ops as _m, nn as _nn
from opsdk.v1 import readers as _readers, records as _records, sparse as _sparse
from opsdk.v1 import image_more as _image_more, math_more as _math_more
from opsdk.v1 import string_ops as _string_ops
from opsdk.v1.misc import Namespace
from opsdk.v1.tensors import convert_to_tensor as _t, zeros

# namespace -> {its name: the path of that function in opsdk.v1}
_SAME = {"abs", "acos", "acosh", "add", "add_n", "argmax", "argmin", "asin", "asinh", "atan",
         "atan2", "atanh", "ceil", "cos", "cosh",
         "bincount", "confusion_matrix", "count_nonzero", "cumsum", "digamma", "divide", "equal", "erf", "erfc", "exp", "expm1",
         "floor", "floordiv", "invert_permutation", "lgamma", "rint", "scalar_mul",
         "floormod", "greater", "greater_equal", "is_finite", "is_inf", "is_nan", "less",
         "less_equal", "log", "log1p", "logical_and", "logical_not", "logical_or", "logical_xor",
         "maximum", "minimum", "mod", "multiply", "negative", "not_equal", "pow", "reciprocal",
         "reduce_all", "reduce_any", "reduce_logsumexp", "reduce_max", "reduce_mean",
         "reduce_min", "reduce_prod", "reduce_sum", "round", "rsqrt", "sigmoid", "sign", "sin",
         "sinh", "sqrt", "square", "squared_difference", "subtract", "tan", "tanh", "truediv"}
PATHS: dict[str, dict[str, str]] = {
    "math": {**{name: name for name in _SAME},
             **{name: "nn." + name for name in ("in_top_k", "l2_normalize", "log_softmax",
                                                 "softmax", "softplus", "softsign", "top_k",
                                                 "zero_fraction")}},
    "random": {"normal": "random_normal", "uniform": "random_uniform",
               "truncated_normal": "truncated_normal", "set_random_seed": "set_random_seed",
               "gamma": "random_gamma", "poisson": "random_poisson"},
    "linalg": {"matmul": "matmul", "eye": "eye", "einsum": "einsum", "global_norm": "global_norm",
               "tensordot": "tensordot",
               "l2_normalize": "nn.l2_normalize"},
    "initializers": {"constant": "constant_initializer", "zeros": "zeros_initializer",
                     "ones": "ones_initializer", "random_normal": "random_normal_initializer",
                     "random_uniform": "random_uniform_initializer",
                     "truncated_normal": "truncated_normal_initializer",
                     "glorot_uniform": "glorot_uniform_initializer",
                     "variance_scaling": "variance_scaling_initializer",
                     "global_variables": "global_variables_initializer",
                     "local_variables": "local_variables_initializer",
                     "variables": "variables_initializer"},
    "debugging": {"is_finite": "is_finite", "is_inf": "is_inf", "is_nan": "is_nan",
                  "Assert": "Assert", **{f"assert_{n}": f"assert_{n}" for n in (
                      "equal", "none_equal", "less", "less_equal", "greater", "greater_equal",
                      "positive", "negative", "non_negative", "non_positive")}},
    "test": {},
    "image": {"random_crop": "random_crop"},
    "io": {},
    "sparse": {},
    "strings": {},
}


def log_sigmoid(x: Any, name: Optional[str] = None) -> Any:
    """log(sigmoid(x)) = -softplus(-x), without overflow (nn.softplus's form)."""
    return _ops.neg(_nn.softplus(_ops.neg(_t(x))), name=name)


def reduce_variance(input_tensor: Any, axis: Any = None, keepdims: bool = False,
                    name: Optional[str] = None) -> Any:
    """The mean of squared deviations from the mean over `axis` (the population variance)."""
    x = _t(input_tensor)
    centred = _ops.sub(x, _m.reduce_mean(x, axis, True))
    return _m.reduce_mean(_ops.square(centred), axis, keepdims, name)


def reduce_std(input_tensor: Any, axis: Any = None, keepdims: bool = False,
               name: Optional[str] = None) -> Any:
    """The square root of reduce_variance."""
    return _ops.sqrt(reduce_variance(input_tensor, axis, keepdims), name=name)


def divide_no_nan(x: Any, y: Any, name: Optional[str] = None) -> Any:
    """x / y, and 0 where y is 0 (its gradient 0 there too)."""
    a, b = _m._pair(x, y)
    zero = _ops.equal(b, _ops.zeros_like(b))
    safe = _ops.where(zero, _ops.ones_like(b), b)
    return _ops.where(zero, _ops.zeros_like(_ops.div(a, safe)), _ops.div(a, safe), name=name)


def categorical(logits: Any, num_samples: Any, dtype: Any = None, seed: Optional[int] = None,
                name: Optional[str] = None) -> Any:
    """[batch, num_samples] class indices drawn from softmax(logits[b]) (`tf.multinomial`):
    the Gumbel-max draw, argmax(logits - log(-log(u))) for uniform u, each draw independent.
    Seeded as the other random ops; not TF's sequence of draws."""
    from opsdk.v1 import dtypes as _dtypes
    from opsdk.v1.tensors import random_uniform

    x = _t(logits)
    if x.shape is None or len(x.shape) != 2:
        raise OpsdkError("categorical: logits must be a [batch, classes] matrix")
    x = _ops.cast(x, dtype="float64") if x.dtype != "float64" else x
    shape = _m.concat([_m.shape(x)[:1], _m.reshape(_t(num_samples), [1]),
                       _m.shape(x)[1:]], axis=0)
    tiny = float(np.finfo(np.float64).tiny)
    u = random_uniform(shape, tiny, 1.0, dtype=_dtypes.float64, seed=seed)
    gumbel = _ops.neg(_ops.log(_ops.neg(_ops.log(u))))
    scores = _ops.add(_m.expand_dims(x, 1), gumbel)
    out = _dtypes.int64 if dtype is None else dtype
    return _m.cast(_m.argmax(scores, axis=2), out, name=name)


def multinomial(logits: Any, num_samples: Any, seed: Optional[int] = None,
                name: Optional[str] = None, output_dtype: Any = None) -> Any:
    """TF1's name for `categorical`."""
    return categorical(logits, num_samples, output_dtype, seed, name)


def shuffle(value: Any, seed: Optional[int] = None, name: Optional[str] = None) -> Any:
    """`value`'s rows (along axis 0) in a random order: a gather by the order of uniform keys,
    so a gradient reaches each row where it came from."""
    from opsdk.v1 import composed
    from opsdk.v1.tensors import random_uniform

    x = _t(value)
    if x.shape is None or not x.shape:
        raise OpsdkError("random_shuffle: value must have at least one dimension")
    keys = random_uniform(_m.shape(x)[:1], seed=seed)
    return _m.gather(x, composed.argsort(keys), name=name)


def broadcast_to(input: Any, shape: Any, name: Optional[str] = None) -> Any:  # noqa: A002
    """`input` broadcast to `shape` (NumPy's rules), numbers and bools alike."""
    x = _t(input)
    if x.dtype == "bool":
        return _ops.not_equal(broadcast_to(_m.cast(x, "int8"), shape), _t(np.int8(0)), name=name)
    return _ops.add(x, zeros(shape, dtype=x.dtype), name=name)


def norm(tensor: Any, ord: Any = "euclidean", axis: Any = None, keepdims: Any = None,  # noqa: A002
         name: Optional[str] = None, keep_dims: Any = None) -> Any:
    """The vector norm of `tensor` (all of it, or along `axis`): 'euclidean' (2) or 'fro', 1,
    or np.inf; matrix norms other than Frobenius are refused."""
    x = _t(tensor)
    keep = bool(keepdims if keepdims is not None else keep_dims)
    if isinstance(axis, (list, tuple)) and len(axis) == 2 and ord not in ("fro", "euclidean"):
        raise OpsdkError(f"norm: the matrix norm ord={ord!r} is not supported by opsdk.v1; "
                         "give 'fro' or 'euclidean'")
    if ord in ("euclidean", "fro", 2, 2.0):
        return _ops.sqrt(_m.reduce_sum(_ops.square(x), axis, keep), name=name)
    if ord in (1, 1.0):
        return _m.reduce_sum(_ops.abs(x), axis, keep, name)
    if ord == np.inf:
        return _m.reduce_max(_ops.abs(x), axis, keep, name)
    raise OpsdkError(f"norm: ord={ord!r}; give 'euclidean', 'fro', 1, 2 or np.inf")


def is_built_with_cuda() -> bool:
    """Whether this install can run opsdk's CUDA kernels: CuPy is installed (opsdk compiles its
    CUDA sources when a GPU runs them; TF's answer is about its build)."""
    import importlib.util

    return importlib.util.find_spec("cupy") is not None


def is_gpu_available(cuda_only: bool = False, min_cuda_compute_capability: Any = None) -> bool:
    """Whether a CUDA GPU is usable here (CuPy sees one); `min_cuda_compute_capability`, a
    (major, minor) pair, asks that GPU 0 have at least that capability."""
    from opsdk.runtime.devices.cuda import probe_cupy

    cupy, _ = probe_cupy()
    if cupy is None:
        return False
    if min_cuda_compute_capability is None:
        return True
    major, minor = min_cuda_compute_capability
    have = int(cupy.cuda.Device(0).compute_capability)
    return have >= 10 * int(major) + int(minor)


def gpu_device_name() -> str:
    """'/device:GPU:0' when a GPU is usable, else '' (as TF's)."""
    return "/device:GPU:0" if is_gpu_available() else ""


_EXTRA = {"math": {"log_sigmoid": log_sigmoid, "reduce_variance": reduce_variance,
                   "reduce_std": reduce_std, "divide_no_nan": divide_no_nan, **_linalg.MATH,
                   **_math_more.MATH},
          "random": {"categorical": categorical, "multinomial": multinomial,
                     "shuffle": shuffle},
          "linalg": {"norm": norm, **_linalg.LINALG},
          "image": {**_image.NAMES, **_image_more.NAMES},
          "io": {**_image.IO, "decode_csv": _readers.decode_csv,
                 "decode_raw": _readers.decode_raw, **_records.PYTHON_IO,
                 **{n: _records.TOP_LEVEL[n] for n in ("FixedLenFeature", "VarLenFeature",
                                                       "parse_example",
                                                       "parse_single_example")}},
          "sparse": _sparse.SPARSE,
          "strings": _string_ops.STRINGS,
          "test": {"is_built_with_cuda": is_built_with_cuda,
                   "is_built_with_gpu_support": is_built_with_cuda,
                   "is_gpu_available": is_gpu_available, "gpu_device_name": gpu_device_name}}
# and at the top level, under TF1's names
TOP_LEVEL = {"multinomial": multinomial, "random_shuffle": shuffle, "broadcast_to": broadcast_to,
             "norm": norm, "log_sigmoid": log_sigmoid, **_image.FILES,
             **_image_more.TOP_LEVEL}


def _resolve(module: ModuleType, path: str) -> Any:
    value: Any = module
    for part in path.split("."):
        value = getattr(value, part)
    return value


def install(module: ModuleType) -> dict[str, Any]:
    """The namespaces of `module` (opsdk.v1), to set on it (`tf.math` and the others), and the
    top-level functions defined here (`tf.multinomial`, `tf.random_shuffle`, ...)."""
    spaces: dict[str, Any] = {}
    for space, paths in PATHS.items():
        names = {name: _resolve(module, path) for name, path in paths.items()}
        names.update(_EXTRA.get(space, {}))
        spaces[space] = Namespace(space, **names)
    spaces["compat"] = Namespace("compat", v1=module)
    spaces.update(TOP_LEVEL)
    return spaces
