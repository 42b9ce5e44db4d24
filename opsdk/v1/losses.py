"""`tf.losses`: the usual losses reduced to a scalar mean (TF's default reduction,
SUM_BY_NONZERO_WEIGHTS, equals the mean when weights are 1), added to the LOSSES collection."""

from __future__ import annotations

from typing import Any, Optional

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import nn, scopes
from opsdk.v1.tensors import convert_to_tensor as _t


class Reduction:
    NONE, SUM, MEAN = "none", "weighted_sum", "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"


def _reduce(per_example: Any, weights: Any, reduction: str) -> Any:
    if not (isinstance(weights, (int, float)) and float(weights) == 1.0):
        per_example = per_example * _t(weights)
    if reduction == Reduction.NONE:
        loss = per_example
    elif reduction == Reduction.SUM:
        loss = _ops.reduce_sum(per_example)
    else:
        loss = _ops.reduce_mean(per_example)
    opsdk.get_default_graph().add_to_collection(scopes.GraphKeys.LOSSES, loss)
    return loss


def softmax_cross_entropy(onehot_labels: Any, logits: Any, weights: Any = 1.0,
                          label_smoothing: float = 0, scope: Any = None,
                          loss_collection: Any = None,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    labels = _t(onehot_labels)
    if label_smoothing:
        n = labels.shape[-1]
        labels = labels * (1.0 - label_smoothing) + label_smoothing / n
    per = nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return _reduce(per, weights, reduction)


def sparse_softmax_cross_entropy(labels: Any, logits: Any, weights: Any = 1.0, scope: Any = None,
                                 loss_collection: Any = None,
                                 reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    per = nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return _reduce(per, weights, reduction)


def sigmoid_cross_entropy(multi_class_labels: Any, logits: Any, weights: Any = 1.0,
                          label_smoothing: float = 0, scope: Any = None,
                          loss_collection: Any = None,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    per = nn.sigmoid_cross_entropy_with_logits(labels=multi_class_labels, logits=logits)
    return _reduce(per, weights, reduction)


def mean_squared_error(labels: Any, predictions: Any, weights: Any = 1.0, scope: Any = None,
                       loss_collection: Any = None,
                       reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    return _reduce(_ops.square(_t(predictions) - _t(labels)), weights, reduction)


def absolute_difference(labels: Any, predictions: Any, weights: Any = 1.0, scope: Any = None,
                        loss_collection: Any = None,
                        reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    return _reduce(_ops.abs(_t(predictions) - _t(labels)), weights, reduction)


def log_loss(labels: Any, predictions: Any, weights: Any = 1.0, epsilon: float = 1e-7,
             scope: Any = None, loss_collection: Any = None,
             reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    p, y = _t(predictions), _t(labels)
    per = -(y * _ops.log(p + epsilon)) - (1.0 - y) * _ops.log(1.0 - p + epsilon)
    return _reduce(per, weights, reduction)


def get_losses(scope: Optional[str] = None) -> list:
    return scopes.get_collection(scopes.GraphKeys.LOSSES, scope)


def get_regularization_losses(scope: Optional[str] = None) -> list:
    return scopes.get_collection(scopes.GraphKeys.REGULARIZATION_LOSSES, scope)


def get_total_loss(add_regularization_losses: bool = True, name: str = "total_loss") -> Any:
    parts = get_losses() + (get_regularization_losses() if add_regularization_losses else [])
    if not parts:
        raise OpsdkError("get_total_loss: no losses were made (tf.losses.* add theirs)")
    return _ops.add_n(parts, name=name) if hasattr(_ops, "add_n") else _sum(parts, name)


def _sum(parts: list, name: str) -> Any:
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return _ops.identity(total, name=name)
