"""`tf.nn`: activations, losses, conv/pool (NHWC), dropout, embeddings and sampled losses, with
TF1's signatures and keyword aliases (`dim=`, `keep_prob=`/`rate=`, `_sentinel`).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import (args as _args, math_ops as _m, misc as _misc, partitioned as _partitioned,
                      rnn_run as _rnn_run)
from opsdk.v1.tensors import convert_to_tensor as _t, op_seed

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


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805


def selu(features: Any, name: Optional[str] = None) -> Any:
    """scale * (x if x > 0 else alpha * (exp(x) - 1)), TF's constants."""
    x = _t(features)
    negative = _ops.mul(_scalar(_SELU_ALPHA, x), elu(x))
    return _ops.mul(_scalar(_SELU_SCALE, x), _ops.where(_m.greater(x, 0.0), x, negative),
                    name=name)


def softsign(features: Any, name: Optional[str] = None) -> Any:
    """x / (1 + |x|)."""
    x = _t(features)
    return _ops.div(x, _ops.add(_scalar(1.0, x), _ops.abs(x)), name=name)


def swish(features: Any, beta: float = 1.0, name: Optional[str] = None) -> Any:
    """x * sigmoid(beta * x) (silu for beta 1)."""
    x = _t(features)
    scaled = x if beta == 1.0 else _ops.mul(_scalar(beta, x), x)
    return _ops.mul(x, _ops.sigmoid(scaled), name=name)


silu = swish


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
    if _differ(labels.shape, logits.shape):
        return _flattened_cross_entropy(labels, logits, name)
    return _ops.softmax_cross_entropy_with_logits(labels, logits, name=name)


def _flattened_cross_entropy(labels: Any, logits: Any, name: Optional[str]) -> Any:
    """TF's way with shapes that differ ([1, n, k] labels, [n, k] logits; [1, k] labels): both
    flattened to rows of k classes, a single row broadcast to the other's rows, and the losses
    shaped as logits' leading dims."""
    k = logits.shape[-1] if logits.shape else None
    if k is None or labels.shape[-1] not in (None, k):
        raise OpsdkError(f"softmax_cross_entropy_with_logits: labels of shape "
                         f"{list(labels.shape)} and logits of shape {list(logits.shape)} need "
                         "one known number of classes in their last axis")
    rows_labels = _ops.reshape(labels, shape=[-1, k])
    rows_logits = _ops.reshape(logits, shape=[-1, k])
    losses = _ops.softmax_cross_entropy_with_logits(
        _ops.add(rows_labels, _ops.zeros_like(rows_logits)),
        _ops.add(rows_logits, _ops.zeros_like(rows_labels)))
    return _m.reshape_to(losses, _m._sizes(logits, {len(logits.shape) - 1}), name=name)


def _differ(a: Any, b: Any) -> bool:
    """Whether two static shapes are known to differ (in rank or in a known size)."""
    if a is None or b is None:
        return False
    return len(a) != len(b) or any(x is not None and y is not None and x != y
                                   for x, y in zip(a, b))


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


def weighted_cross_entropy_with_logits(targets: Any = None, logits: Any = None,
                                       pos_weight: Any = None, name: Optional[str] = None,
                                       labels: Any = None) -> Any:
    """sigmoid_cross_entropy_with_logits with the positive term weighted by pos_weight:
    (1 - z) * x + (1 + (pos_weight - 1) * z) * (log(1 + exp(-|x|)) + max(-x, 0))."""
    z = _t(labels if targets is None else targets)
    x = _t(logits)
    if pos_weight is None:
        raise OpsdkError("weighted_cross_entropy_with_logits: give pos_weight")
    weight = _ops.add(_scalar(1.0, x), _ops.mul(_ops.sub(_m.cast(pos_weight, x.dtype),
                                                         _scalar(1.0, x)), z))
    softplus_neg = _ops.add(_m.log1p(_ops.exp(_ops.neg(_ops.abs(x)))), _ops.relu(_ops.neg(x)))
    return _ops.add(_ops.mul(_ops.sub(_scalar(1.0, x), z), x), _ops.mul(weight, softplus_neg),
                    name=name)


def relu_layer(x: Any, weights: Any, biases: Any, name: Optional[str] = None) -> Any:
    """relu(x @ weights + biases)."""
    return _ops.relu(xw_plus_b(x, weights, biases), name=name)


