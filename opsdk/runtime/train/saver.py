"""Checkpoints: a session's variable values written atomically, checksummed, never unpickled.

A checkpoint file is

    b"OPSDKCKPT1\\n" | sha256 of the payload (32 bytes) | payload
    payload = header length (8 bytes, little endian) | header (JSON) | raw array bytes

The header lists each variable's name, dtype, shape, offset and size in the raw bytes, so reading
one needs NumPy's `frombuffer` only: no pickle, no code. Writing goes to a temporary file in the
same folder, is fsynced, then `os.replace`d over the target, so a crash mid-write leaves the last
good checkpoint. A small JSON index (`checkpoint` in the folder) lists the kept checkpoints,
newest last; the Saver deletes the oldest beyond `max_to_keep`.

    saver = Saver()
    path = saver.save(sess, "ckpt/model", global_step=100)   # 'ckpt/model-100'
    saver.restore(sess, latest_checkpoint("ckpt"))
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from opsdk.registry.errors import OpsdkError

from opsdk.runtime.ir.graph import get_default_graph
from opsdk.runtime.frontend.variables import Variable, global_variables

__all__ = ["Saver", "latest_checkpoint", "CheckpointEntry", "read_checkpoint"]

MAGIC = b"OPSDKCKPT1\n"
INDEX_NAME = "checkpoint"
_DIGEST = 32
_LENGTH = 8


@dataclass(frozen=True)
class CheckpointEntry:
    """One variable as a checkpoint's header records it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


class Saver:
    """Saves and restores variables (default: all of the default graph's, at construction)."""

    def __init__(self, var_list: Optional[Sequence[Variable]] = None, max_to_keep: int = 5):
        self.var_list = list(var_list) if var_list is not None else global_variables(
            get_default_graph())
        if not self.var_list:
            raise OpsdkError("Saver: no variables to save (create Variables first, or pass "
                             "var_list)")
        names = [v.name for v in self.var_list]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise OpsdkError(f"Saver: variable(s) {', '.join(duplicates)} listed twice")
        if max_to_keep < 1:
            raise OpsdkError(f"Saver: max_to_keep must be at least 1, got {max_to_keep}")
        self.max_to_keep = max_to_keep

    def save(self, sess: Any, save_path: str | os.PathLike,
             global_step: Optional[int] = None) -> str:
        """Write the variables' current values in `sess` to `save_path` (`save_path-<step>` with
        a global_step); returns the path written. Older checkpoints beyond max_to_keep go."""
        path = Path(f"{os.fspath(save_path)}-{int(global_step)}" if global_step is not None
                    else os.fspath(save_path))
        values = sess.run([v.value() for v in self.var_list])
        _write_atomically(path, encode({v.name: np.asarray(a)
                                        for v, a in zip(self.var_list, values)}))
        self._remember(path)
        return str(path)

    def restore(self, sess: Any, save_path: str | os.PathLike) -> None:
        """Set the variables in `sess` from the checkpoint at `save_path`, after checking its
        checksum and that every variable is there with the same dtype and shape."""
        path = Path(os.fspath(save_path))
        stored = read_checkpoint(path)
        loaded = {}
        for var in self.var_list:
            if var.name not in stored:
                raise OpsdkError(f"{path}: checkpoint has no variable '{var.name}' (it has "
                                 f"{', '.join(sorted(stored)) or 'none'})")
            value = stored[var.name]
            if value.dtype.name != var.dtype or not _fits(var.shape, value.shape):
                raise OpsdkError(f"{path}: variable '{var.name}' is {value.dtype.name} "
                                 f"{list(value.shape)} in the checkpoint but {var.dtype} "
                                 f"{_shape_text(var.shape)} in the graph")
            loaded[var.name] = value
        for name, value in loaded.items():  # all checked first: a bad file changes nothing
            sess.variables.assign(name, value)

    def _remember(self, path: Path) -> None:
        folder = path.parent
        kept = [p for p in _read_index(folder) if p != path.name] + [path.name]
        for old in kept[:-self.max_to_keep]:
            (folder / old).unlink(missing_ok=True)
        kept = kept[-self.max_to_keep:]
        _write_atomically(folder / INDEX_NAME, json.dumps({"checkpoints": kept}).encode())


