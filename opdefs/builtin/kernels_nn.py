"""Python kernels of the neural-network builtin ops and their gradients (nn.yaml).

Written over functions NumPy and CuPy share. The exponentials are arranged so that no
intermediate overflows (softmax subtracts the row max; sigmoid only exponentiates -|x|).
"""

from __future__ import annotations


def relu(xp, x, out=None):
    return xp.asarray(xp.maximum(x, x.dtype.type(0), out=out))


def relu_grad(xp, x, grad_y):
    return xp.asarray(xp.where(x > 0, grad_y, grad_y.dtype.type(0)))


def sigmoid(xp, x, out=None):
    # 1 / (1 + e) for x >= 0, e / (1 + e) below, with e = exp(-|x|) in (0, 1]: never overflows.
    # The numerator is chosen by multiplying with the masks (e * 1 + 0, or e * 0 + 1), not with
    # `where`, which takes ~4 ns an element on a mixed mask: 7x faster, the same bits.
    # Two temporaries (e and the mask), the numerator in `out` (which may be x's buffer: x is
    # read before it is written).
    e = xp.abs(x)
    if not isinstance(e, xp.ndarray):  # 0-d input: NumPy scalars
        e = xp.exp(-e)
        negative = x < 0
        return xp.asarray(xp.divide(e * negative + ~negative, e + 1))
    e = xp.exp(xp.negative(e, out=e), out=e)
    negative = x < 0
    r = xp.multiply(e, negative, out=out)
    r = xp.add(r, ~negative, out=r)
    return xp.divide(r, xp.add(e, 1, out=e), out=r)


def _one_array(xp, y, grad_y, out):
    """Whether a gradient of y and grad_y can be computed in one array, in place: given one, or
    y an array of grad_y's shape (not broadcast against it)."""
    return out is not None or (isinstance(y, xp.ndarray) and y.ndim > 0
                               and getattr(grad_y, "shape", None) == y.shape)


def sigmoid_grad(xp, x, y, grad_y, out=None):
    # grad_y * y * (1 - y) in one array, written in place (out may be x's buffer: x is unread);
    # each temporary would be a fresh allocation at every call.
    if not _one_array(xp, y, grad_y, out):
        return xp.asarray(xp.multiply(grad_y, xp.multiply(y, 1 - y)))
    r = xp.subtract(1, y, out=out)
    xp.multiply(r, y, out=r)
    return xp.multiply(r, grad_y, out=r)


def tanh(xp, x, out=None):
    return xp.asarray(xp.tanh(x, out=out))


def tanh_grad(xp, x, y, grad_y, out=None):
    # grad_y * (1 - y * y) in one array, as sigmoid_grad.
    if not _one_array(xp, y, grad_y, out):
        return xp.asarray(xp.multiply(grad_y, 1 - xp.square(y)))
    r = xp.multiply(y, y, out=out)
    xp.subtract(1, r, out=r)
    return xp.multiply(r, grad_y, out=r)


def _log_softmax(xp, x, axis, out=None):
    r = xp.subtract(x, xp.max(x, axis=axis, keepdims=True), out=out)
    total = xp.log(xp.sum(xp.exp(r), axis=axis, keepdims=True))
    return xp.subtract(r, total, out=r)


# The softmaxes and their gradients compute into one array of the result's size, in place (out:
# x's buffer or one the runtime keeps, where given): each temporary of that size would be a fresh
# allocation at every call. The same operations in the same order as with temporaries.
def softmax(xp, x, axis, out=None):
    r = xp.subtract(x, xp.max(x, axis=axis, keepdims=True), out=out)
    xp.exp(r, out=r)
    return xp.asarray(xp.divide(r, xp.sum(r, axis=axis, keepdims=True), out=r))


def softmax_grad(xp, x, y, grad_y, axis, out=None):
    r = xp.multiply(grad_y, y, out=out)
    inner = xp.sum(r, axis=axis, keepdims=True)
    xp.subtract(grad_y, inner, out=r)
    return xp.asarray(xp.multiply(y, r, out=r))


def log_softmax(xp, x, axis, out=None):
    return xp.asarray(_log_softmax(xp, x, axis, out))


def log_softmax_grad(xp, x, y, grad_y, axis, out=None):
    total = xp.sum(grad_y, axis=axis, keepdims=True)
    r = xp.exp(y, out=out)
    xp.multiply(r, total, out=r)
    return xp.asarray(xp.subtract(grad_y, r, out=r))


def softmax_cross_entropy_with_logits(xp, labels, logits):
    """TensorFlow's loss per row: -sum(labels * log_softmax(logits)) over the last axis."""
    return xp.asarray(xp.negative(xp.sum(xp.multiply(labels, _log_softmax(xp, logits, -1)), axis=-1)))


def softmax_cross_entropy_with_logits_grad(xp, labels, logits, grad_loss):
    logp = _log_softmax(xp, logits, -1)
    g = xp.expand_dims(grad_loss, axis=-1)
    # d/dlogits = softmax * sum(labels) - labels (TF assumes rows of labels sum to 1; this
    # form is exact for any labels).
    total = xp.sum(labels, axis=-1, keepdims=True)
    grad_logits = xp.multiply(g, xp.multiply(xp.exp(logp), total) - labels)
    grad_labels = xp.multiply(g, xp.negative(logp))
    return xp.asarray(grad_labels), xp.asarray(grad_logits)