def local_response_normalization(input: Any, depth_radius: int = 5, bias: float = 1.0,  # noqa: A002
                                 alpha: float = 1.0, beta: float = 0.5,
                                 name: Optional[str] = None) -> Any:
    """x / (bias + alpha * s) ** beta, s the sum of squares over the channels within
    depth_radius of each (NHWC; the channel count known when the graph is built)."""
    from opsdk.v1.composed import pad

    x = _t(input)
    if x.shape is None or len(x.shape) != 4 or x.shape[3] is None:
        raise OpsdkError(f"local_response_normalization: give an NHWC tensor whose channel "
                         f"count is known when the graph is built, got shape {x.shape}")
    r, channels = int(depth_radius), int(x.shape[3])
    squares = pad(_ops.square(x), [[0, 0], [0, 0], [0, 0], [r, r]])
    windows = [_ops.slice(squares, begin=[0, 0, 0, i], size=[-1, -1, -1, channels])
               for i in range(2 * r + 1)]
    total = windows[0]
    for window in windows[1:]:
        total = _ops.add(total, window)
    scale = _ops.add(_scalar(bias, x), _ops.mul(_scalar(alpha, x), total))
    return _ops.div(x, _ops.pow(scale, _scalar(beta, x)), name=name)


lrn = local_response_normalization


def l2_loss(t: Any, name: Optional[str] = None) -> Any:
    return _ops.mul(_ops.reduce_sum(_ops.square(_t(t))), _scalar(0.5, _t(t)), name=name)


def _scalar(value: float, like: Any) -> Any:
    return opsdk.constant(np.asarray(value, dtype=like.dtype))


def bias_add(value: Any, bias: Any, data_format: Any = None, name: Optional[str] = None) -> Any:
    if data_format not in (None, "NHWC", "N...C"):
        raise OpsdkError(f"bias_add: data_format {data_format!r}: opsdk.v1 supports NHWC only")
    return _ops.bias_add(_t(value), _t(bias), name=name)


def xw_plus_b(x: Any, weights: Any, biases: Any, name: Optional[str] = None) -> Any:
    """`tf.nn.xw_plus_b`: matmul(x, weights) + biases, the bias added along the last axis."""
    from opsdk.v1.math_ops import matmul

    return bias_add(matmul(x, weights), biases, name=name)


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
    """2-D convolution of NHWC images with a [kh, kw, in, out] filter; dilations (with strides
    of 1, as TF requires) convolve with the filter spread out, zeros between its taps."""
    _nhwc("conv2d", data_format)
    (sh, sw), same = _hw("conv2d", strides, "strides"), _padding("conv2d", padding) == "SAME"
    kernel = _t(filter if filter is not None else filters)
    if dilations not in (None, [1, 1, 1, 1], (1, 1, 1, 1)):
        rh, rw = _hw("conv2d", dilations, "dilations")
        if (rh, rw) != (1, 1) and (sh, sw) != (1, 1):
            raise OpsdkError("conv2d: dilations > 1 need strides of 1 (as TF's)")
        kernel = _dilated("conv2d", kernel, rh, rw)
    return _ops.conv2d(_t(input), kernel, stride_h=sh, stride_w=sw, same=int(same), name=name)


def _dilated(who: str, kernel: Any, rh: int, rw: int) -> Any:
    """A [kh, kw, ...] filter spread to [(kh-1)*rh+1, (kw-1)*rw+1, ...], zeros between its taps
    (a scatter, so the gradient reaches the taps)."""
    if (rh, rw) == (1, 1):
        return kernel
    if kernel.shape is None or None in kernel.shape[:2] or len(kernel.shape) != 4:
        raise OpsdkError(f"{who}: a dilated filter needs its [kh, kw, in, out] shape known")
    kh, kw = int(kernel.shape[0]), int(kernel.shape[1])
    taps = np.array([[i * rh, j * rw] for i in range(kh) for j in range(kw)], np.int64)
    rest = [int(d) for d in kernel.shape[2:]]
    size = [(kh - 1) * rh + 1, (kw - 1) * rw + 1, *rest]
    return _ops.scatter_nd(opsdk.constant(taps), _ops.reshape(kernel, shape=[kh * kw, *rest]),
                           opsdk.constant(np.asarray(size, np.int64)), shape=size)


def atrous_conv2d(value: Any, filters: Any, rate: int, padding: str,
                  name: Optional[str] = None) -> Any:
    """`tf.nn.atrous_conv2d`: conv2d with the filter dilated by rate."""
    r = _args.static_int("atrous_conv2d", "rate", rate)
    if r < 1:
        raise OpsdkError(f"atrous_conv2d: rate must be >= 1, got {r}")
    return conv2d(value, filters, [1, 1, 1, 1], padding, dilations=[1, r, r, 1], name=name)


