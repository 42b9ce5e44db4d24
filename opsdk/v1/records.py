"""TF1's TFRecord files and `tf.train.Example`s: `tf.python_io.TFRecordWriter` and
`tf_record_iterator` (also under `tf.io`), `tf.TFRecordReader` (a reader of opsdk/v1/readers.py),
the Example messages (`tf.train.Example`, `Features`, `Feature`, `BytesList`, `FloatList`,
`Int64List`) and `tf.parse_single_example` / `tf.parse_example` with `tf.FixedLenFeature` and
`tf.VarLenFeature`.

The files are TensorFlow's: records framed as `uint64 length | masked CRC-32C | data | masked
CRC-32C` (opsdk/v1/events.py), optionally compressed whole with GZIP or ZLIB
(`tf.python_io.TFRecordOptions`), and an Example is the protobuf message TF writes, encoded and
decoded on the wire format here (field numbers and types of TensorFlow's `example.proto` and
`feature.proto`), so files written by either side read on the other. Parsing runs in a py_func
node, in the process that built the graph.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from typing import Any, Iterator, Optional

import numpy as np

import opsdk
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.py_func import py_func_node
from opsdk.v1 import dtypes, errors, strings
from opsdk.v1 import events
from opsdk.v1 import session as _session
from opsdk.v1.readers import ReaderBase
from opsdk.v1.tensors import convert_to_tensor as _t


# ------------------------------------------------------------------------------ the wire format
_varint, _read_varint = events._varint, events._read_varint  # protobuf's varints, shared


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value: int for varints, bytes otherwise) of a message."""
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0 (zero bytes after the message?)")
        if wire == 0:
            value, at = _read_varint(data, at)
        elif wire == 2:
            size, at = _read_varint(data, at)
            if at + size > len(data):
                raise ValueError("a field runs past the end of the message")
            value, at = data[at:at + size], at + size
        elif wire == 5:
            value, at = data[at:at + 4], at + 4
        elif wire == 1:
            value, at = data[at:at + 8], at + 8
        else:
            raise ValueError(f"wire type {wire} is not one of protobuf's")
        yield number, wire, value


def _signed(n: int) -> int:
    return n - (1 << 64) if n >= 1 << 63 else n


# -------------------------------------------------------------------------------- the messages
class DecodeError(ValueError):
    """Bytes that are not a message of the class asked (protobuf's DecodeError)."""


class _Message:
    def SerializeToString(self, deterministic: Any = None) -> bytes:  # noqa: N802 - protobuf's
        return self._encode()

    def ParseFromString(self, data: bytes) -> int:  # noqa: N802
        fresh = self.FromString(data)
        self.__dict__.update(fresh.__dict__)
        return len(data)

    @classmethod
    def FromString(cls, data: bytes) -> Any:  # noqa: N802
        try:
            return cls._decode(bytes(data))
        except (ValueError, struct.error, UnicodeDecodeError) as exc:
            raise DecodeError(f"{cls.__name__}: not a valid message: {exc}") from None

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and self._encode() == other._encode()

    def ByteSize(self) -> int:  # noqa: N802
        return len(self._encode())

    def _encode(self) -> bytes:
        raise NotImplementedError

    @classmethod
    def _decode(cls, data: bytes) -> Any:
        raise NotImplementedError


class BytesList(_Message):
    """`tf.train.BytesList(value=[b'...', ...])`."""

    def __init__(self, value: Any = ()):
        self.value = [v.encode() if isinstance(v, str) else bytes(v) for v in value]

    def _encode(self) -> bytes:
        return b"".join(_field(1, v) for v in self.value)

    @classmethod
    def _decode(cls, data: bytes) -> "BytesList":
        return cls([v for n, w, v in _fields(data) if n == 1 and w == 2])

    def __repr__(self) -> str:
        return f"BytesList(value={self.value!r})"


class FloatList(_Message):
    """`tf.train.FloatList(value=[...])`: float32s (packed, as TF writes them)."""

    def __init__(self, value: Any = ()):
        self.value = [float(np.float32(v)) for v in np.asarray(value, dtype=np.float64).ravel()]

    def _encode(self) -> bytes:
        return _field(1, np.asarray(self.value, "<f4").tobytes()) if self.value else b""

    @classmethod
    def _decode(cls, data: bytes) -> "FloatList":
        out: list = []
        for n, w, v in _fields(data):
            if n == 1 and w == 2:
                out.extend(np.frombuffer(v, "<f4").tolist())
            elif n == 1 and w == 5:
                out.append(struct.unpack("<f", v)[0])
        return cls(out)

    def __repr__(self) -> str:
        return f"FloatList(value={self.value!r})"


