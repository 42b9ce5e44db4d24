"""Batch normalization as TF1 has it: `tf.layers.batch_normalization`,
`tf.contrib.layers.batch_norm`, `tf.nn.batch_normalization` and
`tf.nn.batch_norm_with_global_normalization`.

The layers keep `moving_mean` / `moving_variance` (not trainable) next to `gamma` / `beta`.
While training (a Python bool, or a bool tensor decided at run time) they normalize with the
batch's moments and make update ops `moving -= (moving - batch) * (1 - momentum)`, put in
`tf.GraphKeys.UPDATE_OPS` for the program to run with its training step, as TF1 does (or run
before the output with contrib's `updates_collections=None`); otherwise they normalize with the
moving averages. Where TF fuses the layer (4-d inputs over the channel axis; contrib's 2-d
inputs too) the moving variance takes the batch variance with Bessel's correction, n / (n - 1),
as TF's fused kernel hands it out; elsewhere the biased one, as TF's other path.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import scopes
from opsdk.v1.tensors import convert_to_tensor as _t


def batch_normalization(inputs: Any, axis: Any = -1, momentum: float = 0.99,
                        epsilon: float = 1e-3, center: bool = True, scale: bool = True,
                        beta_initializer: Any = None, gamma_initializer: Any = None,
                        moving_mean_initializer: Any = None,
                        moving_variance_initializer: Any = None, beta_regularizer: Any = None,
                        gamma_regularizer: Any = None, training: Any = False,
                        trainable: bool = True, name: Optional[str] = None, reuse: Any = None,
                        renorm: bool = False, fused: Any = None, **unused: Any) -> Any:
    """`tf.layers.batch_normalization`: variables under `batch_normalization[_N]/`, update ops in
    UPDATE_OPS while training."""
    who = "layers.batch_normalization"
    if renorm:
        raise OpsdkError(f"{who}: renorm=True is not supported by opsdk.v1")
    x = _t(inputs)
    axes = _channel_axes(who, x, axis)
    inits = {"beta": beta_initializer, "gamma": gamma_initializer,
             "moving_mean": moving_mean_initializer,
             "moving_variance": moving_variance_initializer}
    fusable = fused is not False and x.ndim == 4 and axes[0] in (1, 3)
    with scopes.variable_scope(name, default_name="batch_normalization", reuse=reuse):
        return _normalize(who, x, axes[0], float(momentum), float(epsilon), center, scale, inits,
                          {"beta": beta_regularizer, "gamma": gamma_regularizer}, training,
                          trainable, fusable, scopes.GraphKeys.UPDATE_OPS)


def batch_norm(inputs: Any, decay: float = 0.999, center: bool = True, scale: bool = False,
               epsilon: float = 1e-3, activation_fn: Any = None, param_initializers: Any = None,
               param_regularizers: Any = None, updates_collections: Any = "update_ops",
               is_training: Any = True, reuse: Any = None, variables_collections: Any = None,
               outputs_collections: Any = None, trainable: bool = True,
               batch_weights: Any = None, fused: Any = None, data_format: str = "NHWC",
               zero_debias_moving_mean: bool = False, scope: Optional[str] = None,
               renorm: bool = False, **unused: Any) -> Any:
    """`tf.contrib.layers.batch_norm`: variables under `BatchNorm[_N]/` (no gamma unless
    scale=True), update ops in `updates_collections` (None: run before the output)."""
    who = "contrib.layers.batch_norm"
    if renorm or batch_weights is not None or zero_debias_moving_mean:
        raise OpsdkError(f"{who}: renorm, batch_weights and zero_debias_moving_mean are not "
                         "supported by opsdk.v1")
    if data_format not in ("NHWC", "NCHW"):
        raise OpsdkError(f"{who}: data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    x = _t(inputs)
    axes = _channel_axes(who, x, 1 if data_format == "NCHW" else -1)
    fusable = fused is not False and x.ndim in (2, 4)
    with scopes.variable_scope(scope, default_name="BatchNorm", reuse=reuse):
        y = _normalize(who, x, axes[0], float(decay), float(epsilon), center, scale,
                       dict(param_initializers or {}), dict(param_regularizers or {}),
                       is_training, trainable, fusable, updates_collections)
    return activation_fn(y) if activation_fn is not None else y


def _channel_axes(who: str, x: Any, axis: Any) -> list[int]:
    if x.ndim is None:
        raise OpsdkError(f"{who}: the rank of '{x.name}' must be known")
    axes = [int(a) for a in (axis if isinstance(axis, (list, tuple)) else [axis])]
    if len(axes) != 1 or not -x.ndim <= axes[0] < x.ndim:
        raise OpsdkError(f"{who}: axis must be one axis of the {x.ndim}-d inputs, got {axis!r}")
    axes = [axes[0] % x.ndim]
    if x.shape[axes[0]] is None:
        raise OpsdkError(f"{who}: the size of axis {axes[0]} of '{x.name}' must be known, got "
                         f"shape {x.shape}")
    return axes


def _normalize(who: str, x: Any, axis: int, momentum: float, epsilon: float, center: bool,
               scale: bool, inits: dict, regularizers: dict, training: Any, trainable: bool,
               unbiased: bool, updates: Any) -> Any:
    """The layer's body, in its variable scope: variables, moments, update ops, output."""
    depth = int(x.shape[axis])
    made = {}
    for key, default, on, learn in (("beta", scopes.zeros_initializer(), center, trainable),
                                    ("gamma", scopes.ones_initializer(), scale, trainable),
                                    ("moving_mean", scopes.zeros_initializer(), True, False),
                                    ("moving_variance", scopes.ones_initializer(), True, False)):
        if on:
            made[key] = scopes.get_variable(key, [depth], dtype=x.dtype,
                                            initializer=inits.get(key) or default,
                                            regularizer=regularizers.get(key), trainable=learn)
    reduce = [a for a in range(x.ndim) if a != axis]
    shape = [depth if a == axis else 1 for a in range(x.ndim)]
    if isinstance(training, (bool, np.bool_)) and not training:
        mean, variance = made["moving_mean"].value(), made["moving_variance"].value()
    else:
        mean, variance = _batch_moments(who, x, reduce, made, momentum, training, unbiased,
                                        updates)
    inv = _ops.div(_ops.ones_like(variance), _ops.sqrt(variance + _const(epsilon, x)))
    if "gamma" in made:
        inv = inv * made["gamma"].value()
    shift = -mean * inv
    if "beta" in made:
        shift = shift + made["beta"].value()
    return (x * _ops.reshape(inv, shape=shape)) + _ops.reshape(shift, shape=shape)


