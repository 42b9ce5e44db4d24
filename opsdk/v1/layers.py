"""`tf.layers`: dense, conv1d, conv2d, conv2d_transpose, max_pooling1d and 2d, average_pooling1d
and 2d, dropout,
flatten and batch_normalization (`opsdk/v1/normalization.py`), functional forms, each making its
variables with `get_variable` under its own variable scope."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import math_ops as _m, nn, scopes
from opsdk.v1.tensors import convert_to_tensor as _t


def _pair(value: Any) -> list[int]:
    return [int(value)] * 2 if isinstance(value, int) else [int(v) for v in value]


def _dtype(x: Any, given: Any = None) -> Any:
    """A layer's variables' dtype, as TF's layers choose it: the `dtype` given, else the inputs'
    when they are floats (a float64 model gets float64 weights), else float32."""
    if given is not None:
        return given
    return x.dtype if np.dtype(x.dtype).kind == "f" else "float32"


def _activate(y: Any, activation: Any) -> Any:
    return activation(y) if activation is not None else y


def dense(inputs: Any, units: int, activation: Any = None, use_bias: bool = True,
          kernel_initializer: Any = None, bias_initializer: Any = None,
          kernel_regularizer: Any = None, trainable: bool = True, name: Optional[str] = None,
          reuse: Any = None, **unused: Any) -> Any:
    """activation(inputs @ kernel + bias) over the last axis of inputs."""
    with scopes.variable_scope(name, default_name="dense", reuse=reuse):
        return _affine(inputs, units, activation, use_bias, kernel_initializer,
                       bias_initializer or scopes.zeros_initializer(), kernel_regularizer,
                       trainable, dtype=unused.get("dtype"))


def _affine(inputs: Any, units: int, activation: Any, use_bias: bool, kernel_initializer: Any,
            bias_initializer: Any, kernel_regularizer: Any, trainable: bool,
            names: tuple[str, str] = ("kernel", "bias"), dtype: Any = None) -> Any:
    """dense's body, in the variable scope its caller opened; `names` are the variables'
    (contrib's fully_connected says weights and biases)."""
    x = _t(inputs)
    depth = x.shape[-1] if x.shape else None
    if depth is None:
        raise OpsdkError("dense: the last dim of the inputs must be known")
    dt = _dtype(x, dtype)
    kernel = scopes.get_variable(names[0], [depth, int(units)], initializer=kernel_initializer,
                                 regularizer=kernel_regularizer, trainable=trainable, dtype=dt)
    y = _m.matmul(x, kernel) if x.ndim == 2 else _m.reshape_to(
        _m.matmul(_ops.reshape(x, shape=[-1, depth]), kernel),
        [(x, i) for i in range(x.ndim - 1)] + [int(units)])
    if use_bias:
        bias = scopes.get_variable(names[1], [int(units)], trainable=trainable,
                                   initializer=bias_initializer, dtype=dt)
        y = _ops.bias_add(y, bias)
    return _activate(y, activation)


def fully_connected(inputs: Any, num_outputs: int, activation_fn: Any = nn.relu,
                    normalizer_fn: Any = None, normalizer_params: Any = None,
                    weights_initializer: Any = None, weights_regularizer: Any = None,
                    biases_initializer: Any = "zeros", biases_regularizer: Any = None,
                    reuse: Any = None, variables_collections: Any = None,
                    outputs_collections: Any = None, trainable: bool = True,
                    scope: Optional[str] = None) -> Any:
    """`tf.contrib.layers.fully_connected`: dense with a relu by default, its own scope
    ("fully_connected", "fully_connected_1", ...); biases_initializer=None means no bias. A
    `normalizer_fn` (such as `batch_norm`) takes the place of the bias, as in TF:
    `normalizer_fn(inputs @ weights, **normalizer_params)` under the layer's scope."""
    zeros = isinstance(biases_initializer, str)
    with scopes.variable_scope(scope, default_name="fully_connected", reuse=reuse):
        if normalizer_fn is None:
            return _affine(inputs, num_outputs, activation_fn, biases_initializer is not None,
                           weights_initializer,
                           scopes.zeros_initializer() if zeros else biases_initializer,
                           weights_regularizer, trainable, ("weights", "biases"))
        y = _affine(inputs, num_outputs, None, False, weights_initializer, None,
                    weights_regularizer, trainable, ("weights", "biases"))
        return _activate(normalizer_fn(y, **dict(normalizer_params or {})), activation_fn)


def conv2d(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1),
           padding: str = "valid", data_format: str = "channels_last", dilation_rate: Any = (1, 1),
           activation: Any = None, use_bias: bool = True, kernel_initializer: Any = None,
           bias_initializer: Any = None, trainable: bool = True, name: Optional[str] = None,
           reuse: Any = None, **unused: Any) -> Any:
    """A 2-D convolution layer over NHWC inputs (channels_last)."""
    if data_format != "channels_last":
        raise OpsdkError("layers.conv2d: opsdk.v1 supports data_format='channels_last' only")
    x = _t(inputs)
    kh, kw = _pair(kernel_size)
    with scopes.variable_scope(name, default_name="conv2d", reuse=reuse):
        dt = _dtype(x, unused.get("dtype"))
        kernel = scopes.get_variable("kernel", [kh, kw, int(x.shape[-1]), int(filters)],
                                     initializer=kernel_initializer, trainable=trainable, dtype=dt)
        y = nn.conv2d(x, kernel, _pair(strides), padding.upper())
        if use_bias:
            bias = scopes.get_variable("bias", [int(filters)], trainable=trainable, dtype=dt,
                                       initializer=bias_initializer or scopes.zeros_initializer())
            y = _ops.bias_add(y, bias)
        return _activate(y, activation)


