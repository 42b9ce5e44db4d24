"""String constants, scalar string placeholders and fetches (`tf.constant("hello")`,
`sess.run(greeting)` -> b'hello', `tf.placeholder(tf.string, [])` fed b'...' or '...').

opsdk's runtime has numeric tensors only, so a string constant travels as a uint8 tensor of its
UTF-8 bytes (a [n, width] zero-padded matrix for a list of strings), and `Session.run` turns the
fetched array back into bytes, as TF hands out strings. A scalar string placeholder is a uint8
vector placeholder; `Session.run` feeds it the bytes of the str or bytes given (a feedable
iterator's handle, opsdk/v1/data.py). Ops on strings are not provided.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import graph_state
from opsdk.v1 import session as _session


def _bytes(item: Any) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    raise OpsdkError(f"string constant: {item!r} is not a str or bytes")


def string_constant(value: Any, name: Optional[str] = None) -> Any:
    """A constant holding a string (or a list of strings); fetching it gives bytes."""
    if isinstance(value, (str, bytes)) or (isinstance(value, np.ndarray) and value.ndim == 0):
        array = np.frombuffer(_bytes(value.item() if isinstance(value, np.ndarray) else value),
                              dtype=np.uint8).copy()
        decode = _decode_scalar
    else:  # a list of strings, or nested lists of them (any rank)
        array = byte_rows_of(_object_array(value))
        decode = _decode_list
    tensor = opsdk.constant(array, name=name or "Const")
    _session.register_decoder(tensor, decode)
    return tensor


def _object_array(value: Any) -> np.ndarray:
    """Nested lists of str or bytes as an object array of their shape (ragged lists refused)."""
    array = np.empty(np.shape(np.asarray(value, dtype=object)), dtype=object)
    array[...] = np.asarray(value, dtype=object) if np.ndim(value) else value
    return array


def byte_rows(items: Any) -> np.ndarray:
    """Strings (str or bytes) as a [n, width] uint8 matrix, each row zero-padded."""
    encoded = [_bytes(v) for v in items]
    width = max((len(b) for b in encoded), default=0)
    array = np.zeros((len(encoded), width), dtype=np.uint8)
    for row, b in zip(array, encoded):
        row[:len(b)] = np.frombuffer(b, dtype=np.uint8)
    return array


def byte_rows_of(value: Any) -> np.ndarray:
    """An array of strings of any shape as this module keeps it: one string's bytes, or rows
    of bytes zero-padded along a last axis."""
    array = np.asarray(value, dtype=object)
    if array.ndim == 0:
        return np.frombuffer(_bytes(array.item()), dtype=np.uint8).copy()
    rows = byte_rows(list(array.reshape(-1)))
    return rows.reshape(*array.shape, rows.shape[-1])


def is_string(tensor: Any) -> bool:
    """Whether tensor holds strings as this module keeps them (its fetches are decoded so)."""
    return graph_state.table(tensor.graph, "decoders").get(tensor.name) in (
        _decode_list, _decode_scalar)


def is_scalar_string(tensor: Any) -> bool:
    """Whether tensor holds one string (its bytes as a vector)."""
    return graph_state.table(tensor.graph, "decoders").get(tensor.name) is _decode_scalar


def _decode_scalar(array: np.ndarray) -> bytes:
    return np.asarray(array, dtype=np.uint8).tobytes()


def _decode_list(array: np.ndarray) -> np.ndarray:
    """Strings of any shape: the rows of the last axis, trailing zeros dropped."""
    array = np.asarray(array, dtype=np.uint8)
    rows = (array.reshape(int(np.prod(array.shape[:-1])), array.shape[-1]) if array.ndim
            else array.reshape(1, -1))  # (counted: -1 is ambiguous for no strings of no bytes)
    out = np.empty(rows.shape[0], dtype=object)
    out[:] = [r.tobytes().rstrip(b"\0") for r in rows]
    return out.reshape(array.shape[:-1])


def string_placeholder(shape: Any, name: Optional[str] = None) -> Any:
    """`tf.placeholder(tf.string, [])`: a scalar string, fed as str or bytes."""
    if shape is not None and list(shape) != []:
        raise OpsdkError(f"placeholder: opsdk.v1 feeds scalar strings only (a feedable "
                         f"iterator's handle), not shape {list(shape)}; give shape [] or none")
    tensor = opsdk.placeholder("uint8", [None], name=name or "Placeholder")
    label = tensor.name

    def encode(value: Any) -> np.ndarray:
        if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "SUO":
            value = value.item()
        if not isinstance(value, (str, bytes)):
            raise TypeError(f"Session.run: the feed for string placeholder '{label}' must be a "
                            f"str or bytes (as TensorFlow's), got {type(value).__name__}")
        return np.frombuffer(_bytes(value), dtype=np.uint8).copy()
    _session.register_encoder(tensor, encode)
    _session.register_decoder(tensor, _decode_scalar)
    return tensor