def depthwise_conv2d(input: Any, filter: Any, strides: Any, padding: Any,  # noqa: A002
                     rate: Any = None, name: Optional[str] = None,
                     data_format: Any = None, dilations: Any = None) -> Any:
    """Each input channel convolved with its own [kh, kw, 1, multiplier] filters: output
    channel c * multiplier + m, as TF's."""
    _nhwc("depthwise_conv2d", data_format)
    x, kernel = _t(input), _t(filter)
    if kernel.shape is None or len(kernel.shape) != 4 or None in kernel.shape:
        raise OpsdkError("depthwise_conv2d: the filter's [kh, kw, in, multiplier] shape must be "
                         "known")
    channels = int(kernel.shape[2])
    if x.shape is not None and x.shape[-1] not in (None, channels):
        raise OpsdkError(f"depthwise_conv2d: the input has {x.shape[-1]} channels, the filter "
                         f"{channels}")
    r = rate if rate is not None else (None if dilations is None else _hw(
        "depthwise_conv2d", dilations, "dilations"))
    dil = [1, 1, 1, 1] if r is None else [1, *(_hw("depthwise_conv2d", r, "rate")), 1]
    parts = [conv2d(x[..., c:c + 1], kernel[:, :, c:c + 1, :], strides, padding,
                    dilations=dil) for c in range(channels)]
    return _m.concat(parts, axis=3, name=name) if len(parts) > 1 else _ops.identity(parts[0],
                                                                                     name=name)


def separable_conv2d(input: Any, depthwise_filter: Any, pointwise_filter: Any,  # noqa: A002
                     strides: Any, padding: Any, rate: Any = None, name: Optional[str] = None,
                     data_format: Any = None, dilations: Any = None) -> Any:
    """depthwise_conv2d, then a 1x1 conv2d with pointwise_filter ([1, 1, in*mult, out])."""
    deep = depthwise_conv2d(input, depthwise_filter, strides, padding, rate, None, data_format,
                            dilations)
    return conv2d(deep, pointwise_filter, [1, 1, 1, 1], "VALID", name=name)


def crelu(features: Any, name: Optional[str] = None, axis: int = -1) -> Any:
    """relu(x) and relu(-x) concatenated along axis."""
    x = _t(features)
    return _m.concat([_ops.relu(x), _ops.relu(_ops.neg(x))], axis=axis, name=name)


def log_poisson_loss(targets: Any, log_input: Any, compute_full_loss: bool = False,
                     name: Optional[str] = None) -> Any:
    """exp(log_input) - log_input * targets (with Stirling's term for targets > 1 when
    compute_full_loss), as TF's."""
    c, z = _t(log_input), _t(targets)
    loss = _ops.sub(_ops.exp(c), _ops.mul(c, z))
    if not compute_full_loss:
        return _ops.identity(loss, name=name)
    zero, one = _ops.zeros_like(z), _ops.ones_like(z)
    inside = _ops.equal(_ops.mul(_m.cast(_ops.greater_equal(z, zero), z.dtype),
                                 _m.cast(_ops.less_equal(z, one), z.dtype)), one)
    safe = _ops.where(inside, one, z)  # 0 <= z <= 1 takes no term: no log(0) computed there
    half = _m.cast(0.5, z.dtype)
    stirling = _ops.add(_ops.sub(_ops.mul(safe, _ops.log(safe)), safe),
                        _ops.mul(half, _ops.log(_ops.mul(_m.cast(2 * np.pi, z.dtype), safe))))
    return _ops.add(loss, _ops.where(inside, zero, stirling), name=name)


def sufficient_statistics(x: Any, axes: Any, shift: Any = None, keep_dims: Any = None,
                          name: Optional[str] = None, keepdims: Any = None) -> tuple:
    """(count, sum of x - shift, sum of its squares, shift) over axes, as TF's."""
    t = _t(x)
    keep = bool(keepdims if keep_dims is None else keep_dims)
    axes = [int(a) for a in np.atleast_1d(axes)]
    if t.shape is None or any(t.shape[a] is None for a in axes):
        raise OpsdkError("sufficient_statistics: the sizes of axes must be known")
    count = opsdk.constant(np.asarray(np.prod([t.shape[a] for a in axes]), dtype=t.dtype))
    centred = t if shift is None else _ops.sub(t, _t(shift))
    total = _m.reduce_sum(centred, axis=axes, keepdims=keep)
    squares = _m.reduce_sum(_ops.mul(centred, centred), axis=axes, keepdims=keep)
    return count, total, squares, (None if shift is None else _t(shift))


