"""`tf.contrib`: only what TF1 tutorials commonly reach there (see docs/tf1.md): `rnn` cells,
`layers.flatten` / `fully_connected` / `batch_norm` / `dropout` / `xavier_initializer`,
`framework.arg_scope`, `factorization.KMeans`. Anything else raises a clear error."""

from __future__ import annotations

import contextlib
import functools
from types import SimpleNamespace
from typing import Any, Iterator, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import factorization as _factorization, layers as _layers, misc as _misc, rnn as _rnn, scopes
from opsdk.v1 import normalization as _normalization
from opsdk.v1 import math_ops as _m
from opsdk.v1.tensors import convert_to_tensor as _t


NotProvided = _misc.NotProvided
_missing = _misc.not_provided


class _Missing(SimpleNamespace):
    def __init__(self, path: str, **names: Any):
        super().__init__(**names)
        object.__setattr__(self, "_path", path)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise _missing(f"{self._path}.{name}")


rnn = _Missing("contrib.rnn", **vars(_rnn.rnn_cell), static_rnn=_rnn.static_rnn,
               static_bidirectional_rnn=_rnn.static_bidirectional_rnn,
               stack_bidirectional_rnn=_rnn.stack_bidirectional_rnn,
               stack_bidirectional_dynamic_rnn=_rnn.stack_bidirectional_dynamic_rnn)
_ARG_SCOPES: list[dict] = [{}]  # innermost last: function -> the keyword defaults it takes


@contextlib.contextmanager
def arg_scope(list_ops_or_scope: Any, **kwargs: Any) -> Iterator[dict]:
    """`tf.contrib.framework.arg_scope([fully_connected, ...], activation_fn=...)`: inside the
    block those functions take these keyword arguments by default (an explicit argument wins;
    nested scopes add to the outer ones). A dict (a scope yielded earlier) re-enters it."""
    if isinstance(list_ops_or_scope, dict):
        scope = list_ops_or_scope
    else:
        scope = {key: dict(value) for key, value in _ARG_SCOPES[-1].items()}
        for fn in list_ops_or_scope:
            key = getattr(fn, "_arg_scope_key", None)
            if key is None:
                raise OpsdkError(f"arg_scope: {getattr(fn, '__name__', fn)!r} does not take "
                                 "arg_scope defaults (opsdk.v1's contrib.layers functions do)")
            scope[key] = {**scope.get(key, {}), **kwargs}
    _ARG_SCOPES.append(scope)
    try:
        yield scope
    finally:
        _ARG_SCOPES.pop()


def add_arg_scope(fn: Any) -> Any:
    """`fn` taking its keyword defaults from the innermost `arg_scope` that lists it."""
    @functools.wraps(fn)
    def scoped(*args: Any, **kwargs: Any) -> Any:
        defaults = _ARG_SCOPES[-1].get(scoped._arg_scope_key)
        return fn(*args, **{**defaults, **kwargs}) if defaults else fn(*args, **kwargs)
    scoped._arg_scope_key = fn
    return scoped


def _contrib_dropout(inputs: Any, keep_prob: Any = 0.5, noise_shape: Any = None,
                     is_training: Any = True, outputs_collections: Any = None,
                     scope: Optional[str] = None, seed: Any = None) -> Any:
    """`tf.contrib.layers.dropout`: keep_prob, while `is_training` (a bool or a bool tensor)."""
    rate = 1.0 - keep_prob if isinstance(keep_prob, (int, float)) else 1.0 - _t(keep_prob)
    return _layers.dropout(inputs, rate=rate, noise_shape=noise_shape, seed=seed,
                           training=is_training, name=scope)