class Int64List(_Message):
    """`tf.train.Int64List(value=[...])` (packed varints, as TF writes them)."""

    def __init__(self, value: Any = ()):
        self.value = [int(v) for v in np.asarray(value, dtype=np.int64).ravel()]

    def _encode(self) -> bytes:
        return _field(1, b"".join(_varint(v) for v in self.value)) if self.value else b""

    @classmethod
    def _decode(cls, data: bytes) -> "Int64List":
        out: list = []
        for n, w, v in _fields(data):
            if n == 1 and w == 2:
                at = 0
                while at < len(v):
                    x, at = _read_varint(v, at)
                    out.append(_signed(x))
            elif n == 1 and w == 0:
                out.append(_signed(v))
        return cls(out)

    def __repr__(self) -> str:
        return f"Int64List(value={self.value!r})"


_KINDS = ((1, "bytes_list", BytesList), (2, "float_list", FloatList),
          (3, "int64_list", Int64List))


class Feature(_Message):
    """`tf.train.Feature(bytes_list=..., float_list=..., int64_list=...)`: one of the three."""

    def __init__(self, bytes_list: Any = None, float_list: Any = None, int64_list: Any = None):
        given = [(k, v) for k, v in (("bytes_list", bytes_list), ("float_list", float_list),
                                     ("int64_list", int64_list)) if v is not None]
        if len(given) > 1:
            raise OpsdkError("Feature: give one of bytes_list, float_list and int64_list")
        self.kind = given[0][0] if given else None
        self.bytes_list, self.float_list = bytes_list or BytesList(), float_list or FloatList()
        self.int64_list = int64_list or Int64List()

    def WhichOneof(self, name: str) -> Optional[str]:  # noqa: N802
        return self.kind

    def HasField(self, name: str) -> bool:  # noqa: N802
        return self.kind == name

    def _encode(self) -> bytes:
        for number, name, _ in _KINDS:
            if self.kind == name:
                return _field(number, getattr(self, name)._encode())
        return b""

    @classmethod
    def _decode(cls, data: bytes) -> "Feature":
        found: dict = {}
        for n, w, v in _fields(data):
            for number, name, kind in _KINDS:
                if n == number and w == 2:
                    found = {name: kind._decode(v)}
        return cls(**found)

    def __repr__(self) -> str:
        return f"Feature({self.kind}={getattr(self, self.kind) if self.kind else None!r})"


class Features(_Message):
    """`tf.train.Features(feature={name: Feature, ...})`."""

    def __init__(self, feature: Any = None):
        self.feature = dict(feature or {})

    def _encode(self) -> bytes:
        entries = []
        for key in sorted(self.feature):  # deterministic (TF's own order may differ; readers
            # take map entries in any order)
            entry = _field(1, key.encode()) + _field(2, self.feature[key]._encode())
            entries.append(_field(1, entry))
        return b"".join(entries)

    @classmethod
    def _decode(cls, data: bytes) -> "Features":
        feature = {}
        for n, w, v in _fields(data):
            if n == 1 and w == 2:
                key, value = "", Feature()
                for m, u, x in _fields(v):
                    if m == 1 and u == 2:
                        key = x.decode("utf-8")
                    elif m == 2 and u == 2:
                        value = Feature._decode(x)
                feature[key] = value
        return cls(feature)

    def __repr__(self) -> str:
        return f"Features(feature={self.feature!r})"


class Example(_Message):
    """`tf.train.Example(features=tf.train.Features(...))`."""

    def __init__(self, features: Any = None):
        self.features = features if features is not None else Features()

    def _encode(self) -> bytes:
        inner = self.features._encode()
        return _field(1, inner) if inner or self.features.feature else b""

    @classmethod
    def _decode(cls, data: bytes) -> "Example":
        features = Features()
        for n, w, v in _fields(data):
            if n == 1 and w == 2:
                features = Features._decode(v)
        return cls(features)

    def __repr__(self) -> str:
        return f"Example(features={self.features!r})"


# ------------------------------------------------------------------------------------ files
class TFRecordCompressionType:
    NONE, ZLIB, GZIP = 0, 1, 2