def conv2d_transpose(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1),
                     padding: str = "valid", data_format: str = "channels_last",
                     activation: Any = None, use_bias: bool = True, kernel_initializer: Any = None,
                     bias_initializer: Any = None, kernel_regularizer: Any = None,
                     trainable: bool = True, name: Optional[str] = None, reuse: Any = None,
                     **unused: Any) -> Any:
    """A transposed convolution layer over NHWC inputs: kernel [kh, kw, filters, in_channels],
    output height in * stride (SAME) or in * stride + max(kh - stride, 0) (VALID), as TF's."""
    if data_format != "channels_last":
        raise OpsdkError("layers.conv2d_transpose: opsdk.v1 supports data_format='channels_last' "
                         "only")
    x = _t(inputs)
    if x.shape is None or len(x.shape) != 4 or None in x.shape[1:]:
        raise OpsdkError(f"layers.conv2d_transpose: inputs must be NHWC with known height, width "
                         f"and channels, got {x.shape}")
    (kh, kw), (sh, sw) = _pair(kernel_size), _pair(strides)
    same = padding.upper() == "SAME"
    out_h, out_w = (x.shape[1] * sh + (0 if same else max(kh - sh, 0)),
                    x.shape[2] * sw + (0 if same else max(kw - sw, 0)))
    with scopes.variable_scope(name, default_name="conv2d_transpose", reuse=reuse):
        dt = _dtype(x, unused.get("dtype"))
        kernel = scopes.get_variable("kernel", [kh, kw, int(filters), int(x.shape[3])],
                                     initializer=kernel_initializer,
                                     regularizer=kernel_regularizer, trainable=trainable, dtype=dt)
        y = nn.conv2d_transpose(x, kernel, [x.shape[0], out_h, out_w, int(filters)], [sh, sw],
                                padding.upper())
        if use_bias:
            bias = scopes.get_variable("bias", [int(filters)], trainable=trainable, dtype=dt,
                                       initializer=bias_initializer or scopes.zeros_initializer())
            y = _ops.bias_add(y, bias)
        return _activate(y, activation)


