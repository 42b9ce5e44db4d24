"""Central finite differences of a graph's value, the reference the gradient tests compare
autodiff against (tests/ is on the test path: `from finite_differences import numeric_grad`)."""

from __future__ import annotations

import numpy as np


def numeric_grad(sess, y, x, feeds, eps=1e-6):
    """d sum(y) / d x by central differences, x one of the fed placeholders."""
    base = feeds[x]
    grad = np.zeros_like(base)
    for index in np.ndindex(base.shape):
        values = []
        for sign in (1.0, -1.0):
            moved = base.copy()
            moved[index] += sign * eps
            values.append(np.sum(sess.run(y, {**feeds, x: moved})))
        grad[index] = (values[0] - values[1]) / (2 * eps)
    return grad
