"""`tf.contrib`: only what TF1 tutorials commonly reach there (see docs/tf1.md): `rnn` cells,
`layers.flatten` / `fully_connected` / `xavier_initializer`, `factorization.KMeans`. Anything
else raises a clear error."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import factorization as _factorization, layers as _layers, misc as _misc, rnn as _rnn, scopes
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
layers = _Missing("contrib.layers", flatten=_layers.flatten,
                  fully_connected=_layers.fully_connected,
                  xavier_initializer=scopes.xavier_initializer,
                  xavier_initializer_conv2d=scopes.xavier_initializer)

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
    losses = _ops.mul(_ops.reshape(flat, shape=[-1 if d is None else d for d in targets.shape]),
                      weights)
    axes = [a for a, on in ((0, average_across_batch), (1, average_across_timesteps)) if on]
    if not axes:
        return _ops.identity(losses, name=name)
    total = _ops.reduce_sum(losses, axes=axes)
    tiny = opsdk.constant(np.asarray(1e-12, dtype=losses.dtype))
    return _ops.div(total, _ops.add(_ops.reduce_sum(weights, axes=axes), tiny), name=name)


seq2seq = _Missing("contrib.seq2seq", sequence_loss=sequence_loss)
