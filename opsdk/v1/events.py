"""TensorBoard event files written by hand: the TFRecord framing with masked CRC-32C and the
few protobuf messages a scalar or histogram summary needs (Event, Summary, HistogramProto).

A record is `uint64 length | uint32 masked_crc(length) | data | uint32 masked_crc(data)`, little
endian; `masked_crc(x) = rotate_right(crc32c(x), 15) + 0xa282ead8`. Messages are encoded field by
field (tag = field << 3 | wire type), which is all protobuf's wire format asks of a writer.
"""

from __future__ import annotations

import os
import socket
import struct
import time
import zlib
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


def _table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def _crc32c_python(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:  # google-crc32c (the `records` extra): C, ~1 GB/s where this loop makes ~5 MB/s
    import google_crc32c as _fast
except ImportError:  # pragma: no cover - the extra is installed by make test
    _fast = None


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of data, as TFRecord files checksum their records."""
    if _fast is not None:
        return int(_fast.value(bytes(data)))
    return _crc32c_python(data)


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord around `data`."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked_crc(length)) + data
            + struct.pack("<I", masked_crc(data)))


def read_records(path: str | os.PathLike) -> Iterator[bytes]:
    """The data of each record of a file, checking both checksums."""
    blob = Path(path).read_bytes()
    at = 0
    while at < len(blob):
        header = blob[at:at + 8]
        if len(header) < 8 or struct.unpack("<I", blob[at + 8:at + 12])[0] != masked_crc(header):
            raise ValueError(f"{path}: corrupt record header at byte {at}")
        (n,) = struct.unpack("<Q", header)
        data = blob[at + 12:at + 12 + n]
        if struct.unpack("<I", blob[at + 12 + n:at + 16 + n])[0] != masked_crc(data):
            raise ValueError(f"{path}: corrupt record data at byte {at}")
        yield data
        at += 16 + n


def read_summaries(folder: str | os.PathLike) -> list[tuple[int, bytes]]:
    """(step, serialized Summary) of every event holding a summary, in the event files of
    `folder` (oldest file first), read back without TensorFlow."""
    found = []
    for path in sorted(Path(folder).glob("events.out.tfevents.*")):
        for data in read_records(path):
            step, summary, at = 0, None, 0
            while at < len(data):
                field, wire = data[at] >> 3, data[at] & 7
                at += 1
                if wire == 0:  # a varint: the step is field 2
                    value, at = _read_varint(data, at)
                    step = value if field == 2 else step
                elif wire == 1:  # a double: the wall time
                    at += 8
                elif wire == 2:  # bytes: the summary is field 5
                    size, at = _read_varint(data, at)
                    summary = data[at:at + size] if field == 5 else summary
                    at += size
                else:
                    raise ValueError(f"{path}: an event field of wire type {wire} at byte {at}")
            if summary is not None:
                found.append((step, summary))
    return found


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data):
            raise ValueError("a number (a varint) runs past the end of the message")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at
        if shift > 63:
            raise ValueError("a varint is longer than ten bytes")


# ------------------------------------------------------------------------ protobuf encoding
def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        bits = value & 0x7F
        value >>= 7
        out.append(bits | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes_field(field: int, data: bytes) -> bytes:
    return _key(field, 2) + _varint(len(data)) + data


def _double(field: int, value: float) -> bytes:
    return _key(field, 1) + struct.pack("<d", float(value))


def _packed_doubles(field: int, values: np.ndarray) -> bytes:
    return _bytes_field(field, np.asarray(values, dtype="<f8").tobytes())


def scalar_value(tag: str, value: float) -> bytes:
    """A Summary.Value with simple_value."""
    return _bytes_field(1, tag.encode()) + _key(2, 5) + struct.pack("<f", float(value))


def histogram_value(tag: str, values: np.ndarray, bins: int = 30) -> bytes:
    """A Summary.Value with a HistogramProto of `values`."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size:
        counts, edges = np.histogram(values, bins=bins)
        lo, hi = float(values.min()), float(values.max())
    else:
        counts, edges, lo, hi = np.zeros(1), np.zeros(2), 0.0, 0.0
    histo = (_double(1, lo) + _double(2, hi) + _double(3, values.size)
             + _double(4, values.sum()) + _double(5, np.square(values).sum())
             + _packed_doubles(6, edges[1:]) + _packed_doubles(7, counts))
    return _bytes_field(1, tag.encode()) + _bytes_field(5, histo)


def png(pixels: np.ndarray) -> bytes:
    """A PNG of an (height, width, channels) uint8 array, 1 (gray), 3 (RGB) or 4 (RGBA)
    channels: each row unfiltered, the rows deflated with zlib."""
    height, width, channels = pixels.shape
    color = {1: 0, 3: 2, 4: 6}[channels]

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    rows = np.zeros((height, 1 + width * channels), np.uint8)  # filter byte 0: none
    rows[:, 1:] = pixels.reshape(height, width * channels)
    header = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + chunk(b"IEND", b""))


def image_value(tag: str, pixels: np.ndarray) -> bytes:
    """A Summary.Value with an Image: height, width, colorspace (the channels) and its PNG."""
    height, width, channels = pixels.shape
    encoded = (_key(1, 0) + _varint(height) + _key(2, 0) + _varint(width)
               + _key(3, 0) + _varint(channels) + _bytes_field(4, png(pixels)))
    return _bytes_field(1, tag.encode()) + _bytes_field(4, encoded)


def summary(values: list[bytes]) -> bytes:
    """A serialized Summary of encoded Summary.Values."""
    return b"".join(_bytes_field(1, v) for v in values)


def event(step: int, wall_time: Optional[float] = None, summary_bytes: Optional[bytes] = None,
          file_version: Optional[str] = None,
          tagged_run_metadata: Optional[tuple[str, bytes]] = None,
          graph_bytes: Optional[bytes] = None) -> bytes:
    """An Event: its summary, the file's version, a serialized GraphDef, or a (tag, serialized
    RunMetadata)."""
    out = _double(1, time.time() if wall_time is None else wall_time)
    out += _key(2, 0) + _varint(int(step))
    if file_version is not None:
        out += _bytes_field(3, file_version.encode())
    if graph_bytes is not None:
        out += _bytes_field(4, graph_bytes)
    if summary_bytes is not None:
        out += _bytes_field(5, summary_bytes)
    if tagged_run_metadata is not None:
        tag, metadata = tagged_run_metadata
        out += _bytes_field(8, _bytes_field(1, tag.encode()) + _bytes_field(2, metadata))
    return out


class EventFileWriter:
    """Appends events to `logdir/events.out.tfevents.<time>.<host>` (TensorBoard's name)."""

    def __init__(self, logdir: str | os.PathLike):
        folder = Path(os.fspath(logdir))
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
        self._file = open(self.path, "ab")
        self.write(event(0, file_version="brain.Event:2"))

    def write(self, event_bytes: bytes) -> None:
        self._file.write(record(event_bytes))

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