def _batch_moments(who: str, x: Any, reduce: list, made: dict, momentum: float, training: Any,
                   unbiased: bool, updates: Any) -> tuple[Any, Any]:
    """The moments to normalize with while training (or, for a bool tensor, those it picks at
    run time), and the moving averages' update ops."""
    mean = _ops.reduce_mean(x, axes=reduce)
    variance = _ops.reduce_mean(_ops.square(x - _ops.reshape(mean, shape=_kept(x, reduce))),
                                axes=reduce)
    rate = _const(1.0 - momentum, x)
    if not isinstance(training, (bool, np.bool_)):  # a tensor: the update keeps the average
        training = _t(training)                     # where it is False, as TF's does
        if training.dtype != "bool":
            raise OpsdkError(f"{who}: training must be a Python bool or a bool tensor, got "
                             f"'{training.name}' of dtype {training.dtype}")
        rate = rate * _ops.cast(training, dtype=x.dtype)
    moved = variance
    if unbiased:
        count = _size(x, reduce)
        moved = variance * count / (count - _const(1.0, x))
    ops = [_update(made["moving_mean"], mean, rate), _update(made["moving_variance"], moved, rate)]
    if updates is None:  # contrib's in-place updates: they run before the output is computed
        with opsdk.control_dependencies(ops):
            mean, variance = _ops.identity(mean), _ops.identity(variance)
    else:
        for op in ops:
            opsdk.get_default_graph().add_to_collection(updates, op)
    if isinstance(training, opsdk.Tensor):
        moving = (made["moving_mean"].value(), made["moving_variance"].value())
        mean, variance = opsdk.cond(training, lambda: (mean, variance), lambda: moving)
    return mean, variance


def _update(variable: Any, value: Any, rate: Any) -> Any:
    """variable -= (variable - value) * rate (TF's assign_moving_average)."""
    return variable.assign_sub((variable.value() - value) * rate)


def _kept(x: Any, reduce: list) -> list[int]:
    return [1 if a in reduce else -1 for a in range(x.ndim)]


def _size(x: Any, reduce: list) -> Any:
    """The number of values each channel's moments average (a tensor: the batch may be known
    only at run time)."""
    dims = _ops.cast(_ops.shape(x), dtype=x.dtype)
    total = _const(1.0, x)
    for a in reduce:
        total = total * dims[a]
    return total


def _const(value: float, like: Any) -> Any:
    return opsdk.constant(np.asarray(value, dtype=like.dtype))


def nn_batch_normalization(x: Any, mean: Any, variance: Any, offset: Any, scale: Any,
                           variance_epsilon: float, name: Optional[str] = None) -> Any:
    """`tf.nn.batch_normalization`: (x - mean) * scale / sqrt(variance + epsilon) + offset, each
    broadcast against x; offset and scale may be None."""
    x = _t(x)
    inv = _ops.div(_ops.ones_like(_t(variance)),
                   _ops.sqrt(_t(variance) + _const(variance_epsilon, x)))
    if scale is not None:
        inv = inv * _t(scale)
    shift = -_t(mean) * inv
    if offset is not None:
        shift = shift + _t(offset)
    return _ops.add(x * inv, shift, name=name)


def batch_norm_with_global_normalization(t: Any, m: Any, v: Any, beta: Any, gamma: Any,
                                         variance_epsilon: float,
                                         scale_after_normalization: bool,
                                         name: Optional[str] = None) -> Any:
    """TF's older form: gamma applied only when scale_after_normalization."""
    return nn_batch_normalization(t, m, v, beta, gamma if scale_after_normalization else None,
                                  variance_epsilon, name=name)