class TFRecordOptions:
    """`tf.python_io.TFRecordOptions(compression_type)`: None/'' , 'ZLIB' or 'GZIP' (or the
    TFRecordCompressionType numbers)."""

    def __init__(self, compression_type: Any = None, **unused: Any):
        names = {None: 0, "": 0, "ZLIB": 1, "GZIP": 2, 0: 0, 1: 1, 2: 2}
        if compression_type not in names:
            raise OpsdkError(f"TFRecordOptions: compression_type {compression_type!r}; give '', "
                             "'ZLIB' or 'GZIP'")
        self.compression_type = names[compression_type]

    @staticmethod
    def get_compression_type_string(options: Any) -> str:
        kind = _compression(options)
        return {0: "", 1: "ZLIB", 2: "GZIP"}[kind]


def _compression(options: Any) -> int:
    if options is None:
        return 0
    if isinstance(options, TFRecordOptions):
        return options.compression_type
    return TFRecordOptions(options).compression_type


class TFRecordWriter:
    """`tf.python_io.TFRecordWriter(path, options=None)`: `write(record)` appends one record;
    `close()` (or leaving a `with` block) finishes the file."""

    def __init__(self, path: Any, options: Any = None):
        self._path = os.fspath(path)
        self._kind = _compression(options)
        self._parts: list[bytes] = []
        self._file = open(self._path, "wb")  # noqa: SIM115 - closed by close()

    def write(self, record: Any) -> None:
        if self._file is None:
            raise OpsdkError(f"TFRecordWriter: '{self._path}' is closed")
        data = record.encode() if isinstance(record, str) else bytes(record)
        framed = events.record(data)
        if self._kind:
            self._parts.append(framed)  # compressed whole at close, as one stream
        else:
            self._file.write(framed)

    def flush(self) -> None:
        if self._file is not None and not self._kind:
            self._file.flush()

    def close(self) -> None:
        if self._file is None:
            return
        if self._kind:
            blob = b"".join(self._parts)
            self._file.write(gzip.compress(blob) if self._kind == 2 else zlib.compress(blob))
        self._file.close()
        self._file = None

    def __enter__(self) -> "TFRecordWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def decompressed(data: bytes, compression: Any) -> bytes:
    """A file's contents uncompressed as its options say (GZIP, ZLIB, or none)."""
    kind = compression if isinstance(compression, int) else _compression(compression)
    if kind == 2:
        return gzip.decompress(data)
    if kind == 1:
        return zlib.decompress(data)
    return data


def _records_of(path: str, data: bytes, kind: int) -> list[bytes]:
    data = decompressed(data, kind)
    out, at = [], 0
    while at < len(data):
        header = data[at:at + 8]
        if len(header) < 8 or len(data) < at + 12 or \
                struct.unpack("<I", data[at + 8:at + 12])[0] != events.masked_crc(header):
            raise errors.DataLossError(None, None, f"{path}: corrupted record at byte {at} (its "
                                       "length's checksum does not match)")
        (n,) = struct.unpack("<Q", header)
        body = data[at + 12:at + 12 + n]
        tail = data[at + 12 + n:at + 16 + n]
        if len(body) < n or len(tail) < 4 or \
                struct.unpack("<I", tail)[0] != events.masked_crc(body):
            raise errors.DataLossError(None, None, f"{path}: corrupted record at byte {at} (its "
                                       "data is cut short or its checksum does not match)")
        out.append(body)
        at += 16 + n
    return out


def tf_record_iterator(path: Any, options: Any = None) -> Iterator[bytes]:
    """The records of a TFRecord file, checked against their checksums."""
    name = os.fspath(path)
    with open(name, "rb") as f:
        data = f.read()
    yield from _records_of(name, data, _compression(options))


class TFRecordReader(ReaderBase):
    """`tf.TFRecordReader(name=None, options=None)`: one record of a TFRecord file per read;
    key `"<file>:<record>"`."""

    _kind = "TFRecordReader"

    def __init__(self, name: Optional[str] = None, options: Any = None):
        super().__init__(name)
        self._compression = _compression(options)

    def _records(self, name: bytes, data: bytes) -> tuple[list[bytes], list[bytes]]:
        records = _records_of(os.fsdecode(name), data, self._compression)
        return [name + b":" + str(k).encode() for k in range(len(records))], records


