"""Checkpoints: a session's variable values written atomically, checksummed, never unpickled.

A checkpoint file is

    b"OPSDKCKPT1\\n" | sha256 of the payload (32 bytes) | payload
    payload = header length (8 bytes, little endian) | header (JSON) | raw array bytes

The header lists each variable's name, dtype, shape, offset and size in the raw bytes, so reading
one needs NumPy's `frombuffer` only: no pickle, no code. Writing goes to a temporary file in the
same folder, is fsynced, then `os.replace`d over the target, so a crash mid-write leaves the last
good checkpoint; a save killed before the rename leaves its temporary file, which the next save
into that folder removes (temp names carry the writer's host and pid: a live writer's is kept).

A checkpoint may also be *sharded* (what a cluster writes, opsdk/dist/checkpoint.py): each task
writes its own variables to a shard file in the format above, and a JSON file `<name>.index`
(`{"format": 1, "step": N, "shards": {task: {"file", "sha256", "variables"}}}`) names the shards
by plain file names in its folder with their sha256. `read_checkpoint` and `Saver.restore` take
the index's path and read every shard, checked against its digest: a model trained on a cluster
restores in one process as any checkpoint does.

A small JSON index (`checkpoint` in the folder, `{"checkpoints": [names]}`) lists the kept
checkpoints (files, or the indexes of sharded ones), newest last; the Saver deletes the oldest
beyond `max_to_keep`. The index is data: it holds plain file names resolved inside its own
folder, so a crafted one naming `/x` or `../x` (or a link out) is refused with an error naming
the index, and nothing that is not a checkpoint is ever deleted.

    saver = Saver()
    path = saver.save(sess, "ckpt/model", global_step=100)   # 'ckpt/model-100'
    saver.restore(sess, latest_checkpoint("ckpt"))
    get_checkpoint_state("ckpt").all_model_checkpoint_paths  # ('ckpt/model-100',), as in TF
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from opsdk.registry.dtypes import DTYPE_NAMES
from opsdk.registry.errors import OpsdkError

from opsdk.runtime.ir.graph import get_default_graph
from opsdk.runtime.frontend.variables import Variable, global_variables

__all__ = ["Saver", "latest_checkpoint", "get_checkpoint_state", "CheckpointState",
           "CheckpointEntry", "read_checkpoint"]

MAGIC = b"OPSDKCKPT1\n"
INDEX_NAME = "checkpoint"
_DIGEST = 32
_LENGTH = 8
# `.<target>.<host>.<pid>.<random>.tmp`: whose temp file it is, so that only a dead writer's goes.
_TEMP = re.compile(r"^\.(?P<target>.+)\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>\d+)\.[0-9a-f]+\.tmp$")


@dataclass(frozen=True)
class CheckpointState:
    """What TF's `get_checkpoint_state` returns: the newest checkpoint and all kept, oldest first."""

    model_checkpoint_path: str
    all_model_checkpoint_paths: tuple[str, ...]


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
        names = [v.op.name for v in self.var_list]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise OpsdkError(f"Saver: variable(s) {', '.join(duplicates)} listed twice")
        if max_to_keep < 1:
            raise OpsdkError(f"Saver: max_to_keep must be at least 1, got {max_to_keep}")
        self.max_to_keep = max_to_keep

    def save(self, sess: Any, save_path: str | os.PathLike,
             global_step: Optional[int] = None) -> str:
        """Write the variables' current values in `sess` to `save_path` (`save_path-<step>` with
        a global_step: an int, or a tensor/Variable evaluated in `sess`, as in TF); returns the
        path written. Older checkpoints beyond max_to_keep go, and so do temp files that killed
        saves left in the folder."""
        path = _save_target(save_path, sess, global_step)
        kept = _read_index(path.parent)  # a crafted index is refused before anything is written
        remove_dead_temp_files(path.parent)
        values = sess.run([v.value() for v in self.var_list])
        try:
            _write_atomically(path, encode({v.op.name: np.asarray(a)
                                            for v, a in zip(self.var_list, values)}))
            self._remember(path, kept)
        except OSError as exc:  # a read-only folder, a full disk, a file where a folder goes
            raise OpsdkError(f"Saver.save: cannot write the checkpoint {str(path)!r}: "
                             f"{exc.strerror or exc} (in folder {str(path.parent)!r}); save "
                             "into a folder you can write") from None
        return str(path)

    def restore(self, sess: Any, save_path: str | os.PathLike) -> None:
        """Set the variables in `sess` from the checkpoint at `save_path`, after checking its
        checksum and that every variable is there with the same dtype and shape. A session of
        a cluster (it has `restore_checkpoint`) has each task restore the variables it holds."""
        path = Path(os.fspath(save_path))
        loaded = checked_values(path, read_checkpoint(path), self.var_list)
        if not hasattr(sess, "variables") and hasattr(sess, "restore_checkpoint"):
            sess.restore_checkpoint(path, loaded)
            return
        for name, value in loaded.items():  # all checked first: a bad file changes nothing
            sess.variables.assign(name, value)

    def _remember(self, path: Path, listed: list[str]) -> None:
        folder = path.parent
        kept = [name for name in listed if name != path.name] + [path.name]
        for old in kept[:-self.max_to_keep]:
            if is_checkpoint_file(folder / old):  # never a file the index merely names
                (folder / old).unlink(missing_ok=True)
        kept = kept[-self.max_to_keep:]
        _write_atomically(folder / INDEX_NAME, json.dumps({"checkpoints": kept}).encode())


