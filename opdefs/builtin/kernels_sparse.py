"""Python kernels of the sparse tensors' ops (sparse.yaml).

scatter_nd adds each update at its coordinate (`add.at`: a repeated coordinate gets every
update); its gradient gathers grad_y back there. edit_distance groups each sparse tensor's entries
into sequences by their leading coordinates and runs the Levenshtein recurrence a row at a time,
vectorized along the truth.
"""

from __future__ import annotations

import numpy as np


def _host(xp, a):
    return xp.asnumpy(a) if hasattr(xp, "asnumpy") else np.asarray(a)


def _flat_coordinates(op, xp, indices, target):
    """indices' rows as flat positions into target's first k dims; the first row out of range
    fails naming it."""
    k = indices.shape[-1]
    if k > len(target):
        raise ValueError(f"{op}: indices' coordinates have {k} entries; the output has rank "
                         f"{len(target)}")
    rows = indices.reshape(-1, k)
    head = target[:k]
    if rows.shape[0] and k:
        bad = (rows < 0) | (rows >= xp.asarray(head, dtype=rows.dtype))
        if bool(bad.any()):
            i = int(_host(xp, bad.any(axis=1)).argmax())
            raise ValueError(f"{op}: indices[{i}] = {_host(xp, rows[i]).tolist()} does not "
                             f"index into shape {list(target)}")
    if not k:
        return xp.zeros(rows.shape[0], dtype=np.int64), k
    strides = np.cumprod((head[1:] + (1,))[::-1])[::-1].astype(np.int64)
    return rows.astype(np.int64) @ xp.asarray(strides), k


def scatter_nd(xp, indices, updates, dims, shape):
    target = tuple(int(d) for d in dims.reshape(-1).tolist())  # tolist: a CuPy dims too
    if any(d < 0 for d in target):
        raise ValueError(f"scatter_nd: input 'dims' {list(target)} must hold sizes >= 0")
    if shape and (len(shape) != len(target)
                  or any(k >= 0 and k != d for k, d in zip(shape, target))):
        raise ValueError(f"scatter_nd: input 'dims' {list(target)} does not have the sizes "
                         f"declared when the graph was built, {list(shape)} (-1: any)")
    if indices.ndim == 0:
        raise ValueError("scatter_nd: indices is a scalar; give coordinates along its last axis")
    k = indices.shape[-1]
    expected = tuple(indices.shape[:-1]) + target[k:]
    if k > len(target) or tuple(updates.shape) != expected:
        raise ValueError(f"scatter_nd: updates has shape {list(updates.shape)}; indices of shape "
                         f"{list(indices.shape)} into shape {list(target)} take "
                         f"{list(expected) if k <= len(target) else 'none'}")
    flat, k = _flat_coordinates("scatter_nd", xp, indices, target)
    rest = target[k:]
    y = xp.zeros((int(np.prod(target[:k], dtype=np.int64)),) + rest, dtype=updates.dtype)
    xp.add.at(y, flat, updates.reshape((-1,) + rest))
    return y.reshape(target)


def scatter_nd_grad(xp, indices, updates, dims, grad_y):
    target = tuple(int(d) for d in grad_y.shape)
    flat, k = _flat_coordinates("scatter_nd_grad", xp, indices, target)
    rows = grad_y.reshape((-1,) + target[k:])
    return xp.take(rows, flat, axis=0).reshape(updates.shape)


def _sequences(name, indices, values, shape):
    """{leading coordinates: the entries' positions in values, in the order given}."""
    r = shape.shape[0]
    if indices.ndim != 2 or indices.shape[1] != r:
        raise ValueError(f"edit_distance: {name}_indices has shape {list(indices.shape)}; a "
                         f"sparse tensor of rank {r} takes [n, {r}]")
    if values.ndim == 0 or values.shape[0] != indices.shape[0]:
        raise ValueError(f"edit_distance: {name}_values has shape {list(values.shape)}; its "
                         f"{indices.shape[0]} indices take as many entries")
    if indices.shape[0]:  # the last coordinate is not read (TF's is not checked either)
        bad = (indices[:, :-1] < 0) | (indices[:, :-1] >= shape[None, :-1])
        if bad.any():
            i = int(bad.any(axis=1).argmax())
            raise ValueError(f"edit_distance: {name}_indices[{i}] = {indices[i].tolist()} is "
                             f"outside {name}_shape {shape.tolist()} (but for its last "
                             "coordinate)")
    groups: dict[tuple, list[int]] = {}
    for i, row in enumerate(indices[:, :-1].tolist()):
        groups.setdefault(tuple(row), []).append(i)
    return groups


