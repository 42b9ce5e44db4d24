"""Reading protobuf messages in tests without TensorFlow: a message's fields by number."""

from __future__ import annotations

from opsdk.v1 import events


def fields(data: bytes) -> dict[int, list]:
    """Every field of a serialized message: varints as ints, fixed 32- and 64-bit values and
    length-delimited ones (strings, bytes, messages) as bytes, in order, by field number."""
    out: dict[int, list] = {}
    at = 0
    while at < len(data):
        key, at = events._read_varint(data, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, at = events._read_varint(data, at)
        elif wire == 1:
            value, at = data[at:at + 8], at + 8
        elif wire == 2:
            size, at = events._read_varint(data, at)
            value, at = data[at:at + size], at + size
        elif wire == 5:
            value, at = data[at:at + 4], at + 4
        else:
            raise AssertionError(f"wire type {wire} at byte {at}")
        out.setdefault(field, []).append(value)
    return out
