"""TensorFlow 1's names over opsdk, so a TF1 program runs with only its import changed.

    import opsdk.v1 as tf          # instead of: import tensorflow as tf
    x = tf.placeholder(tf.float32, [None, 784])
    W = tf.Variable(tf.zeros([784, 10]))
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=x @ W))
    train_op = tf.train.AdagradOptimizer(0.01).minimize(loss)

Graph, Session, Variable, control flow and gradients are opsdk's own; the functions whose TF
signature differs from the op's declaration (`zeros(shape)`, `reduce_mean(x, axis)`, the
keyword-only `nn.softmax_cross_entropy_with_logits`) are adapted here; every other builtin op is
reachable by its name (`tf.exp`, `tf.maximum`, ...), with Variables read as their values.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Optional, Sequence

import numpy as np

from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.control_flow.builders import cond, while_loop
from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.ir.graph import (Graph, GraphKeys, Operation, Tensor, constant,
                                 control_dependencies, device, dtype_name, get_default_graph,
                                 name_scope, placeholder, reset_default_graph)
from opsdk.runtime.train.optimizers import (AdagradOptimizer, AdamOptimizer, GradientDescentOptimizer,
                                      MomentumOptimizer, Optimizer, RMSPropOptimizer)
from opsdk.runtime.train.saver import Saver, latest_checkpoint
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.variables import (Variable, global_variables, global_variables_initializer,
                                     trainable_variables)

__all__ = ["Graph", "GraphKeys", "Operation", "Tensor", "Session", "Variable", "placeholder",
           "constant", "control_dependencies", "device", "get_default_graph", "name_scope",
           "reset_default_graph", "cond", "while_loop", "gradients", "global_variables",
           "global_variables_initializer", "trainable_variables", "zeros", "ones", "matmul",
           "reduce_mean", "reduce_sum", "reduce_max", "reduce_min", "nn", "train", "float16",
           "float32", "float64", "int32", "int64", "bool"]

float16, float32, float64 = np.dtype("float16"), np.dtype("float32"), np.dtype("float64")
int32, int64, bool = np.dtype("int32"), np.dtype("int64"), np.dtype("bool")  # noqa: A001 - TF's name


def _value(item: Any) -> Any:
    """A Variable reads as its value; lists are converted element by element."""
    if hasattr(item, "_as_graph_element"):
        return item._as_graph_element()
    if isinstance(item, (list, tuple)) and any(hasattr(i, "_as_graph_element") for i in item):
        return [_value(i) for i in item]
    return item


def _adapt(fn: Callable) -> Callable:
    """The op wrapper `fn` taking Variables for tensors and NumPy dtypes for dtype attrs."""
    def call(*args: Any, **kwargs: Any) -> Any:
        kwargs = {k: dtype_name(v) if isinstance(v, np.dtype) else _value(v)
                  for k, v in kwargs.items()}
        return fn(*(_value(a) for a in args), **kwargs)
    call.__name__ = getattr(fn, "__name__", "op")
    call.__doc__ = fn.__doc__
    return call


def _axes(axis: Any) -> list[int]:
    if axis is None:
        return []
    return [int(a) for a in axis] if isinstance(axis, (list, tuple)) else [int(axis)]


def zeros(shape: Sequence[int], dtype: Any = float32, name: Optional[str] = None) -> Tensor:
    """A tensor of zeros of a static shape (TF: `tf.zeros([784, 10])`)."""
    return _ops.zeros(shape=[int(d) for d in shape], dtype=dtype_name(dtype), name=name)


def ones(shape: Sequence[int], dtype: Any = float32, name: Optional[str] = None) -> Tensor:
    """A tensor of ones of a static shape."""
    return _ops.ones(shape=[int(d) for d in shape], dtype=dtype_name(dtype), name=name)


def matmul(a: Any, b: Any, name: Optional[str] = None) -> Tensor:
    """The matrix product a @ b."""
    return _ops.matmul(_value(a), _value(b), name=name)


def _reduction(op: str) -> Callable:
    def reduce(input_tensor: Any, axis: Any = None, keepdims: bool = False,
               name: Optional[str] = None) -> Tensor:
        return getattr(_ops, op)(_value(input_tensor), axes=_axes(axis), keepdims=keepdims,
                                 name=name)
    reduce.__name__ = op
    reduce.__doc__ = f"`{op}` over `axis` (None: every axis), TF's signature."
    return reduce


reduce_mean = _reduction("reduce_mean")
reduce_sum = _reduction("reduce_sum")
reduce_max = _reduction("reduce_max")
reduce_min = _reduction("reduce_min")


def _softmax_cross_entropy_with_logits(_sentinel: Any = None, *, labels: Any, logits: Any,
                                       name: Optional[str] = None) -> Tensor:
    if _sentinel is not None:
        raise OpsdkError("softmax_cross_entropy_with_logits: pass labels= and logits= by name")
    return _ops.softmax_cross_entropy_with_logits(_value(labels), _value(logits), name=name)


nn = SimpleNamespace(
    softmax_cross_entropy_with_logits=_softmax_cross_entropy_with_logits,
    softmax=_adapt(_ops.softmax), log_softmax=_adapt(_ops.log_softmax),
    relu=_adapt(_ops.relu), sigmoid=_adapt(_ops.sigmoid), tanh=_adapt(_ops.tanh),
)

train = SimpleNamespace(
    Optimizer=Optimizer, GradientDescentOptimizer=GradientDescentOptimizer,
    MomentumOptimizer=MomentumOptimizer, AdagradOptimizer=AdagradOptimizer,
    AdamOptimizer=AdamOptimizer, RMSPropOptimizer=RMSPropOptimizer, Saver=Saver,
    latest_checkpoint=latest_checkpoint,
)


def __getattr__(name: str) -> Any:
    """Any other builtin op by name (`tf.exp(x)`), taking Variables as tensors."""
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        fn = getattr(_ops, name)
    except AttributeError:
        raise AttributeError(f"opsdk.v1 has no '{name}' (neither a TF1 name opsdk provides nor "
                             "a builtin op; see `opsdk list`)") from None
    value = _adapt(fn)
    globals()[name] = value
    return value
