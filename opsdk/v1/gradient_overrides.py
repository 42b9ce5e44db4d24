"""TF1's gradient overriding: `tf.RegisterGradient(name)` and `graph.gradient_override_map({...})`
over opsdk's own (autodiff.gradients.register_gradient, Graph.gradient_override_map).

    @tf.RegisterGradient("FlipGradient")
    def _flip(op, grad):
        return [tf.negative(grad)]

    with tf.get_default_graph().gradient_override_map({"Identity": "FlipGradient"}):
        y = tf.identity(x)

The map's keys are TensorFlow's op type names (`Identity`, `Round`, `Sign`, `MatMul`), each
turned into opsdk's type of the node that the same TF1 call makes here (`identity`, `round`,
`sign`, `matmul`); opsdk's own names are taken as they are. `Identity` is registered as a
gradient name already, as in TensorFlow: the incoming gradient passed through unchanged (the
straight-through estimator of `{"Round": "Identity"}`). A gradient function gets opsdk's
node, with TF's `op.inputs`, `op.outputs`, `op.name` and `op.get_attr(name)`.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

import opsdk
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.autodiff.gradients import NAMED_GRADIENTS, register_gradient
from opsdk.v1.dtypes import as_dtype

# TF's op types whose opsdk type is not their snake_case form
_TYPES = {"MatMul": "matmul", "BatchMatMul": "batch_matmul", "BatchMatMulV2": "batch_matmul",
          "AddV2": "add", "RealDiv": "div", "Neg": "neg", "Conv2D": "conv2d",
          "DepthwiseConv2dNative": "depthwise_conv2d", "ConcatV2": "concat", "GatherV2": "gather",
          "Relu6": "relu6", "Softmax": "softmax", "LogSoftmax": "log_softmax", "Pack": "stack",
          "Unpack": "unstack", "Select": "where", "SelectV2": "where"}
_runtime_map = opsdk.Graph.gradient_override_map


def op_type(name: str) -> str:
    """opsdk's op type for TensorFlow's type `name` (opsdk's own names pass as they are)."""
    if name in _TYPES:
        return _TYPES[name]
    if not name[:1].isupper():
        return name
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


class RegisterGradient:
    """`@tf.RegisterGradient("Name")`: the decorated `fn(op, *grads)` is the gradient named
    "Name" for gradient_override_map (a name is registered once, as TF's)."""

    def __init__(self, op_type: str):
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._name = op_type

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return register_gradient(self._name)(fn)


@contextmanager
def gradient_override_map(self: Any, op_type_map: Mapping[str, str]) -> Iterator[None]:
    """TF's Graph.gradient_override_map: the keys are TF's op types (or opsdk's)."""
    if not isinstance(op_type_map, Mapping):
        raise OpsdkError("gradient_override_map: give a dict of op type -> gradient name")
    with _runtime_map(self, {op_type(k) if isinstance(k, str) else k: v
                             for k, v in op_type_map.items()}):
        yield


def _get_attr(self: Any, name: str) -> Any:
    """TF's Operation.get_attr: an attr's value, a type attr as a dtype."""
    if name in self.attrs:
        return self.attrs[name]
    if name in self.type_attrs:
        return as_dtype(self.type_attrs[name])
    spec = self.spec
    if spec is not None:  # a type attr the inputs bound: the dtype of one that has it
        for tspecs, tensors in ((spec.inputs, self.inputs), (spec.outputs, self.outputs)):
            flat = [t for t in tspecs if t.name not in self.absent]
            if len(flat) == len(tensors) and all(not t.is_list for t in flat):
                for tspec, tensor in zip(flat, tensors):
                    if tspec.dtype == name:
                        return as_dtype(tensor.dtype)
    raise ValueError(f"node '{self.name}' ({self.type}) has no attr named '{name}'")


def _identity_gradient(op: Any, *grads: Any) -> Any:
    """TF's registered gradient `Identity`: each output's gradient to the input of its place."""
    return list(grads[:len(op.inputs)]) + [None] * (len(op.inputs) - len(grads))


def attach() -> None:
    opsdk.Graph.gradient_override_map = gradient_override_map
    opsdk.Operation.get_attr = _get_attr
    if "Identity" not in NAMED_GRADIENTS:
        register_gradient("Identity")(_identity_gradient)