# ------------------------------------------------------------------------------------ parsing
class FixedLenFeature:
    """`tf.FixedLenFeature(shape, dtype, default_value=None)`: a feature of exactly
    prod(shape) values (or the default when absent)."""

    def __init__(self, shape: Any, dtype: Any, default_value: Any = None):
        self.shape = [int(d) for d in (shape or [])]
        self.dtype = dtypes.as_dtype(dtype)
        self.default_value = default_value


class VarLenFeature:
    """`tf.VarLenFeature(dtype)`: any number of values, parsed into a SparseTensor."""

    def __init__(self, dtype: Any):
        self.dtype = dtypes.as_dtype(dtype)


def _values(who: str, key: str, feature: Optional[Feature], dtype: Any) -> list:
    if feature is None or feature.kind is None:
        return []
    want = {"string": "bytes_list", "float32": "float_list", "int64": "int64_list"}.get(
        "string" if dtype is dtypes.string else dtype.name)
    if want is None:
        raise OpsdkError(f"{who}: feature '{key}' has dtype {dtype}; give tf.int64, tf.float32 "
                         "or tf.string")
    if feature.kind != want:
        raise errors.InvalidArgumentError(
            None, None, f"{who}: feature '{key}' holds a {feature.kind}, not the {want} of its "
            f"declared dtype")
    return list(getattr(feature, want).value)


def _spec_check(who: str, features: Any) -> list:
    if not isinstance(features, dict) or not features:
        raise OpsdkError(f"{who}: give features as a dict of names to FixedLenFeature or "
                         "VarLenFeature")
    for key, spec in features.items():
        if not isinstance(spec, (FixedLenFeature, VarLenFeature)):
            raise OpsdkError(f"{who}: feature '{key}' is {type(spec).__name__}; give a "
                             "FixedLenFeature or a VarLenFeature")
    return sorted(features)


def _kind(spec: Any) -> str:
    return "uint8" if spec.dtype is dtypes.string else spec.dtype.name


def _fixed(who: str, key: str, spec: FixedLenFeature, values: list, record: int) -> Any:
    size = int(np.prod(spec.shape, dtype=np.int64))
    if not values:
        if spec.default_value is None:
            raise errors.InvalidArgumentError(
                None, None, f"{who}: feature '{key}' is required but missing in example {record}")
        default = np.broadcast_to(np.asarray(spec.default_value, dtype=object), spec.shape)
        values = list(default.ravel())
    if len(values) != size:
        raise errors.InvalidArgumentError(
            None, None, f"{who}: feature '{key}' of example {record} holds {len(values)} values; "
            f"its shape {spec.shape} takes {size}")
    if spec.dtype is dtypes.string:
        return np.array([v if isinstance(v, bytes) else str(v).encode() for v in values],
                        dtype=object).reshape(spec.shape)
    return np.asarray(values, dtype=spec.dtype.name).reshape(spec.shape)


def parse_example(serialized: Any, features: Any, name: Optional[str] = None,
                  example_names: Any = None) -> dict:
    """A batch of serialized Examples (a vector of strings) parsed: FixedLenFeature ->
    [batch, *shape], VarLenFeature -> a SparseTensor [batch, longest]."""
    return _parse("parse_example", serialized, features, name, batched=True)


def parse_single_example(serialized: Any, features: Any, name: Optional[str] = None,
                         example_names: Any = None) -> dict:
    """One serialized Example parsed: FixedLenFeature -> a tensor of its shape, VarLenFeature ->
    a SparseTensor [count]."""
    return _parse("parse_single_example", serialized, features, name, batched=False)


