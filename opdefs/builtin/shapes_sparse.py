"""Shape functions of the sparse tensors' ops (sparse.yaml)."""

from __future__ import annotations


def scattered(shapes, attrs):
    """dims' length gives the rank; a size is known where attr shape declares it (>= 0). Checks
    what is known of updates' shape against indices' and the declared sizes."""
    indices, updates, dims = shapes["indices"], shapes["updates"], shapes["dims"]
    known = [int(d) for d in attrs["shape"]]
    rank = None if dims is None else dims[0]
    if known and rank is not None and len(known) != rank:
        raise ValueError(f"attr shape {known} has {len(known)} sizes; dims has {rank}")
    if indices is not None and not indices:
        raise ValueError("indices is a scalar: give coordinates along its last axis ([..., k])")
    if known and indices is not None and updates is not None and indices[-1] is not None:
        k = indices[-1]
        if k > len(known):
            raise ValueError(f"indices' coordinates have {k} entries; the output has rank "
                             f"{len(known)}")
        expected = (*indices[:-1], *[None if d < 0 else d for d in known[k:]])
        if len(updates) != len(expected) or any(
                a is not None and b is not None and a != b for a, b in zip(updates, expected)):
            raise ValueError(f"updates has shape {list(updates)}; indices of shape "
                             f"{list(indices)} into shape {known} take "
                             f"{['?' if d is None else d for d in expected]}")
    if known:
        return [tuple(None if d < 0 else d for d in known)]
    return [None if rank is None else (None,) * rank]


def like_updates(shapes, attrs):
    """A gradient shaped like the forward input updates."""
    return [shapes["updates"]]


def edit_distance(shapes, attrs):
    """One distance per sequence: rank r - 1 for indices of r coordinates (sizes: run time)."""
    ranks = {shapes[name][0] for name in ("hypothesis_shape", "truth_shape")
             if shapes[name] is not None}
    for name in ("hypothesis_indices", "truth_indices"):
        given = shapes[name]
        if given is not None:
            if len(given) != 2:
                raise ValueError(f"{name} must be a matrix [n, r], not of rank {len(given)}")
            if given[1] is not None:
                ranks.add(given[1])
    ranks.discard(None)
    if len(ranks) > 1:
        raise ValueError(f"the two sparse tensors have different ranks {sorted(ranks)} (indices' "
                         "second dim and the shapes' lengths must agree)")
    if not ranks:
        return [None]
    r = ranks.pop()
    if r < 1:
        raise ValueError("sparse tensors of rank 0 hold no sequence")
    return [(None,) * (r - 1)]


def written_rows(shapes, attrs):
    """[n (None when the buffer may grow), k]; rows of one element widen to k."""
    buffer, row = shapes["buffer"], shapes["row"]
    n = None if buffer is None or attrs["grow"] else buffer[0]
    w = None if buffer is None else buffer[1]
    k = None if row is None else row[0]
    if w is not None and k is not None and w not in (1, k):
        raise ValueError(f"row has {k} elements; the buffer's rows have {w}")
    return [(n, k if k is not None else (w if w != 1 else None))]
