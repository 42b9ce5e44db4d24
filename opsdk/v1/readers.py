"""TF1's file readers and record decoders, the other half of a queue-fed input pipeline:
`tf.TextLineReader`, `tf.FixedLengthRecordReader` and `tf.WholeFileReader` (each `read(queue)`
takes file names from a string queue, opsdk/v1/queues.py, and gives `(key, value)`), and
`tf.decode_csv` and `tf.decode_raw` over what they read.

Each reader's `read` is a py_func node that keeps, per session, the file it is in and where; it
takes the next name from the queue when a file ends (waiting as a dequeue waits), and fails with
`tf.errors.OutOfRangeError` when the queue is closed and empty, as TF's do. Keys are as TF makes
them: `"<file>:<line>"` (lines counted from 1, header lines included), `"<file>:<record>"`
(records from 0), the file name. Values are strings (bytes; opsdk/v1/strings.py), a record's
bytes exactly. `TFRecordReader` (and `parse_example`) are not provided.
"""

from __future__ import annotations

import csv
import io
import os
import threading
import weakref
from typing import Any, Optional

import numpy as np

import opsdk
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.py_func import py_func_node, takes_step
from opsdk.v1 import args, dtypes, errors, strings
from opsdk.v1 import session as _session
from opsdk.v1.queues import QueueBase
from opsdk.v1.tensors import convert_to_tensor as _t


