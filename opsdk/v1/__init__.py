"""TensorFlow 1's names over opsdk, so a TF1 program runs with only its import changed.

    import opsdk.v1 as tf          # instead of: import tensorflow as tf
    x = tf.placeholder(tf.float32, [None, 784])
    W = tf.Variable(tf.random_uniform([784, 10]))
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=x @ W))
    train_op = tf.train.AdagradOptimizer(0.01).minimize(loss)

Graph, Session, Variable, control flow, gradients, optimizers and Saver are opsdk's own, with
TF1's calling conventions, dtype rules and default session added here (`docs/tf1.md` lists what
is provided and what is not). Any other builtin op is reachable by its name (`tf.exp`).
"""

from __future__ import annotations

from typing import Any

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError

from opsdk.v1 import session as _session, tensors as _tensors, math_ops as _math
from opsdk.v1 import scopes as _scopes
from opsdk.v1.dtypes import (as_dtype, bool_ as bool, double, float16, float32, float64, half,  # noqa: A001
                             int8, int16, int32, int64, string, uint8, uint16)
from opsdk.v1.session import ConfigProto, GPUOptions, InteractiveSession, Session, get_default_session
from opsdk.v1.run_options import RunMetadata, RunOptions
from opsdk.v1.tensors import (TensorShape, Dimension, Variable, constant, convert_to_tensor, fill,
                              ones, ones_like, placeholder, placeholder_with_default,
                              random_gamma, random_normal, random_poisson, random_uniform,
                              set_random_seed, truncated_normal,
                              zeros, zeros_like)
from opsdk.v1.math_ops import (abs, acos, acosh, add, arg_max, arg_min, argmax, argmin,  # noqa: A001
                               asin, asinh, atan, atan2, atanh, cast, digamma, erf, erfc, lgamma, ceil, clip_by_value, cos, cosh, expm1, floor, round,
                               sin, sinh, squared_difference, tan, concat, div, divide, equal, exp, expand_dims,
                               gather, greater, greater_equal, identity, less, less_equal,
                               linspace, log, log1p, matmul, maximum, minimum, mod, mul, multiply,
                               floordiv, floor_div, floormod,
                               negative, not_equal, one_hot, pack, pow, range, rank, reciprocal,
                               reduce_any, reduce_max, reduce_mean, reduce_min, reduce_sum,
                               reshape, rsqrt, shape, sigmoid, sign, split, sqrt, square, squeeze,
                               stack, stop_gradient, sub, subtract, tanh, to_float, to_int32,
                               to_int64, transpose, truediv, unpack, unstack, where, where_v2,
                               realdiv, truncatediv, truncatemod)
from opsdk.v1.state_ops import (assign, assign_add, assign_sub, scatter_add, scatter_nd_add,
                                scatter_nd_sub, scatter_nd_update, scatter_sub, scatter_update)
from opsdk.v1.scopes import (AUTO_REUSE, GraphKeys, add_to_collection, add_to_collections,
                             constant_initializer, get_collection, get_collection_ref, get_variable,
                             get_variable_scope, glorot_uniform_initializer, global_variables,
                             global_variables_initializer, group, local_variables,
                             local_variables_initializer, no_op, ones_initializer,
                             random_normal_initializer, random_uniform_initializer,
                             trainable_variables, truncated_normal_initializer,
                             variable_scope, variables_initializer, variance_scaling_initializer,
                             zeros_initializer)
from opsdk.v1.scopes import tuple_ as tuple  # noqa: A001 - TF's name
from opsdk.v1.partitioned import TOP_LEVEL as _PARTITIONERS  # noqa: E402 - tf.fixed_size_partitioner
globals().update(_PARTITIONERS)
from opsdk.v1.misc import app, flags, gfile
from opsdk.v1.train import train
from opsdk.v1 import nn, layers, losses, metrics, summary, contrib, errors, data  # noqa: E402

Graph, Operation, Tensor = opsdk.Graph, opsdk.Operation, opsdk.Tensor
get_default_graph = opsdk.get_default_graph


def reset_default_graph() -> None:
    """A new default graph, with a fresh root variable scope (no `reuse_variables()` kept)."""
    opsdk.reset_default_graph()
    _scopes._stack.root = _scopes._Scope("", False, None, None)


name_scope, control_dependencies, device = opsdk.name_scope, opsdk.control_dependencies, opsdk.device
from opsdk.v1.math_ops import AggregationMethod, UnconnectedGradients, cumsum, gradients, reduce_prod  # noqa: E402
from opsdk.v1.composed import (Print, add_n, argsort, clip_by_global_norm, clip_by_norm, count_nonzero, eye,  # noqa: E402
                               einsum,
                               boolean_mask, gather_nd, global_norm, is_finite, is_inf, is_nan,
                               logical_and, logical_not,
                               logical_or, logical_xor, pad, reduce_all, reduce_logsumexp,
                               reverse, reverse_sequence, sequence_mask, size, sort, tile, unique,
                               unique_with_counts)