def _regularizer(kind: str, l1: float, l2: float) -> Any:
    """contrib.layers' regularizers: weights -> l1 * sum(|w|) + l2 * sum(w^2) / 2 (TF's
    l2_loss); a scale of 0 gives a function returning None, as TF's."""
    for scale in (l1, l2):
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale < 0:
            raise OpsdkError(f"contrib.layers.{kind}_regularizer: a scale must be a number "
                             f">= 0, got {scale!r}")
    if not l1 and not l2:
        return lambda weights: None

    def apply(weights: Any) -> Any:
        from opsdk.v1 import nn as _nn

        w = _t(weights)
        terms = []
        if l1:
            terms.append(_m.multiply(float(l1), _ops.reduce_sum(_ops.abs(w), axes=[])))
        if l2:
            terms.append(_m.multiply(float(l2), _nn.l2_loss(w)))
        return terms[0] if len(terms) == 1 else _ops.add(terms[0], terms[1])
    return apply


layers = _Missing("contrib.layers", flatten=add_arg_scope(_layers.flatten),
                  fully_connected=add_arg_scope(_layers.fully_connected),
                  batch_norm=add_arg_scope(_normalization.batch_norm),
                  dropout=add_arg_scope(_contrib_dropout),
                  xavier_initializer=scopes.xavier_initializer,
                  xavier_initializer_conv2d=scopes.xavier_initializer,
                  l1_regularizer=lambda scale, scope=None: _regularizer("l1", scale, 0.0),
                  l2_regularizer=lambda scale, scope=None: _regularizer("l2", 0.0, scale),
                  l1_l2_regularizer=lambda scale_l1=1.0, scale_l2=1.0, scope=None:
                  _regularizer("l1_l2", scale_l1, scale_l2))
framework = _Missing("contrib.framework", arg_scope=arg_scope, add_arg_scope=add_arg_scope)

factorization = _Missing("contrib.factorization", KMeans=_factorization.KMeans,
                         **{name: getattr(_factorization, name) for name in (
                             "SQUARED_EUCLIDEAN_DISTANCE", "COSINE_DISTANCE",
                             "MANHATTAN_DISTANCE", "RANDOM_INIT", "KMEANS_PLUS_PLUS_INIT",
                             "KMC2_INIT")})


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise _missing(f"contrib.{name}")


def sequence_loss(logits: Any, targets: Any, weights: Any, average_across_timesteps: bool = True,
                  average_across_batch: bool = True, sum_over_timesteps: bool = False,
                  sum_over_batch: bool = False, softmax_loss_function: Any = None,
                  name: Optional[str] = None) -> Any:
    """`tf.contrib.seq2seq.sequence_loss`: the sparse softmax cross-entropy of logits [batch,
    steps, classes] against integer targets [batch, steps], weighted by weights [batch, steps],
    averaged over the timesteps and/or the batch (each average divides by the weights' sum)."""
    if softmax_loss_function is not None or sum_over_timesteps or sum_over_batch:
        raise NotProvided("tf.contrib.seq2seq.sequence_loss: softmax_loss_function, "
                          "sum_over_timesteps and sum_over_batch are not provided by opsdk.v1")
    logits, targets, weights = _t(logits), _t(targets), _t(weights)
    if logits.ndim != 3 or logits.shape[-1] is None:
        raise OpsdkError(f"sequence_loss: argument 'logits' must be [batch, steps, classes] with "
                         f"the classes known, got {logits.shape}")
    flat = _ops.sparse_softmax_cross_entropy_with_logits(
        _ops.reshape(targets, shape=[-1]), _ops.reshape(logits, shape=[-1, logits.shape[-1]]))
    losses = _ops.mul(_m.reshape_to(flat, [(targets, i) for i in range(targets.ndim)]), weights)
    axes = [a for a, on in ((0, average_across_batch), (1, average_across_timesteps)) if on]
    if not axes:
        return _ops.identity(losses, name=name)
    total = _ops.reduce_sum(losses, axes=axes)
    tiny = opsdk.constant(np.asarray(1e-12, dtype=losses.dtype))
    return _ops.div(total, _ops.add(_ops.reduce_sum(weights, axes=axes), tiny), name=name)


seq2seq = _Missing("contrib.seq2seq", sequence_loss=sequence_loss)
