"""`tf.nn`: activations, losses, conv/pool (NHWC), dropout, embeddings and sampled losses, with
TF1's signatures and keyword aliases (`dim=`, `keep_prob=`/`rate=`, `_sentinel`).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import args as _args, math_ops as _m, misc as _misc
from opsdk.v1.tensors import convert_to_tensor as _t, per_run_seed

sigmoid, tanh = _m.sigmoid, _m.tanh


def relu(features: Any, name: Optional[str] = None) -> Any:
    return _ops.relu(_t(features), name=name)


def relu6(features: Any, name: Optional[str] = None) -> Any:
    return _m.minimum(_ops.relu(_t(features)), 6.0, name=name)


def elu(features: Any, name: Optional[str] = None) -> Any:
    x = _t(features)
    return _ops.where(_m.greater(x, 0.0), x, _ops.exp(_m.minimum(x, 0.0)) - 1.0, name=name)


def leaky_relu(features: Any, alpha: float = 0.2, name: Optional[str] = None) -> Any:
    x = _t(features)
    return _ops.maximum(x, x * alpha, name=name)


def softplus(features: Any, name: Optional[str] = None) -> Any:
    x = _t(features)  # log(1 + e^x) = relu(x) + log(1 + e^-|x|), without overflow
    return _ops.add(_ops.relu(x), _m.log1p(_ops.exp(_ops.neg(_ops.abs(x)))), name=name)


def _axis(axis: Any, dim: Any) -> int:
    chosen = dim if axis is None else axis
    return -1 if chosen is None else _args.static_int("softmax", "axis", chosen)


def softmax(logits: Any, axis: Any = None, name: Optional[str] = None, dim: Any = None) -> Any:
    return _ops.softmax(_t(logits), axis=_axis(axis, dim), name=name)


def log_softmax(logits: Any, axis: Any = None, name: Optional[str] = None, dim: Any = None) -> Any:
    return _ops.log_softmax(_t(logits), axis=_axis(axis, dim), name=name)


def _by_name(who: str, sentinel: Any) -> None:
    if sentinel is not None:
        raise OpsdkError(f"{who}: pass labels= and logits= by name (as TensorFlow requires)")


def softmax_cross_entropy_with_logits(_sentinel: Any = None, labels: Any = None, logits: Any = None,
                                      dim: int = -1, name: Optional[str] = None,
                                      axis: Any = None) -> Any:
    """One loss per row: -sum(labels * log_softmax(logits)). Gradients flow into labels too
    (TF1's v1 function stops them; use stop_gradient on labels when they are variables)."""
    _by_name("softmax_cross_entropy_with_logits", _sentinel)
    if _axis(axis, dim) != -1:
        raise OpsdkError("softmax_cross_entropy_with_logits: opsdk.v1 supports the last axis only")
    labels, logits = _t(labels), _t(logits)
    if labels.dtype != logits.dtype:  # TF casts the labels (e.g. one-hot ints) to the logits'
        labels = _ops.cast(labels, dtype=logits.dtype)
    return _ops.softmax_cross_entropy_with_logits(labels, logits, name=name)


softmax_cross_entropy_with_logits_v2 = softmax_cross_entropy_with_logits


def sparse_softmax_cross_entropy_with_logits(_sentinel: Any = None, labels: Any = None,
                                             logits: Any = None, name: Optional[str] = None) -> Any:
    """One loss per row for integer class labels."""
    _by_name("sparse_softmax_cross_entropy_with_logits", _sentinel)
    return _ops.sparse_softmax_cross_entropy_with_logits(_t(labels), _t(logits), name=name)


def sigmoid_cross_entropy_with_logits(_sentinel: Any = None, labels: Any = None,
                                      logits: Any = None, name: Optional[str] = None) -> Any:
    """max(x, 0) - x * z + log(1 + exp(-|x|)), elementwise (stable for large |x|)."""
    _by_name("sigmoid_cross_entropy_with_logits", _sentinel)
    x, z = _t(logits), _t(labels)
    return _ops.add(_ops.relu(x) - x * z, _m.log1p(_ops.exp(_ops.neg(_ops.abs(x)))), name=name)


def l2_loss(t: Any, name: Optional[str] = None) -> Any:
    return _ops.mul(_ops.reduce_sum(_ops.square(_t(t))), _scalar(0.5, _t(t)), name=name)


def _scalar(value: float, like: Any) -> Any:
    return opsdk.constant(np.asarray(value, dtype=like.dtype))


def bias_add(value: Any, bias: Any, data_format: Any = None, name: Optional[str] = None) -> Any:
    if data_format not in (None, "NHWC", "N...C"):
        raise OpsdkError(f"bias_add: data_format {data_format!r}: opsdk.v1 supports NHWC only")
    return _ops.bias_add(_t(value), _t(bias), name=name)


def _hw(who: str, values: Any, name: str) -> list[int]:
    """TF's 4-entry NHWC strides/ksize ([1, s, s, 1]) or 2 entries, as (height, width)."""
    values = [int(v) for v in (values if isinstance(values, (list, tuple)) else [values] * 2)]
    if len(values) == 4:
        if values[0] != 1 or values[3] != 1:
            raise OpsdkError(f"{who}: {name} {values} steps over batch or channels; only "
                             "[1, h, w, 1] is supported")
        return values[1:3]
    if len(values) != 2:
        raise OpsdkError(f"{who}: {name} must have 4 entries [1, h, w, 1] (or 2), got {values}")
    return values


def _padding(who: str, padding: str) -> str:
    padding = str(padding).upper()
    if padding not in ("SAME", "VALID"):
        raise OpsdkError(f"{who}: padding must be 'SAME' or 'VALID', got {padding!r}")
    return padding


def _nhwc(who: str, data_format: Any) -> None:
    if data_format not in (None, "NHWC"):
        raise OpsdkError(f"{who}: data_format {data_format!r}: opsdk.v1 supports NHWC only")


def conv2d(input: Any, filter: Any = None, strides: Any = None, padding: Any = None,
           use_cudnn_on_gpu: bool = True, data_format: Any = "NHWC", dilations: Any = None,
           name: Optional[str] = None, filters: Any = None) -> Any:
    """2-D convolution of NHWC images with a [kh, kw, in, out] filter."""
    _nhwc("conv2d", data_format)
    if dilations not in (None, [1, 1, 1, 1], (1, 1, 1, 1)):
        raise OpsdkError("conv2d: dilations are not supported by opsdk.v1")
    (sh, sw), same = _hw("conv2d", strides, "strides"), _padding("conv2d", padding) == "SAME"
    return _ops.conv2d(_t(input), _t(filter if filter is not None else filters),
                       stride_h=sh, stride_w=sw, same=int(same), name=name)


def _pool(op: str):
    def pool(value: Any, ksize: Any, strides: Any, padding: Any, data_format: Any = "NHWC",
             name: Optional[str] = None, input: Any = None) -> Any:
        _nhwc(op, data_format)
        (kh, kw), (sh, sw) = _hw(op, ksize, "ksize"), _hw(op, strides, "strides")
        return getattr(_ops, op)(_t(value if value is not None else input), ksize_h=kh,
                                 ksize_w=kw, stride_h=sh, stride_w=sw,
                                 same=int(_padding(op, padding) == "SAME"), name=name)
    pool.__name__ = op
    pool.__doc__ = f"`{op}` over NHWC windows ksize=[1, h, w, 1], TF's signature."
    return pool


max_pool, avg_pool = _pool("max_pool"), _pool("avg_pool")


def dropout(x: Any, keep_prob: Any = None, noise_shape: Any = None, seed: Optional[int] = None,
            name: Optional[str] = None, rate: Any = None) -> Any:
    """Keep each element with probability keep_prob (a number or a scalar tensor, e.g. a
    placeholder fed 0.5 in training and 1.0 in tests), scaled by 1 / keep_prob."""
    if noise_shape is not None:
        raise OpsdkError("dropout: noise_shape is not supported by opsdk.v1")
    if (keep_prob is None) == (rate is None):
        raise OpsdkError("dropout: give keep_prob or rate (one of them)")
    x = _t(x)
    keep = _keep(x, keep_prob, rate)
    return _ops.dropout(x, keep, dropout_noise(x, seed), name=name)


def dropout_noise(x: Any, seed: Optional[int]) -> Any:
    """Uniform noise like x, drawn anew at every run, seeded or not (tensors.per_run_seed)."""
    return _ops.random_uniform_like(x, seed=per_run_seed(seed))


def _keep(x: Any, keep_prob: Any, rate: Any) -> Any:
    if keep_prob is not None:
        keep = keep_prob
    else:
        keep = (1.0 - rate) if not isinstance(rate, opsdk.Tensor) else _scalar(1.0, x) - rate
    keep = _t(keep) if isinstance(keep, opsdk.Tensor) or hasattr(keep, "_as_graph_element") \
        else _scalar(keep, x)
    if keep.dtype != x.dtype:
        keep = _ops.cast(keep, dtype=x.dtype)
    if keep.shape not in (None, ()):
        keep = _ops.reshape(keep, shape=[])
    return keep


def embedding_lookup(params: Any, ids: Any, partition_strategy: str = "mod",
                     name: Optional[str] = None, validate_indices: bool = True,
                     max_norm: Any = None) -> Any:
    """Rows of params at ids (one table; a list of one table is accepted)."""
    if isinstance(params, (list, tuple)):
        if len(params) != 1:
            raise OpsdkError("embedding_lookup: opsdk.v1 supports one table, not a sharded list")
        params = params[0]
    return _ops.gather(_t(params), _t(ids), axis=0, name=name)


def in_top_k(predictions: Any, targets: Any, k: int, name: Optional[str] = None) -> Any:
    return _ops.in_top_k(_t(predictions), _t(targets), k=_args.static_int("in_top_k", "k", k),
                         name=name)


def moments(x: Any, axes: Any, shift: Any = None, name: Optional[str] = None,
            keep_dims: bool = False, keepdims: Any = None) -> tuple:
    keep = bool(keepdims if keepdims is not None else keep_dims)
    mean = _ops.reduce_mean(_t(x), axes=list(axes), keepdims=True)
    var = _ops.reduce_mean(_ops.square(_t(x) - mean), axes=list(axes), keepdims=keep)
    return (mean if keep else _ops.reduce_mean(_t(x), axes=list(axes)), var)


def zero_fraction(value: Any, name: Optional[str] = None) -> Any:
    zero = _ops.cast(_ops.equal(_t(value), _scalar(0, _t(value))), dtype="float32")
    return _ops.reduce_mean(zero, name=name)


from opsdk.v1.sampled import nce_loss, sampled_softmax_loss  # noqa: E402 - uses this module
from opsdk.v1 import rnn as _rnn  # noqa: E402
rnn_cell = _rnn.rnn_cell
static_rnn, dynamic_rnn = _rnn.static_rnn, _rnn.dynamic_rnn


__getattr__ = _misc.refuse_missing("nn")  # other tf.nn names: a clear refusal