from opsdk.v1.composed import slice_ as slice, tensordot  # noqa: E402,A001 - TF's name
from opsdk.v1.functional import case, cond, foldl, foldr, map_fn, scan, while_loop  # noqa: E402
from opsdk.v1.tensor_array import TensorArray  # noqa: E402
from opsdk.v1 import queues as _queues  # noqa: E402 - tf.FIFOQueue, tf.train.batch, ...
globals().update(_queues.TOP_LEVEL)
for _name, _value in _queues.TRAIN.items():
    setattr(train, _name, _value)
from opsdk.v1.readers import TOP_LEVEL as _READERS  # noqa: E402 - tf.TextLineReader, tf.decode_csv
globals().update(_READERS)
from opsdk.v1.extras import NAMES as _EXTRAS  # noqa: E402 - tf.meshgrid, tf.roll, tf.bincount, ...
globals().update(_EXTRAS)
for _name in ("space_to_batch", "space_to_depth", "depth_to_space"):  # tf.nn's names too
    setattr(nn, _name, _EXTRAS[_name])
from opsdk.v1 import records as _records  # noqa: E402 - TFRecords, tf.train.Example, parsing
globals().update(_records.TOP_LEVEL)
for _name, _value in _records.TRAIN.items():
    setattr(train, _name, _value)
from opsdk.v1.misc import Namespace as _Namespace  # noqa: E402
python_io = _Namespace("python_io", **_records.PYTHON_IO)
from opsdk.v1 import string_ops as _string_ops  # noqa: E402 - tf.string_join, tf.strings, ...
globals().update(_string_ops.TOP_LEVEL)
equal = _string_ops.string_aware(equal, True)  # strings compared as strings  # noqa: F811
not_equal = _string_ops.string_aware(not_equal, False)  # noqa: F811
globals().update(_string_ops.structural(globals()))  # reshape, concat, ... of strings
pack = stack  # noqa: F811
from opsdk.v1.asserts import NAMES as _ASSERTS  # noqa: E402 - tf.Assert, tf.assert_equal, ...
globals().update(_ASSERTS)
from opsdk.v1.linalg import NAMES as _LINALG  # noqa: E402 - tf.matrix_inverse, tf.diag, ...
globals().update(_LINALG)
from opsdk.v1.sparse import NAMES as _SPARSE, NN as _SPARSE_NN  # noqa: E402 - tf.SparseTensor, ...
globals().update(_SPARSE)
for _name, _value in _SPARSE_NN.items():  # tf.nn.embedding_lookup_sparse
    setattr(nn, _name, _value)
from opsdk.v1.math_more import TOP_LEVEL as _MATH_MORE  # noqa: E402 - tf.cumprod, tf.lbeta, ...
globals().update(_MATH_MORE)
custom_gradient = opsdk.custom_gradient
from opsdk.v1 import gradient_overrides as _overrides  # noqa: E402 - tf.RegisterGradient
RegisterGradient = _overrides.RegisterGradient
_overrides.attach()
from opsdk.v1.behavior import NAMES as _BEHAVIOR  # noqa: E402 - tf.disable_v2_behavior, ...
globals().update(_BEHAVIOR)
from opsdk.v1.script_ops import numpy_function, print_ as print, py_func, py_function  # noqa: E402,A001
reverse_v2 = reverse
initialize_all_variables, all_variables = global_variables_initializer, global_variables
lin_space = linspace  # TF1's older name
logging = __import__("logging").getLogger("opsdk.v1")
logging.set_verbosity = lambda level: None  # TF's tf.logging.set_verbosity: accepted
logging.INFO, logging.WARN, logging.ERROR = 20, 30, 40
newaxis = None
VERSION = __version__ = "1.15 (opsdk.v1)"

_session.attach()
_tensors.attach()
_math.attach()
from opsdk.v1.distributed import install as _install_distributed; _install_distributed(train, globals())  # noqa: E402,E702 - tf.train's distributed names (opsdk/v1/distributed.py)
from opsdk.v1 import namespaces as _namespaces  # noqa: E402 - tf.math, tf.random, tf.compat.v1, ...
globals().update(_namespaces.install(__import__("sys").modules[__name__]))


def _adapt(fn: Any) -> Any:
    """A builtin op's wrapper taking Variables and Python numbers as tensors."""
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*(convert_to_tensor(a) for a in args), **kwargs)
    call.__name__ = getattr(fn, "__name__", "op")
    call.__doc__ = fn.__doc__
    return call


def __getattr__(name: str) -> Any:
    """Any other builtin op by name (`tf.exp(x)`), taking Variables as tensors."""
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        fn = getattr(_ops, name)
    except AttributeError:
        raise AttributeError(f"opsdk.v1 has no '{name}' (neither a TF1 name opsdk provides nor "
                             "a builtin op; see docs/tf1.md and `opsdk list`)") from None
    value = _adapt(fn)
    globals()[name] = value
    return value