def _parse(who: str, serialized: Any, features: Any, name: Optional[str],
           batched: bool) -> dict:
    from opsdk.v1.sparse import SparseTensor

    keys = _spec_check(who, features)
    x = serialized if isinstance(serialized, opsdk.Tensor) else (
        strings.string_constant(serialized) if isinstance(serialized, (bytes, str, list))
        else _t(serialized))
    if not strings.is_string(x):
        raise OpsdkError(f"{who}: serialized must be strings, got {x.dtype}")
    scalar = _session_decoder(x) is strings._decode_scalar
    if batched == scalar:
        raise OpsdkError(f"{who}: give {'a vector of' if batched else 'one'} serialized "
                         "Example" + ("s" if batched else ""))

    def parse(array: np.ndarray) -> list:
        rows = [np.asarray(array, np.uint8).tobytes()] if scalar else \
            [np.asarray(row, np.uint8).tobytes() for row in array]
        examples = []
        for r, row in enumerate(rows):
            try:
                examples.append(_decode_padded(row, exact=scalar))
            except (ValueError, struct.error, UnicodeDecodeError) as exc:
                raise errors.InvalidArgumentError(
                    None, None, f"{who}: example {r} is not a serialized Example: {exc}") from None
        out: list = []
        for key in keys:
            spec = features[key]
            per = [_values(who, key, e.features.feature.get(key), spec.dtype) for e in examples]
            if isinstance(spec, FixedLenFeature):
                arrays = [_fixed(who, key, spec, v, r) for r, v in enumerate(per)]
                stacked = np.stack(arrays) if arrays else np.zeros(
                    [0, *spec.shape], dtype=object if spec.dtype is dtypes.string else
                    spec.dtype.name)
                value = stacked if batched else stacked[0]
                out.append(strings.byte_rows_of(value) if spec.dtype is dtypes.string
                           else value)
            else:
                idx = [[r, k] for r, v in enumerate(per) for k in range(len(v))]
                flat = [x for v in per for x in v]
                longest = max((len(v) for v in per), default=0)
                indices = np.asarray(idx, np.int64).reshape(-1, 2)
                if not batched:
                    indices = indices[:, 1:]
                vals = strings.byte_rows(flat) if spec.dtype is dtypes.string else \
                    np.asarray(flat, dtype=spec.dtype.name)
                shape = np.asarray([len(per), longest] if batched else [longest], np.int64)
                out.extend([indices, vals, shape])
        return out

    kinds: list = []
    for key in keys:
        spec = features[key]
        kinds.extend([_kind(spec)] if isinstance(spec, FixedLenFeature)
                     else ["int64", _kind(spec), "int64"])
    outs = list(py_func_node(parse, [x], kinds, name=name or who.replace("_", " ").title()
                             .replace(" ", "")).outputs)
    result: dict = {}
    for key in keys:
        spec = features[key]
        if isinstance(spec, FixedLenFeature):
            out = outs.pop(0)
            lead = [] if not batched else [None]
            if spec.dtype is dtypes.string:
                out.set_shape(lead + spec.shape + [None])
                _session.register_decoder(out, strings._decode_list if (lead or spec.shape)
                                          else strings._decode_scalar)
            else:
                out.set_shape(lead + spec.shape)
            result[key] = out
        else:
            indices, values, shape = outs.pop(0), outs.pop(0), outs.pop(0)
            rank = 2 if batched else 1
            indices.set_shape([None, rank])
            shape.set_shape([rank])
            if spec.dtype is dtypes.string:
                values.set_shape([None, None])
                _session.register_decoder(values, strings._decode_list)
            else:
                values.set_shape([None])
            result[key] = SparseTensor(indices, values, shape)
    return result


def _decode_padded(row: bytes, exact: bool) -> Example:
    """The Example of one string; a row of a vector of strings is zero-padded to the longest,
    and a message may end in zero bytes of its own: the fewest of the stripped zeros that make a
    whole message are its own (a zero byte after a message is a field number 0, never valid)."""
    if exact:
        return Example._decode(row)
    text = row.rstrip(b"\0")
    failure: Exception = ValueError("empty")
    for k in range(len(row) - len(text) + 1):
        try:
            return Example._decode(text + b"\0" * k)
        except (ValueError, struct.error, UnicodeDecodeError) as exc:
            failure = exc
    raise failure


def _session_decoder(tensor: Any) -> Any:
    from opsdk.v1.readers import graph_table_decoder

    return graph_table_decoder(tensor)


TRAIN = {"Example": Example, "Features": Features, "Feature": Feature, "BytesList": BytesList,
         "FloatList": FloatList, "Int64List": Int64List}
PYTHON_IO = {"TFRecordWriter": TFRecordWriter, "tf_record_iterator": tf_record_iterator,
             "TFRecordOptions": TFRecordOptions,
             "TFRecordCompressionType": TFRecordCompressionType}
TOP_LEVEL = {"TFRecordReader": TFRecordReader, "FixedLenFeature": FixedLenFeature,
             "VarLenFeature": VarLenFeature, "parse_example": parse_example,
             "parse_single_example": parse_single_example}