def latest_checkpoint(folder: str | os.PathLike) -> Optional[str]:
    """The newest checkpoint the index of `folder` lists, or None when there is none."""
    kept = _read_index(Path(os.fspath(folder)))
    return str(Path(os.fspath(folder)) / kept[-1]) if kept else None


# ------------------------------------------------------------------------------------ format
def encode(values: dict[str, np.ndarray]) -> bytes:
    """The bytes of a checkpoint holding `values` (name -> array)."""
    entries, chunks, offset = [], [], 0
    for name in sorted(values):
        array = np.asarray(values[name])
        raw = array.tobytes(order="C")  # (ascontiguousarray would turn a scalar into shape [1])
        entries.append({"name": name, "dtype": array.dtype.name, "shape": list(array.shape),
                        "offset": offset, "nbytes": len(raw)})
        chunks.append(raw)
        offset += len(raw)
    header = json.dumps({"format": 1, "variables": entries}, sort_keys=True).encode()
    payload = len(header).to_bytes(_LENGTH, "little") + header + b"".join(chunks)
    return MAGIC + hashlib.sha256(payload).digest() + payload


def read_checkpoint(path: Path) -> dict[str, np.ndarray]:
    """The arrays of the checkpoint at `path`; OpsdkError naming the file when it is missing,
    not a checkpoint, or corrupt."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise OpsdkError(f"{path}: cannot read checkpoint ({exc.strerror})") from None
    if not data.startswith(MAGIC):
        raise OpsdkError(f"{path}: not an opsdk checkpoint (bad magic bytes)")
    digest = data[len(MAGIC):len(MAGIC) + _DIGEST]
    payload = data[len(MAGIC) + _DIGEST:]
    if hashlib.sha256(payload).digest() != digest:
        raise OpsdkError(f"{path}: checkpoint is corrupt (sha256 mismatch); restore an older "
                         "checkpoint")
    entries, body = _parse_payload(path, payload)
    arrays = {}
    for e in entries:
        chunk = body[e.offset:e.offset + e.nbytes]
        array = np.frombuffer(chunk, dtype=np.dtype(e.dtype)).reshape(e.shape)
        arrays[e.name] = array.copy()  # writable, detached from the file's bytes
    return arrays


def _parse_payload(path: Path, payload: bytes) -> tuple[list[CheckpointEntry], bytes]:
    try:
        length = int.from_bytes(payload[:_LENGTH], "little")
        header = json.loads(payload[_LENGTH:_LENGTH + length])
        entries = [CheckpointEntry(e["name"], e["dtype"], tuple(e["shape"]), e["offset"],
                                   e["nbytes"]) for e in header["variables"]]
    except (ValueError, KeyError, TypeError):
        raise OpsdkError(f"{path}: checkpoint header is unreadable") from None
    body = payload[_LENGTH + length:]
    for e in entries:
        size = int(np.prod(e.shape, dtype=np.int64)) * np.dtype(e.dtype).itemsize
        if size != e.nbytes or e.offset + e.nbytes > len(body):
            raise OpsdkError(f"{path}: variable '{e.name}': its {e.nbytes} bytes do not fit "
                             f"dtype {e.dtype} shape {list(e.shape)} in the file")
    return entries, body


# -------------------------------------------------------------------------------------- files
def _write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file next to `path`, fsync it, then replace `path` with it:
    readers see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (where the platform lets a folder be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a folder; the data itself is synced
    finally:
        os.close(fd)


def _read_index(folder: Path) -> list[str]:
    try:
        listed = json.loads((folder / INDEX_NAME).read_text())["checkpoints"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [name for name in listed if isinstance(name, str) and (folder / name).is_file()]


def _fits(static: Any, shape: tuple) -> bool:
    return static is None or (len(static) == len(shape) and all(
        d is None or d == s for d, s in zip(static, shape)))


def _shape_text(shape: Any) -> str:
    return "any" if shape is None else "[" + ", ".join("?" if d is None else str(d)
                                                      for d in shape) + "]"
