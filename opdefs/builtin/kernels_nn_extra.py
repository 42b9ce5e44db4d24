"""Python kernels of nn_extra.yaml (bias_add, dropout, sparse softmax loss, in_top_k, shape) and
random_extra.yaml (truncated_normal, random_uniform_like, log_uniform_candidate_sampler)."""

from __future__ import annotations

import numpy as np


def bias_add(xp, value, bias):
    return xp.asarray(value + bias)


def bias_add_grad(xp, value, bias, grad_y):
    axes = tuple(range(grad_y.ndim - 1))
    return xp.asarray(grad_y), xp.asarray(grad_y.sum(axis=axes).astype(grad_y.dtype))


def dropout(xp, x, keep_prob, noise):
    return xp.asarray(xp.where(noise < keep_prob, x / keep_prob, xp.zeros_like(x)))


def dropout_grad(xp, x, keep_prob, noise, grad_y, out=None):
    # grad_y / keep_prob, zero where dropped, in one array (out may be x's or grad_y's buffer).
    if out is None and not (isinstance(grad_y, xp.ndarray) and grad_y.ndim > 0
                            and getattr(noise, "shape", None) == grad_y.shape):
        return xp.asarray(xp.where(noise < keep_prob, grad_y / keep_prob, xp.zeros_like(grad_y)))
    r = xp.divide(grad_y, keep_prob, out=out)
    r[xp.broadcast_to(~(noise < keep_prob), r.shape)] = 0  # a NaN noise drops, as where's
    return r


def _log_softmax(xp, logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=-1, keepdims=True))


def _check_labels(xp, labels, n):
    if labels.size and (int(labels.min()) < 0 or int(labels.max()) >= n):
        bad = int(labels.max()) if int(labels.max()) >= n else int(labels.min())
        raise ValueError(f"label {bad} is outside [0, {n}) (logits have {n} classes)")


def sparse_softmax_cross_entropy_with_logits(xp, labels, logits):
    _check_labels(xp, labels, logits.shape[-1])
    picked = xp.take_along_axis(_log_softmax(xp, logits), labels[..., None].astype(np.int64), -1)
    return xp.asarray(-picked[..., 0])


def sparse_softmax_cross_entropy_with_logits_grad(xp, labels, logits, grad_loss):
    _check_labels(xp, labels, logits.shape[-1])
    probs = xp.exp(_log_softmax(xp, logits))
    onehot = (xp.arange(logits.shape[-1]) == labels[..., None]).astype(logits.dtype)
    return xp.asarray((probs - onehot) * grad_loss[..., None])


def in_top_k(xp, predictions, targets, k):
    n = predictions.shape[1]
    if targets.size and (int(targets.min()) < 0 or int(targets.max()) >= n):
        raise ValueError(f"a target is outside [0, {n})")
    target = xp.take_along_axis(predictions, targets[:, None].astype(np.int64), 1)
    above = (predictions > target).sum(axis=1)
    return xp.asarray(above < k)


def top_k_indices(xp, x, k):
    n = x.shape[-1]
    if k > n:
        raise ValueError(f"k={k} is more than the {n} elements of x's last axis")
    # a stable sort of -x keeps equal values in index order, as TensorFlow's top_k does
    order = xp.argsort(-x, axis=-1, kind="stable")
    return xp.ascontiguousarray(order[..., :k]).astype(np.int32)


def shape(xp, x):
    return xp.asarray(np.asarray(x.shape, dtype=np.int32))


shape.shape_only = True  # reads x's shape alone: constant folding may run it on a stand-in


def _rng(seed, rng=None):
    """The generator to draw from: the step's (`rng`: a seeded sequence's, kept by the session),
    else a fresh one, from the seed or (seed 0) from OS entropy."""
    return rng if rng is not None else np.random.default_rng(None if seed == 0 else seed)


def truncated_normal(xp, shape, seed, mean, stddev, dtype, sequence=False, rng=None):
    rng = _rng(seed, rng)
    z = rng.standard_normal(tuple(shape))
    bad = np.abs(z) > 2
    while bad.any():  # redraw outside two standard deviations, as TensorFlow does
        z[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(z) > 2
    return xp.asarray((mean + stddev * z).astype(dtype))


def random_uniform_like(xp, x, seed, sequence=False, rng=None):
    return xp.asarray(_rng(seed, rng).random(x.shape).astype(x.dtype))


def log_uniform_candidate_sampler(xp, num_sampled, range_max, seed, sequence=False,
                                  rng=None):
    """Classes drawn with P(k) = log((k + 2) / (k + 1)) / log(range_max + 1) (Zipf-like)."""
    u = _rng(seed, rng).random(num_sampled)
    k = np.floor(np.exp(u * np.log(range_max + 1.0))).astype(np.int64) - 1
    return xp.asarray(np.clip(k, 0, range_max - 1))


def print_tensor(xp, x, data, message, summarize, end, text=False):
    import sys

    array = getattr(xp, "asnumpy", np.asarray)(data)
    if text:  # strings as their UTF-8 bytes: one per row of a matrix, or one vector
        rows = [array] if array.ndim == 1 else list(array.reshape(-1, array.shape[-1]))
        items = [bytes(np.asarray(r, np.uint8)).rstrip(b"\0").decode("utf-8", "replace")
                 for r in rows]
    else:
        # numbers as TensorFlow prints them: 1 for 1.0, 0.5, 1e+10
        items = [f"{v:g}" if isinstance(v, float) else str(v) for v in array.reshape(-1).tolist()]
    shown = items if summarize < 0 else items[:summarize]
    text = " ".join(shown) + ("..." if len(shown) < len(items) else "")
    sys.stderr.write(f"{message}[{text}]" + ("\n" if end else ""))
    if end:
        sys.stderr.flush()
    return x


def print_tensor_grad(xp, x, data, grad_y):
    return grad_y