def checked_values(path: Path, stored: dict[str, np.ndarray],
                   variables: Sequence[Variable]) -> dict[str, np.ndarray]:
    """The values of `variables` in checkpoint `path` (`stored`), each there with the
    variable's dtype and shape; an OpsdkError naming the first that is not."""
    loaded = {}
    for var in variables:
        if var.op.name not in stored:
            raise OpsdkError(f"{path}: checkpoint has no variable '{var.op.name}' (it has "
                             f"{', '.join(sorted(stored)) or 'none'})")
        value = stored[var.op.name]
        if value.dtype.name != var.dtype or not _fits(var.shape, value.shape):
            raise OpsdkError(f"{path}: variable '{var.op.name}' is {value.dtype.name} "
                             f"{list(value.shape)} in the checkpoint but {var.dtype} "
                             f"{_shape_text(var.shape)} in the graph")
        loaded[var.op.name] = value
    return loaded


def latest_checkpoint(folder: str | os.PathLike) -> Optional[str]:
    """The newest checkpoint the index of `folder` lists, or None when there is none."""
    state = get_checkpoint_state(folder)
    return state.model_checkpoint_path if state else None


def get_checkpoint_state(folder: str | os.PathLike) -> Optional[CheckpointState]:
    """The kept checkpoints of `folder` as TF's `get_checkpoint_state` gives them (paths joined
    to the folder), or None when the folder has no index or it lists none.

    >>> state = get_checkpoint_state("ckpt")              # doctest: +SKIP
    >>> saver.restore(sess, state.model_checkpoint_path)  # doctest: +SKIP
    """
    base = Path(os.fspath(folder))
    kept = _read_index(base)
    if not kept:
        return None
    paths = tuple(str(base / name) for name in kept)
    return CheckpointState(paths[-1], paths)


