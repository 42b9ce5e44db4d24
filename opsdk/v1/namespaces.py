"""TF 1.13-1.15's newer namespaces over the names opsdk.v1 already provides: `tf.math`,
`tf.random`, `tf.linalg`, `tf.initializers`, `tf.debugging`, and `tf.compat.v1` (opsdk.v1
itself), so `tf.math.log(x)`, `tf.random.normal([2])` and `tf.compat.v1.placeholder(...)` run.

Each entry names the top-level (or `nn.`) function TensorFlow's own namespace entry is: the same
function under another path (checked against TensorFlow 2.21's compat.v1 when these lists were
written). A name a namespace lacks is refused naming it, as the top level's are. A few
compositions TensorFlow added with these namespaces are here too: `log_sigmoid`,
`reduce_variance`, `reduce_std` and `divide_no_nan`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Optional

from opsdk import ops as _ops
from opsdk.v1 import math_ops as _m
from opsdk.v1.misc import Namespace
from opsdk.v1.tensors import convert_to_tensor as _t

# namespace -> {its name: the path of that function in opsdk.v1}
_SAME = {"abs", "acos", "add", "add_n", "argmax", "argmin", "asin", "atan", "ceil", "cos", "cosh",
         "count_nonzero", "cumsum", "divide", "equal", "exp", "expm1", "floor", "floordiv",
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
               "truncated_normal": "truncated_normal", "set_random_seed": "set_random_seed"},
    "linalg": {"matmul": "matmul", "eye": "eye", "einsum": "einsum", "global_norm": "global_norm",
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
    "debugging": {"is_finite": "is_finite", "is_inf": "is_inf", "is_nan": "is_nan"},
}


def log_sigmoid(x: Any, name: Optional[str] = None) -> Any:
    """log(sigmoid(x)) = -softplus(-x), without overflow."""
    v = _t(x)
    neg = _ops.neg(v)  # softplus(-x) = max(-x, 0) + log1p(exp(-|x|))
    return _ops.neg(_ops.add(_ops.relu(neg), _m.log1p(_ops.exp(_ops.neg(_ops.abs(v))))),
                    name=name)


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


_EXTRA = {"math": {"log_sigmoid": log_sigmoid, "reduce_variance": reduce_variance,
                   "reduce_std": reduce_std, "divide_no_nan": divide_no_nan}}


def _resolve(module: ModuleType, path: str) -> Any:
    value: Any = module
    for part in path.split("."):
        value = getattr(value, part)
    return value


def install(module: ModuleType) -> dict[str, Any]:
    """The namespaces of `module` (opsdk.v1), to set on it: `tf.math` and the others."""
    spaces: dict[str, Any] = {}
    for space, paths in PATHS.items():
        names = {name: _resolve(module, path) for name, path in paths.items()}
        names.update(_EXTRA.get(space, {}))
        spaces[space] = Namespace(space, **names)
    spaces["compat"] = Namespace("compat", v1=module)
    return spaces