def normalize_moments(counts: Any, mean_ss: Any, variance_ss: Any, shift: Any,
                      name: Optional[str] = None) -> tuple:
    """(mean, variance) from sufficient statistics, as TF's."""
    divisor = _ops.div(_ops.ones_like(_t(counts)), _t(counts))
    shifted = _ops.mul(_t(mean_ss), divisor)
    mean = shifted if shift is None else _ops.add(shifted, _t(shift))
    variance = _ops.sub(_ops.mul(_t(variance_ss), divisor), _ops.mul(shifted, shifted))
    return mean, variance


def weighted_moments(x: Any, axes: Any, frequency_weights: Any, name: Optional[str] = None,
                     keep_dims: Any = None, keepdims: Any = None) -> tuple:
    """(mean, variance) over axes, each element weighted by frequency_weights (broadcast)."""
    t, w = _t(x), _t(frequency_weights)
    keep = bool(keepdims if keep_dims is None else keep_dims)
    axes = [int(a) for a in np.atleast_1d(axes)]
    weights = _ops.add(w, _ops.zeros_like(t))
    total = _m.reduce_sum(weights, axis=axes, keepdims=True)
    mean = _ops.div(_m.reduce_sum(_ops.mul(t, weights), axis=axes, keepdims=True), total)
    deviation = _ops.sub(t, mean)
    variance = _ops.div(_m.reduce_sum(_ops.mul(_ops.mul(deviation, deviation), weights),
                                      axis=axes, keepdims=True), total)
    if not keep:
        mean, variance = _m.squeeze(mean, axes), _m.squeeze(variance, axes)
    return mean, variance


def conv1d(value: Any = None, filters: Any = None, stride: Any = None, padding: Any = None,
           use_cudnn_on_gpu: Any = None, data_format: Any = "NWC", name: Optional[str] = None,
           input: Any = None, dilations: Any = None) -> Any:  # noqa: A002 (TF's names)
    """1-D convolution of [batch, width, in] by a [kernel width, in, out] filter, as TF makes
    it: a conv2d over a height of 1, that axis then dropped."""
    if data_format not in ("NWC", "NHWC", None):
        raise OpsdkError(f"conv1d: data_format {data_format!r}; opsdk.v1 supports 'NWC' only")
    if dilations not in (None, 1, [1], [1, 1, 1], (1,), (1, 1, 1)):
        raise OpsdkError("conv1d: dilations are not supported by opsdk.v1")
    x = _m.expand_dims(_t(value if value is not None else input), 1)
    step = stride[-2] if isinstance(stride, (list, tuple)) and len(stride) == 3 else stride
    if isinstance(step, (list, tuple)) and len(step) == 1:
        step = step[0]
    step = _args.static_int("conv1d", "stride", step)
    y = conv2d(x, _m.expand_dims(_t(filters), 0), [1, 1, step, 1], padding)
    return _m.squeeze(y, [1], name=name)


def conv2d_transpose(value: Any = None, filter: Any = None, output_shape: Any = None,
                     strides: Any = None, padding: str = "SAME", data_format: Any = "NHWC",
                     name: Optional[str] = None, input: Any = None, filters: Any = None,
                     dilations: Any = None) -> Any:
    """The transpose of conv2d (its gradient with respect to the input) for NHWC `value` and a
    [kh, kw, out_channels, in_channels] filter; `output_shape` [batch, height, width,
    out_channels] as TF's (a list, or a tensor built from constants; the batch may be a tensor)."""
    who = "conv2d_transpose"
    _nhwc(who, data_format)
    if dilations not in (None, 1, [1, 1, 1, 1], (1, 1, 1, 1)):
        raise OpsdkError(f"{who}: dilations are not supported by opsdk.v1")
    x = _t(value if value is not None else input)
    w = _t(filter if filter is not None else filters)
    (sh, sw), same = _hw(who, strides, "strides"), _padding(who, padding) == "SAME"
    out = _output_shape(who, output_shape)
    extra_h, extra_w = _transpose_extras(who, x, w, out, (sh, sw), same)
    return _ops.conv2d_transpose(x, w, stride_h=sh, stride_w=sw, same=int(same), extra_h=extra_h,
                                 extra_w=extra_w, name=name)


def conv2d_backprop_input(input_sizes: Any, filter: Any = None, out_backprop: Any = None,  # noqa: A002
                          strides: Any = None, padding: Any = None, use_cudnn_on_gpu: bool = True,
                          data_format: Any = "NHWC", dilations: Any = None,
                          name: Optional[str] = None, filters: Any = None) -> Any:
    """conv2d's gradient with respect to its input, of shape input_sizes: conv2d_transpose of
    out_backprop with the same [kh, kw, in, out] filter."""
    return conv2d_transpose(out_backprop, filter if filter is not None else filters, input_sizes,
                            strides, padding, data_format, name=name, dilations=dilations)