def file_bytes(who: str, path: str) -> bytes:
    """A file's contents; a file that cannot be read fails the step naming it (NotFoundError,
    as TF's readers fail)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise errors.NotFoundError(None, None, f"{who}: cannot read {path!r}: "
                                   f"{exc.strerror or exc}") from None


class _Position:
    """Where one reader is, in one session."""

    def __init__(self) -> None:
        self.name: Optional[bytes] = None
        self.records: list[bytes] = []
        self.keys: list[bytes] = []
        self.next = 0
        self.produced = 0
        self.completed = 0


class ReaderBase:
    """A reader of records from the files a string queue names (`tf.ReaderBase`)."""

    _kind = "ReaderBase"

    def __init__(self, name: Optional[str] = None):
        self._name = opsdk.get_default_graph().unique_name(name or self._kind)
        self._positions: "weakref.WeakKeyDictionary[Any, _Position]" = \
            weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def _records(self, name: bytes, data: bytes) -> tuple[list[bytes], list[bytes]]:
        raise NotImplementedError

    def _position(self, session: Any) -> _Position:
        with self._lock:
            return self._positions.setdefault(session, _Position())

    def _open(self, ctx: Any, queue: QueueBase, at: _Position) -> None:
        """Move to the next file the queue names (waiting for one)."""
        item = queue._take(ctx, None, False)[0]
        name = bytes(np.asarray(item, np.uint8).tobytes())
        data = file_bytes(f"{self._kind} '{self._name}'", os.fsdecode(name))
        at.name, at.next = name, 0
        at.keys, at.records = self._records(name, data)

    def _next(self, ctx: Any, queue: QueueBase, at: _Position) -> tuple[bytes, bytes]:
        while at.name is None or at.next >= len(at.records):
            if at.name is not None:
                at.completed += 1
                at.name = None
            self._open(ctx, queue, at)
        key, value = at.keys[at.next], at.records[at.next]
        at.next += 1
        at.produced += 1
        return key, value

    def _queue(self, who: str, queue: Any) -> QueueBase:
        if not isinstance(queue, QueueBase) or not queue._string[0]:
            raise OpsdkError(f"{self._kind}.{who}: give the queue of file names (a string queue, "
                             "as tf.train.string_input_producer makes)")
        return queue

    def read(self, queue: Any, name: Optional[str] = None) -> tuple:
        """The next record of the files the queue names: (key, value), two strings."""
        files = self._queue("read", queue)
        lock = self._lock

        @takes_step
        def read(ctx: Any) -> list:
            at = self._position(ctx.session)
            with lock:
                key, value = self._next(ctx, files, at)
            return [np.frombuffer(key, np.uint8).copy(), np.frombuffer(value, np.uint8).copy()]
        op = py_func_node(read, [], ["uint8", "uint8"], name=name or f"{self._name}_Read")
        for out in op.outputs:
            out.set_shape([None])
            _session.register_decoder(out, strings._decode_scalar)
        return op.outputs[0], op.outputs[1]

    def read_up_to(self, queue: Any, num_records: Any, name: Optional[str] = None) -> tuple:
        """Up to num_records records: (keys, values), two vectors of strings (fewer at the end
        of the input; at least one)."""
        files = self._queue("read_up_to", queue)
        count = args.static_int(f"{self._kind}.read_up_to", "num_records", num_records)
        lock = self._lock

        @takes_step
        def read(ctx: Any) -> list:
            at = self._position(ctx.session)
            keys, values = [], []
            with lock:
                for _ in range(count):
                    try:
                        key, value = self._next(ctx, files, at)
                    except errors.OutOfRangeError:
                        if keys:
                            break
                        raise
                    keys.append(key)
                    values.append(value)
            return [strings.byte_rows(keys), strings.byte_rows(values)]
        op = py_func_node(read, [], ["uint8", "uint8"], name=name or f"{self._name}_ReadUpTo")
        for out in op.outputs:
            out.set_shape([None, None])
            _session.register_decoder(out, strings._decode_list)
        return op.outputs[0], op.outputs[1]

    def _counter(self, what: str, name: Optional[str]) -> Any:
        @takes_step
        def count(ctx: Any) -> np.int64:
            return np.int64(getattr(self._position(ctx.session), what))
        out = py_func_node(count, [], ["int64"], name=name or f"{self._name}_{what}").outputs[0]
        out.set_shape([])
        return out

    def num_records_produced(self, name: Optional[str] = None) -> Any:
        return self._counter("produced", name)

    def num_work_units_completed(self, name: Optional[str] = None) -> Any:
        return self._counter("completed", name)

    def reset(self, name: Optional[str] = None) -> Any:
        """An op that forgets the file the reader is in and its counts."""
        @takes_step
        def forget(ctx: Any) -> None:
            with self._lock:
                self._positions[ctx.session] = _Position()
        return py_func_node(forget, [], [], name=name or f"{self._name}_Reset")

    def serialize_state(self, name: Optional[str] = None) -> Any:
        raise OpsdkError(f"{self._kind}.serialize_state is not supported by opsdk.v1")

    def restore_state(self, state: Any, name: Optional[str] = None) -> Any:
        raise OpsdkError(f"{self._kind}.restore_state is not supported by opsdk.v1")

    @property
    def supports_serialize(self) -> bool:
        return False


class TextLineReader(ReaderBase):
    """`tf.TextLineReader(skip_header_lines=None, name=None)`: one line per record, its end of
    line dropped; key `"<file>:<line>"`."""

    _kind = "TextLineReader"

    def __init__(self, skip_header_lines: Optional[int] = None, name: Optional[str] = None):
        super().__init__(name)
        self._skip = int(skip_header_lines or 0)

    def _records(self, name: bytes, data: bytes) -> tuple[list[bytes], list[bytes]]:
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()  # the newline ending the last line
        lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
        numbered = list(enumerate(lines, start=1))[self._skip:]
        return ([name + b":" + str(n).encode() for n, _ in numbered],
                [line for _, line in numbered])


class FixedLengthRecordReader(ReaderBase):
    """`tf.FixedLengthRecordReader(record_bytes, header_bytes=None, footer_bytes=None,
    hop_bytes=None, name=None, encoding=None)`: records of record_bytes bytes between a header
    and a footer of each file; key `"<file>:<record>"`."""

    _kind = "FixedLengthRecordReader"

    def __init__(self, record_bytes: int, header_bytes: Optional[int] = None,
                 footer_bytes: Optional[int] = None, hop_bytes: Optional[int] = None,
                 name: Optional[str] = None, encoding: Any = None):
        super().__init__(name)
        if encoding:
            raise OpsdkError("FixedLengthRecordReader: encoding (compressed files) is not "
                             "supported by opsdk.v1")
        self._cut = self.split_records(record_bytes, header_bytes, footer_bytes, hop_bytes)

    def _records(self, name: bytes, data: bytes) -> tuple[list[bytes], list[bytes]]:
        records = self._cut(data)
        return [name + b":" + str(k).encode() for k in range(len(records))], records

    @staticmethod
    def split_records(record_bytes: Any, header_bytes: Any, footer_bytes: Any,
                      hop_bytes: Any) -> Any:
        """A function cutting a file's contents into its records."""
        size = args.static_int("FixedLengthRecordReader", "record_bytes", record_bytes)
        if size < 1:
            raise OpsdkError(f"FixedLengthRecordReader: record_bytes must be >= 1, got {size}")
        header, footer = int(header_bytes or 0), int(footer_bytes or 0)
        hop = int(hop_bytes or 0) or size

        def cut(data: bytes) -> list[bytes]:
            body = data[header:len(data) - footer]
            return [body[s:s + size] for s in range(0, max(len(body) - size + 1, 0), hop)]
        return cut


