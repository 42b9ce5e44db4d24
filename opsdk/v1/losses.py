"""`tf.losses`: per-element losses weighted and reduced as TF1's `compute_weighted_loss` does,
and added to the LOSSES collection (`get_total_loss` sums them).

The default reduction, SUM_BY_NONZERO_WEIGHTS, divides the weighted sum by the number of
elements whose (broadcast) weight is not zero, so weights of 0 mask examples out of the mean;
MEAN divides by the sum of the weights; SUM_OVER_BATCH_SIZE by the number of elements.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import math_ops as _m, nn, scopes
from opsdk.v1.tensors import convert_to_tensor as _t
from opsdk.v1 import misc as _misc


class Reduction:
    NONE, SUM, MEAN = "none", "weighted_sum", "weighted_mean"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    ALL = (NONE, SUM, MEAN, SUM_OVER_BATCH_SIZE, SUM_BY_NONZERO_WEIGHTS)


_LOSSES = scopes.GraphKeys.LOSSES


def _is_one(weights: Any) -> bool:
    number = isinstance(weights, (int, float)) and not isinstance(weights, bool)
    return number and float(weights) == 1.0


def _safe_div(total: Any, count: Any) -> Any:
    """total / count, or 0 where count is 0 (then every weight is 0, and so is total)."""
    return total / _ops.maximum(count, opsdk.constant(np.asarray(1.0, dtype=count.dtype)))


def _reduce(per_element: Any, weights: Any, reduction: str, loss_collection: Any) -> Any:
    if reduction not in Reduction.ALL:
        raise OpsdkError(f"tf.losses: unknown reduction {reduction!r}; use one of "
                         f"{', '.join(Reduction.ALL)} (tf.losses.Reduction)")
    per_element = _t(per_element)
    if _is_one(weights):
        weighted, w = per_element, None
    else:
        w = _m.cast(_t(weights), per_element.dtype) * _ops.ones_like(per_element)
        weighted = per_element * w
    if reduction == Reduction.NONE:
        loss = weighted
    elif reduction == Reduction.SUM:
        loss = _ops.reduce_sum(weighted)
    elif w is None or reduction == Reduction.SUM_OVER_BATCH_SIZE:
        loss = _ops.reduce_mean(weighted)
    elif reduction == Reduction.MEAN:
        loss = _safe_div(_ops.reduce_sum(weighted), _ops.reduce_sum(w))
    else:
        present = _m.cast(_ops.not_equal(w, _ops.zeros_like(w)), per_element.dtype)
        loss = _safe_div(_ops.reduce_sum(weighted), _ops.reduce_sum(present))
    if loss_collection is not None:
        opsdk.get_default_graph().add_to_collection(loss_collection, loss)
    return loss


def softmax_cross_entropy(onehot_labels: Any, logits: Any, weights: Any = 1.0,
                          label_smoothing: float = 0, scope: Any = None,
                          loss_collection: Any = _LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    """One loss per row; label_smoothing moves labels towards 1 / classes."""
    labels = _t(onehot_labels)
    if label_smoothing:
        n = labels.shape[-1]
        labels = labels * (1.0 - label_smoothing) + label_smoothing / n
    per = nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return _reduce(per, weights, reduction, loss_collection)


def sparse_softmax_cross_entropy(labels: Any, logits: Any, weights: Any = 1.0, scope: Any = None,
                                 loss_collection: Any = _LOSSES,
                                 reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    per = nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return _reduce(per, weights, reduction, loss_collection)


def sigmoid_cross_entropy(multi_class_labels: Any, logits: Any, weights: Any = 1.0,
                          label_smoothing: float = 0, scope: Any = None,
                          loss_collection: Any = _LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    """Per element; label_smoothing moves labels towards 1/2."""
    labels = _m.cast(_t(multi_class_labels), _t(logits).dtype)
    if label_smoothing:
        labels = labels * (1.0 - label_smoothing) + 0.5 * label_smoothing
    per = nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    return _reduce(per, weights, reduction, loss_collection)


def mean_squared_error(labels: Any, predictions: Any, weights: Any = 1.0, scope: Any = None,
                       loss_collection: Any = _LOSSES,
                       reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    return _reduce(_ops.square(_t(predictions) - _t(labels)), weights, reduction, loss_collection)


def absolute_difference(labels: Any, predictions: Any, weights: Any = 1.0, scope: Any = None,
                        loss_collection: Any = _LOSSES,
                        reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    return _reduce(_ops.abs(_t(predictions) - _t(labels)), weights, reduction, loss_collection)


def log_loss(labels: Any, predictions: Any, weights: Any = 1.0, epsilon: float = 1e-7,
             scope: Any = None, loss_collection: Any = _LOSSES,
             reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    p, y = _t(predictions), _t(labels)
    per = -(y * _ops.log(p + epsilon)) - (1.0 - y) * _ops.log(1.0 - p + epsilon)
    return _reduce(per, weights, reduction, loss_collection)


def huber_loss(labels: Any, predictions: Any, weights: Any = 1.0, delta: float = 1.0,
               scope: Any = None, loss_collection: Any = _LOSSES,
               reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    """0.5 e^2 where |e| <= delta, else delta (|e| - delta / 2), e = predictions - labels."""
    error = _ops.abs(_t(predictions) - _t(labels))
    quadratic = _m.minimum(error, float(delta))
    per = 0.5 * _ops.square(quadratic) + float(delta) * (error - quadratic)
    return _reduce(per, weights, reduction, loss_collection)


def hinge_loss(labels: Any, logits: Any, weights: Any = 1.0, scope: Any = None,
               loss_collection: Any = _LOSSES,
               reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Any:
    """max(0, 1 - (2 labels - 1) logits), labels in {0, 1}."""
    x = _t(logits)
    signs = 2.0 * _m.cast(_t(labels), x.dtype) - 1.0
    return _reduce(_ops.relu(1.0 - signs * x), weights, reduction, loss_collection)


def add_loss(loss: Any, loss_collection: Any = _LOSSES) -> None:
    if loss_collection is not None:
        opsdk.get_default_graph().add_to_collection(loss_collection, loss)


def get_losses(scope: Optional[str] = None, loss_collection: Any = _LOSSES) -> list:
    return scopes.get_collection(loss_collection, scope)


def get_regularization_losses(scope: Optional[str] = None) -> list:
    return scopes.get_collection(scopes.GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope: Optional[str] = None,
                            name: str = "total_regularization_loss") -> Any:
    """The sum of the regularization losses (of `scope`), 0.0 when there are none, as TF's."""
    parts = get_regularization_losses(scope)
    if not parts:
        return opsdk.constant(np.float32(0.0), name=name)
    return _summed(parts, name)


def get_total_loss(add_regularization_losses: bool = True, name: str = "total_loss") -> Any:
    parts = get_losses() + (get_regularization_losses() if add_regularization_losses else [])
    if not parts:
        raise OpsdkError("get_total_loss: no losses were made (tf.losses.* add theirs)")
    return _summed(parts, name)


def _summed(parts: list, name: str) -> Any:
    """parts[0] + parts[1] + ..., in order, as one named tensor."""
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return _ops.identity(total, name=name)


__getattr__ = _misc.refuse_missing("losses")  # other tf.losses names: a clear refusal