def conv2d_backprop_filter(input: Any, filter_sizes: Any, out_backprop: Any,  # noqa: A002
                           strides: Any, padding: Any, use_cudnn_on_gpu: bool = True,
                           data_format: Any = "NHWC", dilations: Any = None,
                           name: Optional[str] = None) -> Any:
    """conv2d's gradient with respect to its [kh, kw, in, out] filter of shape filter_sizes
    (the builtin conv2d_grad_filter, which reads the filter's shape alone)."""
    who = "conv2d_backprop_filter"
    _nhwc(who, data_format)
    if dilations not in (None, 1, [1, 1, 1, 1], (1, 1, 1, 1)):
        raise OpsdkError(f"{who}: dilations are not supported by opsdk.v1")
    (sh, sw), same = _hw(who, strides, "strides"), _padding(who, padding) == "SAME"
    x = _t(input)
    sizes = _args.static_dims(who, filter_sizes, "filter_sizes")
    if len(sizes) != 4:
        raise OpsdkError(f"{who}: filter_sizes must be [kh, kw, in, out], got {sizes}")
    stand_in = _ops.zeros(shape=sizes, dtype=x.dtype)  # its shape alone is read
    return _ops.conv2d_grad_filter(x, stand_in, _t(out_backprop), stride_h=sh, stride_w=sw,
                                   same=int(same), name=name)


def _output_shape(who: str, shape: Any) -> list:
    """TF's output_shape as four entries, each an int or None (a batch known only at run time)."""
    if isinstance(shape, opsdk.Tensor) or hasattr(shape, "_as_graph_element"):
        entries = _static_entries(_t(shape))
    elif isinstance(shape, (list, tuple, np.ndarray)):
        entries = [_static_entry(s) for s in list(shape)]
    else:
        entries = None
    if entries is None or len(entries) != 4:
        raise OpsdkError(f"{who}: output_shape must have 4 entries [batch, height, width, "
                         f"channels], got {shape!r}")
    if any(e is None for e in entries[1:]):
        raise OpsdkError(f"{who}: output_shape's height, width and channels must be known when "
                         f"the graph is built, got {shape!r}")
    return [None if e is None else int(e) for e in entries]


def _static_entry(value: Any) -> Optional[int]:
    """One entry of a shape list: an int, a Dimension, None, or a scalar tensor (None when only
    the run knows it)."""
    if isinstance(value, opsdk.Tensor) or hasattr(value, "_as_graph_element"):
        entries = _static_entries(_t(value))
        return entries[0] if entries is not None and len(entries) == 1 else None
    value = getattr(value, "value", value)  # a TensorShape's Dimension
    return None if value is None else int(value)


def _static_entries(t: Any) -> Optional[list]:
    """The values of a 1-d (or 0-d) int tensor known when the graph is built: a constant's, or
    entry by entry through stack and concat (None where an entry is computed at run time)."""
    op = t.op
    if op.type == "const":
        return [int(v) for v in np.asarray(op.attrs["value"]).reshape(-1)]
    if op.type == "stack" and t.shape is not None and len(t.shape) == 1:
        return [_static_entry(i) for i in op.inputs]
    if op.type == "concat" and t.shape is not None and len(t.shape) == 1:
        parts = [_static_entries(i) for i in op.inputs]
        return None if any(p is None for p in parts) else [e for p in parts for e in p]
    if t.shape is not None and len(t.shape) <= 1 and None not in t.shape:
        return [None] * (t.shape[0] if t.shape else 1)
    return None