class WholeFileReader(ReaderBase):
    """`tf.WholeFileReader(name=None)`: one record per file, its contents; key the file name."""

    _kind = "WholeFileReader"

    def _records(self, name: bytes, data: bytes) -> tuple[list[bytes], list[bytes]]:
        return [name], [data]


# -------------------------------------------------------------------------------- decoders
def _defaults(record_defaults: Any) -> list:
    """Per column: (dtype name, default value or None when the column is required)."""
    columns = []
    for k, given in enumerate(record_defaults):
        value = given
        if isinstance(given, (opsdk.Tensor, opsdk.Variable)):
            tensor = _t(given)
            found = args.entries(tensor)
            if found is None or None in found:
                raise OpsdkError(f"decode_csv: record_defaults[{k}] must be known when the "
                                 "graph is built (a constant)")
            if strings.is_string(tensor):  # bytes of one string, or rows of several
                data = np.asarray(found, np.uint8)
                if graph_table_decoder(tensor) is strings._decode_scalar:
                    columns.append(("string", data.tobytes()))
                elif tensor.shape[0]:
                    first = data.reshape(tensor.shape[0], -1)[0]
                    columns.append(("string", first.tobytes().rstrip(b"\0")))
                else:
                    columns.append(("string", None))
            else:
                columns.append((tensor.dtype, found[0] if found else None))
            continue
        items = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
        if len(items) > 1:
            raise OpsdkError(f"decode_csv: record_defaults[{k}] holds {len(items)} values; give "
                             "one (the column's default) or none (the column is required)")
        if not items:
            raise OpsdkError(f"decode_csv: record_defaults[{k}] is empty; give a default value, "
                             "or a typed empty constant (tf.constant([], tf.float32)) for a "
                             "required column")
        v = items[0]
        if isinstance(v, (str, bytes)):
            columns.append(("string", strings._bytes(v)))
        elif isinstance(v, (bool, np.bool_)):
            raise OpsdkError(f"decode_csv: record_defaults[{k}] is a bool; give a float, int or "
                             "string default")
        elif isinstance(v, (np.integer, np.floating)):
            columns.append((np.asarray(v).dtype.name, v))
        elif isinstance(v, int):
            columns.append(("int32", v))
        elif isinstance(v, float):
            columns.append(("float32", v))
        else:
            raise OpsdkError(f"decode_csv: record_defaults[{k}] is {type(v).__name__}; give a "
                             "float, int or string default")
    return columns


