"""Small arrays as plain values between the client and the tasks (opsdk/dist/wire.py)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from opsdk.dist import wire


@pytest.mark.parametrize("value", [
    np.array(2.5, np.float32),
    np.arange(6, dtype=np.int64).reshape(2, 3),
    np.array([True, False]),
    np.array([1 + 2j], np.complex64),
    np.arange(4, dtype=np.float16),
    np.arange(3, dtype=">f4"),            # big-endian stays big-endian
    np.arange(12, dtype=np.float64).reshape(3, 4).T,  # not contiguous
    np.zeros((0, 5), np.float32),
], ids=lambda v: f"{v.dtype.str}{v.shape}")
def test_a_small_array_travels_as_plain_values_and_comes_back_equal_and_its_own(value):
    packed = wire.pack(value)
    assert not isinstance(packed, np.ndarray)
    # Plain values (no out-of-band buffer): msgpack can write it, and may give the tuple back
    # as a list.
    back = msgpack.unpackb(msgpack.packb(packed), use_list=True)
    for got in (wire.unpack(packed), wire.unpack(back)):
        assert got.dtype == value.dtype and got.shape == value.shape
        np.testing.assert_array_equal(got, value)
        assert got.flags.writeable and got.flags.owndata


@pytest.mark.parametrize("value", [np.float32(2.5), np.int64(-3), np.bool_(True),
                                   np.complex128(1 - 1j)], ids=lambda v: v.dtype.str)
def test_a_numpy_scalar_comes_back_a_numpy_scalar(value):
    back = msgpack.unpackb(msgpack.packb(wire.pack(value)), use_list=True)
    got = wire.unpack(back)
    assert type(got) is type(value) and got == value


def test_large_object_and_other_values_travel_as_they_are():
    large = np.zeros(wire.SMALL_BYTES // 4 + 1, np.float32)
    strings = np.array(["a", None], dtype=object)
    records = np.zeros(2, [("a", np.int32), ("b", np.float32)])
    for value in (large, strings, records, records[0], np.array(["ab"]), None, 3, "x", (1, 2),
                  [np.float32(1)]):
        assert wire.pack(value) is value
        assert wire.unpack(value) is value
    assert wire.pack(np.zeros(wire.SMALL_BYTES // 4, np.float32)) is not None
    assert not isinstance(wire.pack(np.zeros(wire.SMALL_BYTES // 4, np.float32)), np.ndarray)


def test_maps_and_pairs_pack_their_values_only():
    key = ("v:0", "/job:ps/replica:0/task:0/device:CPU:0")
    pairs = wire.pack_pairs([(key, np.ones(2, np.float32))])
    assert pairs[0][0] == key and not isinstance(pairs[0][1], np.ndarray)
    [(k, v)] = wire.unpack_pairs(pairs)
    assert k == key
    np.testing.assert_array_equal(v, np.ones(2, np.float32))
    assert wire.unpack_map(None) is None
    got = wire.unpack_map(wire.pack_map({"x": np.arange(3)}))
    np.testing.assert_array_equal(got["x"], np.arange(3))


def test_a_read_output_owns_its_arrays_and_passes_packed_values_and_other_kinds_over():
    import collections

    from opsdk.dist.compiled import owned

    buffer = np.arange(8, dtype=np.float32)
    view = buffer[2:6]  # as Ray reads an array out of a channel: not its own memory
    packed = wire.pack(np.ones(2, np.float32))
    Pair = collections.namedtuple("Pair", "a b")
    value = {"view": view, "rows": [view, (view, packed)], "packed": packed,
             "as_list": list(packed), "pair": Pair(view, 1), "scalar": np.float32(2),
             "four": (view, view, view, view), "plain": (1, "x", None, b"y", 2.5, True)}
    got = owned(value)
    for array in (got["view"], got["rows"][0], got["rows"][1][0], *got["four"], got["pair"].a):
        assert array.flags.owndata and not np.shares_memory(array, buffer)
        np.testing.assert_array_equal(array, view)
    assert got["packed"] is packed and got["rows"][1][1] is packed  # bytes: already its own
    assert got["as_list"] == list(packed)  # Ray may read a packed tuple back as a list
    assert type(got["pair"]) is Pair and type(got["rows"]) is list
    assert got["plain"] == value["plain"] and got["scalar"] == np.float32(2)
    own = np.ones(3)
    assert owned(own) is own  # an array of its own is not copied