def _transpose_extras(who: str, x: Any, w: Any, out: list, strides: tuple, same: bool) -> tuple:
    """The op's extra_h, extra_w for TF's output_shape: how far past the smallest image whose
    conv2d has value's size it lies (below a stride, or that conv2d is larger than value)."""
    if x.shape is None or len(x.shape) != 4 or w.shape is None or len(w.shape) != 4:
        raise OpsdkError(f"{who}: value must be NHWC (rank 4) and filter [kh, kw, out, in], got "
                         f"shapes {x.shape} and {w.shape}")
    if None in x.shape[1:3] or None in w.shape:
        raise OpsdkError(f"{who}: value's height and width and the filter's shape must be known "
                         f"when the graph is built, got {x.shape} and {w.shape}")
    if w.shape[2] != out[3]:
        raise OpsdkError(f"{who}: output_shape {out} has {out[3]} channels but the filter makes "
                         f"{w.shape[2]} (its dim 2)")
    if out[0] is not None and x.shape[0] is not None and out[0] != x.shape[0]:
        raise OpsdkError(f"{who}: output_shape's batch {out[0]} is not value's {x.shape[0]}")
    extras = []
    for axis, k, s in ((1, w.shape[0], strides[0]), (2, w.shape[1], strides[1])):
        extra = out[axis] - ((x.shape[axis] - 1) * s + 1 + (0 if same else k - 1))
        if not 0 <= extra < s:
            got = -(-out[axis] // s) if same else (out[axis] - k) // s + 1
            raise OpsdkError(f"{who}: output_shape {out} does not fit value {list(x.shape)}: "
                             f"conv2d of {out[axis]} pixels (axis {axis}) with these strides and "
                             f"padding gives {got}, value has {x.shape[axis]}")
        extras.append(extra)
    return tuple(extras)


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
max_pool2d, avg_pool2d = max_pool, avg_pool  # TF 1.15's names of the same ops


def max_pool_with_argmax(input: Any, ksize: Any, strides: Any, padding: Any,  # noqa: A002
                         Targmax: Any = None, name: Optional[str] = None,
                         output_dtype: Any = None, include_batch_in_index: bool = False) -> Any:
    """(max_pool's output, where each maximum was): the flat index ((y * width + x) * channels
    + c) of the input, with the batch too ((b * height + y) ...) under include_batch_in_index,
    as TF's. The output carries max_pool's gradient; the indices carry none. Among equal
    values the first in the window (row by row) is taken. The window is read through
    _extract_patches of the values shifted above 0, so SAME's padding never wins."""
    x = _t(input)
    if x.shape is None or len(x.shape) != 4 or None in x.shape[1:]:
        raise OpsdkError("max_pool_with_argmax: give [batch, height, width, channels] input "
                         "whose height, width and channels are known")
    out = max_pool(x, ksize, strides, padding, name=name)
    _, h, w, c = (int(d) if d is not None else None for d in x.shape)
    kernel = [1, *_hw("max_pool_with_argmax", ksize, "ksize"), 1]
    steps = [1, *_hw("max_pool_with_argmax", strides, "strides"), 1]
    chosen = Targmax if Targmax is not None else output_dtype
    dtype = "int64" if chosen is None else _m.name_of(chosen)
    values = _ops.cast(_ops.stop_gradient(x), dtype="float64")
    lifted = _ops.add(_ops.sub(values, _m.reduce_min(values)), opsdk.constant(1.0))
    windows = _extract_patches(lifted, kernel, steps, [1, 1, 1, 1], padding)
    where = np.arange(h * w * c, dtype=np.float64).reshape(1, h, w, c)
    places = _extract_patches(opsdk.constant(where), kernel, steps, [1, 1, 1, 1], padding)
    k = kernel[1] * kernel[2]
    shape = [-1, *[int(d) for d in out.shape[1:3]], k, c]
    best = _m.argmax(_m.reshape(windows, shape), axis=3)
    flat = _ops.cast(_m.reshape(places, [1, *shape[1:]]), dtype="int64")
    pick = _ops.equal(_m.expand_dims(_ops.cast(best, dtype="int64"), 3),
                      _m.reshape(_m.range(k, dtype="int64"), [1, 1, 1, k, 1]))
    index = _m.reduce_sum(_ops.mul(_ops.cast(pick, dtype="int64"), flat), axis=3)
    if include_batch_in_index:
        batch = _m.reshape(_m.range(_m.shape(x)[0], dtype="int64"), [-1, 1, 1, 1])
        index = _ops.add(index, _ops.mul(batch, opsdk.constant(np.int64(h * w * c))))
    return MaxPoolWithArgmax(out, _ops.cast(index, dtype=dtype) if dtype != "int64" else index)


def _extract_patches(images: Any, ksizes: Any, strides: Any, rates: Any, padding: Any,
                     name: Optional[str] = None) -> Any:
    """extract_image_patches (opsdk/v1/image_more.py) and max_pool_with_argmax's windows: a
    conv2d with a one-hot filter, each output channel copying one pixel of the window."""
    x = _t(images)
    if x.shape is None or len(x.shape) != 4:
        raise OpsdkError("image.extract_image_patches: give images of rank 4 ([batch, height, "
                         "width, channels])")
    window = [int(v) for v in _args.static_dims("extract_image_patches", ksizes, "ksizes")]
    steps = [int(v) for v in _args.static_dims("extract_image_patches", strides, "strides")]
    gaps = [int(v) for v in _args.static_dims("extract_image_patches", rates, "rates")]
    if any(len(v) != 4 or v[0] != 1 or v[3] != 1 for v in (window, steps, gaps)):
        raise OpsdkError("image.extract_image_patches: ksizes, strides and rates are [1, rows, "
                         "cols, 1]")
    if max(steps) > 1 and max(gaps) > 1:
        raise OpsdkError("image.extract_image_patches: strides and rates both above 1 are not "
                         "supported by opsdk.v1 (one of them may be)")
    c = x.shape[3]
    if c is None:
        raise OpsdkError("image.extract_image_patches: the images' channels must be known")
    kh, kw = window[1], window[2]
    one_hot = np.zeros((kh, kw, c, kh * kw * c))
    for i in range(kh):
        for j in range(kw):
            for k in range(c):
                one_hot[i, j, k, (i * kw + j) * c + k] = 1.0
    values = x if x.dtype.is_floating else _m.cast(x, "float64")
    out = conv2d(values, _m.cast(one_hot, values.dtype), steps, padding, dilations=gaps)
    return _m.cast(out, x.dtype, name=name) if values is not x else (
        _ops.identity(out, name=name) if name else out)


class MaxPoolWithArgmax(NamedTuple):
    """TF's result of max_pool_with_argmax: `output` and `argmax`."""

    output: Any
    argmax: Any


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


class TopKV2(NamedTuple):
    values: Any
    indices: Any


def top_k(input: Any, k: Any = 1, sorted: bool = True, name: Optional[str] = None) -> TopKV2:  # noqa: A002
    """(values, indices) of the k largest entries of input's last axis, largest first (equal
    values in index order), as TF's. The indices come from the `top_k_indices` op; the values
    are gathered with them, so a gradient reaches the entries picked. The rank of input must
    be known when the graph is built; its sizes may be known only at run time."""
    x = _t(input)
    k = _args.static_int("top_k", "k", k)
    if x.shape is None or not x.shape:
        raise OpsdkError(f"top_k: '{x.name}' needs a rank of at least 1 known when the graph is "
                         f"built, got shape {x.shape}")
    indices = _ops.top_k_indices(x, k=k)
    return TopKV2(_ops.identity(top_k_values(x, indices), name=name), indices)


def top_k_values(x: Any, indices: Any) -> Any:
    """x at `indices` of its last axis ([..., k] int32, top_k's): a gather of the flat
    positions, so a gradient reaches the entries picked. x's last axis may be known only at run
    time (its size is then read when the step runs)."""
    k = int(indices.shape[-1])
    n = (opsdk.constant(np.int32(x.shape[-1])) if x.shape[-1] is not None else
         _ops.reshape(_ops.slice(_m.shape(x), begin=[len(x.shape) - 1], size=[1]), shape=[]))
    rows = _ops.reshape(indices, shape=[-1, k])
    offsets = _ops.mul(_m.range(0, _ops.reshape(_ops.slice(_m.shape(rows), begin=[0], size=[1]),
                                                shape=[])), n)
    flat = _ops.add(rows, _m.expand_dims(offsets, 1))
    values = _ops.gather(_ops.reshape(x, shape=[-1]), flat)
    if len(x.shape) != 2:
        values = _ops.reshape_dims(values, _m.shape(indices),
                                   shape=[-1 if d is None else int(d) for d in indices.shape])
    return values


def l2_normalize(x: Any, axis: Any = None, epsilon: float = 1e-12, name: Optional[str] = None,
                 dim: Any = None) -> Any:
    """x / sqrt(max(sum(x ** 2 over axis), epsilon)) (axis None: all; `dim` its old name)."""
    if axis is not None and dim is not None:
        raise OpsdkError("l2_normalize: give axis or dim, not both")
    x = _t(x)
    squares = _m.reduce_sum(_ops.square(x), dim if axis is None else axis, keepdims=True)
    floor = opsdk.constant(np.asarray(epsilon, dtype=x.dtype))
    return _ops.mul(x, _m.rsqrt(_ops.maximum(squares, floor)), name=name)


def dropout_noise(x: Any, seed: Optional[int]) -> Any:
    """Uniform noise like x, drawn anew at every run (seeded: the next values of the seed's
    sequence, tensors.op_seed).
    Inside the loop of a dynamic_rnn the step's slice of noise drawn outside the loop
    (rnn_run.step_noise), so that the loop's gradient, which runs the body again, sees the same
    mask."""
    drawn = _rnn_run.step_noise(x, seed)
    return drawn if drawn is not None else _ops.random_uniform_like(x, seed=op_seed(seed),
                                                                      sequence=True)


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
    """Rows of params at ids: one table, a list of tables or a PartitionedVariable (each read
    only at its ids, by `partition_strategy` "mod" or "div"); rows of an L2 norm above
    max_norm scaled down to it."""
    return _partitioned.lookup("embedding_lookup", params, ids, partition_strategy, max_norm,
                               name)


def in_top_k(predictions: Any, targets: Any, k: int, name: Optional[str] = None) -> Any:
    return _ops.in_top_k(_t(predictions), _t(targets), k=_args.static_int("in_top_k", "k", k),
                         name=name)


def moments(x: Any, axes: Any, shift: Any = None, name: Optional[str] = None,
            keep_dims: bool = False, keepdims: Any = None) -> tuple:
    keep = bool(keepdims if keepdims is not None else keep_dims)
    mean = _ops.reduce_mean(_t(x), axes=list(axes), keepdims=True)
    var = _ops.reduce_mean(_ops.square(_t(x) - mean), axes=list(axes), keepdims=keep)
    return (mean if keep else _ops.reduce_mean(_t(x), axes=list(axes)), var)


def fused_batch_norm(x: Any, scale: Any, offset: Any, mean: Any = None, variance: Any = None,
                     epsilon: float = 0.001, data_format: str = "NHWC", is_training: bool = True,
                     name: Optional[str] = None, exponential_avg_factor: float = 1.0) -> tuple:
    """TF's fused_batch_norm of 4-d x over the channels (NHWC's last axis, NCHW's second):
    (y, the batch mean, its variance with Bessel's correction) while training, else (y
    normalised by the given mean and variance, those two). y normalises by the variance without
    the correction, as TF's."""
    if data_format not in ("NHWC", "NCHW"):
        raise OpsdkError(f"fused_batch_norm: data_format must be NHWC or NCHW, got "
                         f"{data_format!r}")
    if exponential_avg_factor != 1.0:
        raise OpsdkError("fused_batch_norm: exponential_avg_factor other than 1.0 is not "
                         "supported by opsdk.v1")
    v = _t(x)
    if v.shape is None or len(v.shape) != 4:
        raise OpsdkError("fused_batch_norm: x must be 4-d")
    channel = 3 if data_format == "NHWC" else 1
    axes = [a for a in range(4) if a != channel]
    here = [1, 1, 1, -1] if data_format == "NHWC" else [1, -1, 1, 1]
    compute = "float32" if v.dtype == "float16" else v.dtype
    xc = _m.cast(v, compute)
    if is_training:
        if mean is not None or variance is not None:
            raise OpsdkError("fused_batch_norm: mean and variance are computed while training; "
                             "give them with is_training=False")
        batch_mean, batch_var = moments(xc, axes)
        count = 1
        for a in axes:
            if v.shape[a] is None:
                count = None
                break
            count *= int(v.shape[a])
        if count is None:
            sizes = _m.cast(_m.shape(v), compute)
            n = _ops.div(_ops.reduce_prod(sizes), sizes[channel])
        else:
            n = _m.cast(float(count), compute)
        corrected = _ops.mul(batch_var, _ops.div(n, _ops.maximum(_ops.sub(n, _m.cast(1.0, compute)),
                                                                 _m.cast(1.0, compute))))
        use_mean, use_var, outs = batch_mean, batch_var, (batch_mean, corrected)
    else:
        if mean is None or variance is None:
            raise OpsdkError("fused_batch_norm: give mean and variance when is_training=False")
        use_mean, use_var = _m.cast(_t(mean), compute), _m.cast(_t(variance), compute)
        outs = (use_mean, use_var)
    inv = _m.rsqrt(_ops.add(use_var, _m.cast(float(epsilon), compute)))
    factor = _ops.mul(_m.cast(_t(scale), compute), inv)
    shifted = _ops.sub(_m.cast(_t(offset), compute), _ops.mul(use_mean, factor))
    y = _ops.add(_ops.mul(xc, _m.reshape(factor, here)), _m.reshape(shifted, here))
    return (_m.cast(y, v.dtype, name=name), *outs)


def zero_fraction(value: Any, name: Optional[str] = None) -> Any:
    zero = _ops.cast(_ops.equal(_t(value), _scalar(0, _t(value))), dtype="float32")
    return _ops.reduce_mean(zero, name=name)


from opsdk.v1.sampled import nce_loss, sampled_softmax_loss  # noqa: E402 - uses this module
from opsdk.v1.normalization import (batch_norm_with_global_normalization,  # noqa: E402,F401
                                    nn_batch_normalization as batch_normalization)
from opsdk.v1 import rnn as _rnn  # noqa: E402
rnn_cell = _rnn.rnn_cell
static_rnn, dynamic_rnn = _rnn.static_rnn, _rnn.dynamic_rnn
static_bidirectional_rnn = _rnn.static_bidirectional_rnn
bidirectional_dynamic_rnn = _rnn.bidirectional_dynamic_rnn


__getattr__ = _misc.refuse_missing("nn")  # other tf.nn names: a clear refusal