def _symbols(hypothesis_values, truth_values):
    """Each entry of both as an integer, equal entries equal: rows compared whole, the narrower
    padded with zeros."""
    h, t = (v.reshape(v.shape[0], int(np.prod(v.shape[1:], dtype=np.int64)))
            for v in (hypothesis_values, truth_values))
    width = max(h.shape[1], t.shape[1])
    both = np.zeros((h.shape[0] + t.shape[0], width), dtype=h.dtype)
    both[:h.shape[0], :h.shape[1]] = h
    both[h.shape[0]:, :t.shape[1]] = t
    if not both.shape[0]:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ids = np.unique(both, axis=0, return_inverse=True)[1].reshape(-1)
    return ids[:h.shape[0]], ids[h.shape[0]:]


def _levenshtein(a, b):
    """Fewest insertions, deletions and substitutions turning a into b. Row by row over a; along
    b, d[j] = min(c[j], d[j-1] + 1) is min over k <= j of c[k] + j - k: an accumulated minimum."""
    steps = np.arange(len(b) + 1)
    previous = steps.copy()
    for i, symbol in enumerate(a, start=1):
        c = np.empty_like(previous)
        c[0] = i
        c[1:] = np.minimum(previous[1:] + 1, previous[:-1] + (b != symbol))
        previous = np.minimum.accumulate(c - steps) + steps
    return int(previous[-1])


def edit_distance(xp, hypothesis_indices, hypothesis_values, hypothesis_shape, truth_indices,
                  truth_values, truth_shape, normalize):
    hi, hv, hs, ti, tv, ts = (_host(xp, a) for a in (
        hypothesis_indices, hypothesis_values, hypothesis_shape, truth_indices, truth_values,
        truth_shape))
    if hs.shape != ts.shape:
        raise ValueError(f"edit_distance: hypothesis_shape {hs.tolist()} and truth_shape "
                         f"{ts.tolist()} have different ranks")
    if hs.shape[0] < 1:
        raise ValueError("edit_distance: sparse tensors of rank 0 hold no sequence")
    hypotheses = _sequences("hypothesis", hi, hv, hs)
    truths = _sequences("truth", ti, tv, ts)
    h_ids, t_ids = _symbols(hv, tv)
    out = np.zeros(tuple(np.maximum(hs[:-1], ts[:-1]).tolist()), dtype=np.float32)
    for key in set(hypotheses) | set(truths):
        a = h_ids[hypotheses.get(key, [])]
        b = t_ids[truths.get(key, [])]
        d = float(_levenshtein(a, b))
        if normalize:
            d = (d / len(b)) if len(b) else (np.inf if len(a) else 0.0)
        out[key] = d
    return xp.asarray(out)


def _written_shape(buffer, index, row, grow):
    n, w = buffer.shape
    k, i = row.shape[0], int(index)
    if i < 0 or (i >= n and not grow):
        raise ValueError(f"write_row: index {i} is outside the buffer's {n} rows (an array of "
                         f"size {n}; a dynamic-size one grows)")
    if w not in (1, k):
        raise ValueError(f"write_row: row has {k} elements; the buffer's rows have {w}")
    return (max(n, i + 1) if grow else n), k, i


def write_row(xp, buffer, index, row, grow, out=None):
    rows, k, i = _written_shape(buffer, index, row, grow)
    if (rows, k) == tuple(buffer.shape):
        y = out if out is not None else buffer.copy()  # out: buffer's own array, which dies here
    else:
        y = xp.zeros((rows, k), dtype=buffer.dtype)
        y[:buffer.shape[0]] = buffer
    y[i] = row
    return y


write_row.out_any_shape = True  # out= is used only where it has y's shape (compile/memory.py)


def write_row_grad(xp, buffer, index, row, grad_y, grow, out=None):
    n, w = buffer.shape
    i = int(index)
    grad_row = grad_y[i].copy()  # (before out, which may be grad_y's own array, loses row i)
    if out is not None and out.shape == (n, w) == grad_y.shape:
        grad_buffer = out  # grad_y's array, which dies here: a loop's gradient costs a row
        if out is not grad_y:
            out[...] = grad_y
    else:
        grad_buffer = grad_y[:n].copy()
    if i < n:
        grad_buffer[i] = 0
    if w != grad_buffer.shape[1]:  # the rows were widened from one element: sum back
        grad_buffer = grad_buffer.sum(axis=1, keepdims=True)
    return grad_buffer, grad_row


write_row_grad.out_any_shape = True  # out= is used only where it has grad_buffer's shape
