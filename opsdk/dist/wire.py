"""Small arrays as plain values on their way between the client and the tasks.

Ray serialises a NumPy array through pickle with its data in a buffer of its own (out of
band), which pays off for a large array and costs a fixed 20-70 us per message that holds one,
on each side, for a small one: `bench/bench_dist.py`'s null step sends a few 0-d arrays a run
(the variable pushed to the worker, its round, the gradient), and that fixed cost was a fifth of
the step (docs/distributed.md, Speed). An array of at most SMALL_BYTES of a plain dtype (bool or
a number), or such a NumPy scalar, travels instead as a tuple of a marker, its dtype, shape and
bytes, which Ray serialises in band like the rest of the message; the receiver makes it an array
again (its own, writable). Larger arrays, other arrays and every other value travel as they are.

Only the places that hold tensor values are packed and unpacked (feeds, fetched values, values
pushed or sent between tasks, rounds), so a packed value is never mistaken for a user's value.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

# Larger arrays keep Ray's out-of-band path. A value sent through two tasks of a compiled graph
# and back (/tmp measurements, 2 cores): 0.43 ms as an array against 0.27 packed from 1 to 16
# KiB, 0.46 against 0.31 at 64 KiB, 0.59 against 0.54 at 256 KiB, where the copies begin to
# weigh.
SMALL_BYTES = 64 * 1024
MARK = "\x00opsdk.ndarray"  # first field of a packed array (Ray may return it as a list)
_PLAIN = frozenset("biufc")  # bool and numbers: dtype.str says all (not a record's fields)


def pack(value: Any) -> Any:
    """`value` in its wire form: a small array (or NumPy scalar) of a plain dtype packed,
    anything else as is."""
    if type(value) is np.ndarray:
        if value.nbytes <= SMALL_BYTES and value.dtype.kind in _PLAIN:
            return (MARK, value.dtype.str, value.shape, value.tobytes())
    elif isinstance(value, np.generic) and value.dtype.kind in _PLAIN:
        return (MARK, value.dtype.str, None, value.tobytes())  # shape None: a scalar
    return value


def unpack(value: Any) -> Any:
    """`value` from its wire form (a packed array becomes an array of its own, a packed
    scalar a NumPy scalar)."""
    if type(value) in (tuple, list) and len(value) == 4 and value[0] == MARK:
        _, dtype, shape, data = value
        flat = np.frombuffer(data, np.dtype(dtype))
        return flat[0] if shape is None else flat.reshape(shape).copy()
    return value


def pack_map(values: dict) -> dict:
    return {k: pack(v) for k, v in values.items()}


def unpack_map(values: Any) -> Any:
    return values if values is None else {k: unpack(v) for k, v in values.items()}


def pack_pairs(pairs: Iterable) -> list:
    """A list of (key, value) pairs, each value packed."""
    return [(k, pack(v)) for k, v in pairs]


def unpack_pairs(pairs: Iterable) -> list:
    return [(k, unpack(v)) for k, v in pairs]