def decode_csv(records: Any, record_defaults: Any, field_delim: str = ",",
               use_quote_delim: bool = True, name: Optional[str] = None, na_value: str = "",
               select_cols: Any = None) -> list:
    """The columns of CSV records (a string or a vector of strings): one tensor per column,
    of records' shape, typed by record_defaults (a float, int or string default per column, or
    an empty typed constant for a required one)."""
    if len(field_delim) != 1:
        raise OpsdkError(f"decode_csv: field_delim must be one character, got {field_delim!r}")
    x = _t(records) if not isinstance(records, (str, bytes, list)) else \
        strings.string_constant(records)
    if not strings.is_string(x):
        raise OpsdkError(f"decode_csv: records must be strings, got {x.dtype}")
    scalar = graph_table_decoder(x) is strings._decode_scalar
    columns = _defaults(record_defaults)
    picked = list(range(len(columns))) if select_cols is None else [int(c) for c in select_cols]
    if select_cols is not None and len(picked) != len(columns):
        raise OpsdkError(f"decode_csv: {len(picked)} select_cols for {len(columns)} "
                         "record_defaults")
    na = na_value.encode() if isinstance(na_value, str) else na_value

    def decode(array: np.ndarray) -> list:
        texts = [strings._decode_scalar(array)] if scalar else list(strings._decode_list(array))
        out: list[list] = [[] for _ in columns]
        for r, text in enumerate(texts):
            reader = csv.reader(io.StringIO(text.decode("utf-8")), delimiter=field_delim,
                                quoting=csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE)
            fields = next(reader, [""])
            if select_cols is None and len(fields) != len(columns):
                raise errors.InvalidArgumentError(
                    None, None, f"decode_csv: expect {len(columns)} fields but have "
                    f"{len(fields)} in record {r}")
            for c, (kind, default) in enumerate(columns):
                col = picked[c]
                if col >= len(fields):
                    raise errors.InvalidArgumentError(
                        None, None, f"decode_csv: record {r} has {len(fields)} fields; "
                        f"select_cols names column {col}")
                raw = fields[col].encode("utf-8")
                if raw == b"" or (na and raw == na):
                    if default is None:
                        raise errors.InvalidArgumentError(
                            None, None, f"decode_csv: field {c} is required but missing in "
                            f"record {r}")
                    out[c].append(default)
                    continue
                out[c].append(raw if kind == "string" else _number(kind, raw, c, r))
        results = []
        for (kind, _), values in zip(columns, out):
            if kind == "string":
                rows = strings.byte_rows(values)
                results.append(rows[0] if scalar else rows)
            else:
                array = np.asarray(values, dtype=kind)
                results.append(array[0] if scalar else array)
        return results
    kinds = ["uint8" if kind == "string" else kind for kind, _ in columns]
    op = py_func_node(decode, [x], kinds, name=name or "DecodeCSV")
    outs = list(op.outputs)
    for out, (kind, _) in zip(outs, columns):
        if kind == "string":
            out.set_shape([None] if scalar else [None, None])
            _session.register_decoder(out, strings._decode_scalar if scalar
                                      else strings._decode_list)
        else:
            out.set_shape([] if scalar else [None])
    return outs


def _number(kind: str, raw: bytes, column: int, record: int) -> Any:
    text = raw.decode("utf-8").strip()
    try:
        return float(text) if kind.startswith("float") else int(text)
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, f"decode_csv: field {column} in record {record} is not a valid "
            f"{kind}: {text!r}") from None


def graph_table_decoder(tensor: Any) -> Any:
    from opsdk.v1 import graph_state

    return graph_state.table(tensor.graph, "decoders").get(tensor.name)


def decode_raw(input_bytes: Any = None, out_type: Any = None, little_endian: bool = True,
               fixed_length: Any = None, name: Optional[str] = None, bytes: Any = None) -> Any:
    """A string's bytes as numbers of out_type (a vector; a vector of strings gives one row
    each, the strings of one length)."""
    given = bytes if input_bytes is None else input_bytes
    x = _t(given) if not isinstance(given, (str, type(b""), list)) else \
        strings.string_constant(given)
    if not strings.is_string(x):
        raise OpsdkError(f"decode_raw: give strings, got {x.dtype}")
    kind = np.dtype(dtypes.as_dtype(out_type).name)
    order = "<" if little_endian else ">"
    if fixed_length is not None:
        raise OpsdkError("decode_raw: fixed_length is not supported by opsdk.v1")
    scalar = graph_table_decoder(x) is strings._decode_scalar

    def decode(array: np.ndarray) -> np.ndarray:
        data = np.asarray(array, np.uint8)
        width = data.shape[-1]
        if width % kind.itemsize:
            raise errors.InvalidArgumentError(
                None, None, f"decode_raw: a string of {width} bytes is not a whole number of "
                f"{kind.name} ({kind.itemsize} bytes each)")
        view = np.ascontiguousarray(data).view(kind.newbyteorder(order)).astype(kind)
        return view if scalar else view.reshape(data.shape[0], -1)
    out = py_func_node(decode, [x], [kind.name], name=name or "DecodeRaw").outputs[0]
    out.set_shape([None] if scalar else [None, None])
    return out


TOP_LEVEL = {"ReaderBase": ReaderBase, "TextLineReader": TextLineReader,
             "FixedLengthRecordReader": FixedLengthRecordReader,
             "WholeFileReader": WholeFileReader, "decode_csv": decode_csv,
             "decode_raw": decode_raw}