def _save_target(save_path: Any, sess: Any, global_step: Any) -> Path:
    """The checkpoint file a save writes; an empty path or an existing folder is an error
    saying what to give instead."""
    text = os.fspath(save_path)
    if not str(text).strip():
        raise OpsdkError("Saver.save: save_path is empty; give a checkpoint file path such as "
                         "'ckpt/model'")
    path = Path(text)
    if global_step is not None:
        path = Path(f"{path}-{_step_value(sess, global_step)}")
    if path.is_dir() or path.name in ("", ".", ".."):
        raise OpsdkError(f"Saver.save: save_path {str(path)!r} is a folder; a checkpoint is a "
                         f"file: give a path inside it, such as {str(path / 'model')!r}")
    existing = next((p for p in path.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise OpsdkError(f"Saver.save: cannot write the checkpoint {str(path)!r}: "
                         f"{str(existing)!r} is a file, not a folder")
    return path


def _step_value(sess: Any, global_step: Any) -> int:
    """The step as an int: given, or evaluated in `sess` (a tensor or Variable holding it)."""
    value = global_step
    if not isinstance(value, (int, np.integer, float, np.floating)):
        value = np.asarray(sess.run(global_step))
        value = value.item() if value.ndim == 0 else value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise OpsdkError(f"Saver.save: global_step must be an integer, got {value!r}")
    return int(value)


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
    """The arrays of the checkpoint at `path` (a file, or a sharded checkpoint's index: the
    arrays of all its shards); OpsdkError naming the file when it is missing, not a checkpoint,
    or corrupt."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise OpsdkError(f"{path}: cannot read checkpoint ({exc.strerror})") from None
    if data.lstrip()[:1] == b"{":  # a sharded checkpoint's index
        arrays: dict[str, np.ndarray] = {}
        for shard in read_sharded_index(Path(path))[1].values():
            arrays.update(read_shard(Path(path).parent / shard["file"], shard["sha256"]))
        return arrays
    return _arrays(path, data)


def _arrays(path: Path, data: bytes) -> dict[str, np.ndarray]:
    """The arrays of checkpoint file `path` holding `data`."""
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


def read_sharded_index(index: Path) -> tuple[int, dict[str, dict]]:
    """(step, per task its shard: {"file", "sha256", ...}) of a sharded checkpoint's index; an
    OpsdkError naming it when it is unreadable, malformed or names a file outside its folder."""
    try:
        record = json.loads(index.read_text(encoding="utf-8"))
        step, shards = int(record["step"]), dict(record["shards"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OpsdkError(f"{index}: not a readable checkpoint index ({exc})") from None
    for task, shard in shards.items():
        if not (isinstance(shard, dict) and isinstance(shard.get("file"), str)
                and isinstance(shard.get("sha256"), str)):
            raise OpsdkError(f"{index}: the shard of {task!r} is not "
                             '{"file": name, "sha256": digest}')
        _check_entry(index, shard["file"])
    return step, shards


def read_shard(path: Path, sha256: str) -> dict[str, np.ndarray]:
    """The arrays of a sharded checkpoint's shard, checked against its index's digest."""
    data = Path(path).read_bytes() if Path(path).is_file() else b""
    if hashlib.sha256(data).hexdigest() != sha256:
        raise OpsdkError(f"{path}: checkpoint shard missing or not the one its index names "
                         "(sha256 differs); restore an older checkpoint")
    return _arrays(Path(path), data)  # a file of arrays, never another index


def _parse_payload(path: Path, payload: bytes) -> tuple[list[CheckpointEntry], bytes]:
    """The header's entries, each checked as data (a crafted header, its sha256 recomputed,
    passes the integrity check): errors name the file and the entry."""
    try:
        length = int.from_bytes(payload[:_LENGTH], "little")
        header = json.loads(payload[_LENGTH:_LENGTH + length])
    except (ValueError, RecursionError):
        raise OpsdkError(f"{path}: checkpoint header is unreadable") from None
    variables = header.get("variables") if isinstance(header, dict) else None
    if not isinstance(variables, list) or header.get("format") != 1:
        raise OpsdkError(f'{path}: checkpoint header is not {{"format": 1, "variables": [...]}}')
    body = payload[_LENGTH + length:]
    entries: list[CheckpointEntry] = []
    seen: set[str] = set()
    for i, raw in enumerate(variables):
        entry = _entry(f"{path}: checkpoint entry {i}", raw, len(body))
        if entry.name in seen:  # never last-one-wins
            raise OpsdkError(f"{path}: checkpoint entry {i}: variable '{entry.name}' is listed "
                             "twice")
        seen.add(entry.name)
        entries.append(entry)
    return entries, body


_ENTRY_KEYS = ("dtype", "name", "nbytes", "offset", "shape")


def _entry(where: str, raw: Any, body_size: int) -> CheckpointEntry:
    """One header entry, every field of exactly its type and consistent with the bytes."""
    if not isinstance(raw, dict) or sorted(raw) != list(_ENTRY_KEYS):
        raise OpsdkError(f"{where}: must be an object with keys {', '.join(_ENTRY_KEYS)}, got "
                         f"{raw!r:.80}")
    name, dtype, shape = raw["name"], raw["dtype"], raw["shape"]
    if not isinstance(name, str) or not name:
        raise OpsdkError(f"{where}: the variable name must be a non-empty string, got {name!r:.40}")
    where = f"{where} ('{name}')"
    if not isinstance(dtype, str) or dtype not in DTYPE_NAMES:
        raise OpsdkError(f"{where}: dtype {dtype!r:.40} is not a variable dtype "
                         f"({', '.join(DTYPE_NAMES)})")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise OpsdkError(f"{where}: shape {shape!r:.60} must be a list of non-negative ints")
    for key in ("offset", "nbytes"):
        if type(raw[key]) is not int or raw[key] < 0:
            raise OpsdkError(f"{where}: {key} {raw[key]!r:.40} must be a non-negative int")
    size = math.prod(shape) * np.dtype(dtype).itemsize
    if size != raw["nbytes"] or raw["offset"] + raw["nbytes"] > body_size:
        raise OpsdkError(f"{where}: its {raw['nbytes']} bytes at offset {raw['offset']} do not "
                         f"fit dtype {dtype} shape {shape} in the file ({body_size} bytes of "
                         "data)")
    return CheckpointEntry(name, dtype, tuple(shape), raw["offset"], raw["nbytes"])


# -------------------------------------------------------------------------------------- files
def _write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file next to `path`, fsync it, then replace `path` with it:
    readers see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / temp_name(path.name, os.getpid())
    try:
        with open(tmp, "xb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:  # gone when renamed; removed when anything (Ctrl-C included) stopped the write
        tmp.unlink(missing_ok=True)
    _fsync_folder(path.parent)


def temp_name(target: str, pid: int) -> str:
    """The temporary file name a writer with `pid` on this host uses for `target`."""
    return f".{target}.{_host()}.{pid}.{secrets.token_hex(4)}.tmp"


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def remove_dead_temp_files(folder: Path) -> None:
    """Remove the temp files that saves killed mid-write left in `folder` (a SIGKILL runs no
    cleanup); those of writers still alive on this host, and other hosts', are left alone."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        m = _TEMP.match(name)
        if m and m["host"] == _host() and not _alive(int(m["pid"])):
            (folder / name).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


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
    """The names the index of `folder` lists whose file exists, oldest first; [] without an index.

    OpsdkError naming the index when it is unreadable, malformed, or names anything but a plain
    file name in the folder (an absolute path, `..`, a folder part, a link pointing out).
    """
    index = folder / INDEX_NAME
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):  # no index (the folder may not exist)
        return []
    except (OSError, ValueError) as exc:
        raise OpsdkError(f"{index}: unreadable checkpoint index ({exc}); remove it (the "
                         "checkpoints stay) and save again") from None
    listed = data.get("checkpoints") if isinstance(data, dict) else None
    if listed is None and isinstance(data, dict) and "latest" in data:
        listed = data.get("all")  # a cluster's index as opsdk wrote it before it shared this
    if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
        raise OpsdkError(f'{index}: the index is not {{"checkpoints": [names]}}; remove it (the '
                         "checkpoints stay) and save again")
    for name in listed:
        _check_entry(index, name)
    return [name for name in listed if (folder / name).is_file()]


def _check_entry(index: Path, name: str) -> None:
    folder = index.parent
    plain = name not in ("", ".", "..", INDEX_NAME) and not any(c in name for c in "/\\\0")
    if not plain:
        raise OpsdkError(f"{index}: the index names {name!r}, which is not a checkpoint file in "
                         "this folder (it lists plain file names only); remove that entry")
    if os.path.dirname(os.path.realpath(folder / name)) != os.path.realpath(folder):
        raise OpsdkError(f"{index}: the index names {name!r}, which links outside {folder}; "
                         "remove that entry")


def is_checkpoint_file(path: Path) -> bool:
    """Whether `path` is a checkpoint file (its magic bytes), not an index or anything else."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def _fits(static: Any, shape: tuple) -> bool:
    return static is None or (len(static) == len(shape) and all(
        d is None or d == s for d, s in zip(static, shape)))


def _shape_text(shape: Any) -> str:
    return "any" if shape is None else "[" + ", ".join("?" if d is None else str(d)
                                                      for d in shape) + "]"
