"""`tf.metrics`: streaming accuracy and mean, as TF1 computes them: each returns `(value,
update_op)`; running `update_op` adds a batch to two local variables (`total`, `count`), and
`value` reads their ratio (0 before any update). `local_variables_initializer()` resets them."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.v1 import misc as _misc
from opsdk.v1.scopes import GraphKeys
from opsdk.v1.tensors import Variable, convert_to_tensor as _t


def _local(name: str) -> Any:
    return Variable(np.float32(0), trainable=False, collections=[GraphKeys.LOCAL_VARIABLES],
                    name=name)


def _ratio(total: Any, count: Any, name: Optional[str] = None) -> Any:
    """total / count, 0 while count is 0 (TF's div_no_nan)."""
    tiny = opsdk.constant(np.float32(np.finfo(np.float32).tiny))
    return _ops.div(total, _ops.maximum(count, tiny), name=name)


def _streaming(values: Any, weights: Any, name: str) -> tuple[Any, Any]:
    values = _ops.cast(values, dtype="float32") if values.dtype != "float32" else values
    if weights is None:
        batch_total, batch_count = _ops.reduce_sum(values), _ops.cast(
            _ops.reduce_sum(_ops.ones_like(values)), dtype="float32")
    else:
        w = _ops.mul(_ops.ones_like(values), _ops.cast(_t(weights), dtype="float32"))
        batch_total, batch_count = _ops.reduce_sum(_ops.mul(values, w)), _ops.reduce_sum(w)
    with opsdk.name_scope(name):
        total, count = _local("total"), _local("count")
        value = _ratio(total.value(), count.value(), name="value")
        update = _ratio(total.assign_add(batch_total), count.assign_add(batch_count),
                        name="update_op")
    return value, update


def accuracy(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Any = None,
             updates_collections: Any = None, name: Optional[str] = None) -> tuple[Any, Any]:
    """The fraction of predictions equal to labels over every batch updated so far."""
    labels, predictions = _t(labels), _t(predictions)
    if predictions.dtype != labels.dtype:
        predictions = _ops.cast(predictions, dtype=labels.dtype)
    return _streaming(_ops.equal(predictions, labels), weights, name or "accuracy")


def mean(values: Any, weights: Any = None, metrics_collections: Any = None,
         updates_collections: Any = None, name: Optional[str] = None) -> tuple[Any, Any]:
    """The (weighted) mean of every value updated so far."""
    return _streaming(_t(values), weights, name or "mean")


__getattr__ = _misc.refuse_missing("metrics")  # other tf.metrics names: a clear refusal