def conv1d(inputs: Any, filters: int, kernel_size: Any, strides: Any = 1, padding: str = "valid",
           data_format: str = "channels_last", dilation_rate: Any = 1, activation: Any = None,
           use_bias: bool = True, kernel_initializer: Any = None, bias_initializer: Any = None,
           trainable: bool = True, name: Optional[str] = None, reuse: Any = None,
           **unused: Any) -> Any:
    """A 1-D convolution layer over [batch, width, channels] inputs (channels_last): its kernel
    [kernel_size, in, filters], as TF's."""
    if data_format != "channels_last":
        raise OpsdkError("layers.conv1d: opsdk.v1 supports data_format='channels_last' only")
    x = _t(inputs)
    width, step = _single("conv1d", kernel_size), _single("conv1d", strides)
    with scopes.variable_scope(name, default_name="conv1d", reuse=reuse):
        dt = _dtype(x, unused.get("dtype"))
        kernel = scopes.get_variable("kernel", [width, int(x.shape[-1]), int(filters)],
                                     initializer=kernel_initializer, trainable=trainable, dtype=dt)
        y = nn.conv1d(x, kernel, step, padding.upper())
        if use_bias:
            bias = scopes.get_variable("bias", [int(filters)], trainable=trainable, dtype=dt,
                                       initializer=bias_initializer or scopes.zeros_initializer())
            y = _ops.bias_add(y, bias)
        return _activate(y, activation)


def _single(who: str, value: Any) -> int:
    """A 1-D layer's size: an int or a one-element list or tuple."""
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise OpsdkError(f"layers.{who}: give one size, got {value!r}")
        value = value[0]
    return int(value)


def max_pooling1d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                  data_format: str = "channels_last", name: Optional[str] = None) -> Any:
    """Max over windows of [batch, width, channels] inputs (a 2-D pool over a height of 1)."""
    return _pool1d(nn.max_pool, "max_pooling1d", inputs, pool_size, strides, padding, name)


def average_pooling1d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                      data_format: str = "channels_last", name: Optional[str] = None) -> Any:
    """Mean over windows of [batch, width, channels] inputs."""
    return _pool1d(nn.avg_pool, "average_pooling1d", inputs, pool_size, strides, padding, name)


def _pool1d(pool: Any, who: str, inputs: Any, pool_size: Any, strides: Any, padding: str,
            name: Optional[str]) -> Any:
    from opsdk.v1 import math_ops

    size, step = _single(who, pool_size), _single(who, strides)
    y = pool(math_ops.expand_dims(_t(inputs), 1), [1, 1, size, 1], [1, 1, step, 1],
             padding.upper())
    return math_ops.squeeze(y, [1], name=name)


def max_pooling2d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                  data_format: str = "channels_last", name: Optional[str] = None) -> Any:
    return nn.max_pool(inputs, _pair(pool_size), _pair(strides), padding.upper(), name=name)


def average_pooling2d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                      data_format: str = "channels_last", name: Optional[str] = None) -> Any:
    return nn.avg_pool(inputs, _pair(pool_size), _pair(strides), padding.upper(), name=name)


def dropout(inputs: Any, rate: Any = 0.5, noise_shape: Any = None, seed: Any = None,
            training: Any = False, name: Optional[str] = None) -> Any:
    """Dropout only while `training` (a bool, or a bool tensor such as a placeholder)."""
    x = _t(inputs)
    if isinstance(training, bool):
        return nn.dropout(x, rate=rate, seed=seed, name=name) if training else x
    # The noise is drawn outside the cond: a branch is recomputed by its gradient, and a random
    # node inside it could not be run twice.
    noise = nn.dropout_noise(x, seed)
    keep = nn._keep(x, None, rate)
    return opsdk.cond(_t(training), lambda: _ops.dropout(x, keep, noise), lambda: _ops.identity(x))


from opsdk.v1.normalization import batch_normalization  # noqa: E402,F401 - tf.layers' name


def flatten(inputs: Any, name: Optional[str] = None, **unused: Any) -> Any:
    """[batch, ...] -> [batch, product of the rest]; the product is computed when the graph runs
    where a size after the batch is known only then (as TF's reshape to [shape(x)[0], -1])."""
    x = _t(inputs)
    if x.shape is None:
        raise OpsdkError(f"flatten: '{x.name}' needs a known rank")
    rest = x.shape[1:]
    if any(d is None for d in rest):
        return _m.reshape_to(x, [(x, 0), -1], name=name)
    size = 1
    for d in rest:
        size *= d
    return _ops.reshape(x, shape=[-1, size], name=name)


# TF's layer objects (tf.layers.Dense, Conv2D, ...) over the functions above
from opsdk.v1 import layer_classes as _layer_classes  # noqa: E402
globals().update(_layer_classes.classes(__import__("sys").modules[__name__]))
