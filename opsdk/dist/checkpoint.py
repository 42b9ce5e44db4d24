"""Checkpoints of a cluster's variables: one file per task holding variables, the index last.

    <folder>/ckpt-<step>.<task>.shard    written by the task itself (the runtime's checkpoint
                                         format, train/saver.py), atomically
    <folder>/ckpt-<step>.index           JSON: step, per task its shard file and sha256
    <folder>/checkpoint                  JSON: the latest index and those kept

Each shard is written to a temporary file, fsynced and renamed by its task; only when every
shard is in place does the master write the index, then the `checkpoint` pointer, each
atomically. A crash at any moment leaves the previous checkpoint whole and readable: an index
names only shards that were complete before it was written. Tasks write to `folder` on their
own file system, so on several machines it must be a shared one.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.train.saver import encode, read_checkpoint

from opsdk.dist.errors import failure, is_gone

_POINTER = "checkpoint"


def write_atomically(path: Path, data: bytes) -> None:
    """`data` to a temporary file beside `path`, fsynced, then renamed over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_shard(values: dict, path: str) -> Optional[dict]:
    """A task's side: its variables to `path`; None when it holds none."""
    if not values:
        return None
    data = encode(values)
    write_atomically(Path(path), data)
    return {"file": Path(path).name, "sha256": hashlib.sha256(data).hexdigest(),
            "variables": sorted(values)}


def read_shard(path: str, sha256: str) -> dict:
    """A task's side: the arrays of its shard, checked against the index's digest."""
    data = Path(path).read_bytes() if Path(path).exists() else b""
    if hashlib.sha256(data).hexdigest() != sha256:
        raise OpsdkError(f"{path}: checkpoint shard missing or not the one its index names "
                         "(sha256 differs); restore an older checkpoint")
    return read_checkpoint(Path(path))


def save(sess: Any, folder: str | os.PathLike, step: int, keep: int = 3) -> Path:
    """Checkpoint every task's variables as `ckpt-<step>`; returns the index's path."""
    ray = _ray()
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    refs = {}
    for task in sess.cluster.task_names():
        name = f"ckpt-{step}.{task.strip('/').replace('/', '_').replace(':', '-')}.shard"
        refs[task] = sess.actor(task).save_shard.remote(str(folder / name),
                                                        sess.trusted_incarnation(task))
    shards = {}
    for task, ref in refs.items():
        try:
            record = ray.get(ref, timeout=sess.step_timeout)
        except Exception as exc:
            if sess.held_nothing(task) and is_gone(exc):
                continue  # a worker Ray is restarting: it had no variables to write
            from opsdk.dist.master import _reason
            raise failure(f"checkpoint {step}: task {task} could not write its shard: "
                          f"{_reason(exc)}", exc) from None
        if record is not None:
            shards[task] = record
    sess.note_holders(shards)
    index = folder / f"ckpt-{step}.index"
    write_atomically(index, json.dumps({"format": 1, "step": step, "shards": shards},
                                       indent=1, sort_keys=True).encode())
    kept = ([p for p in _pointer(folder).get("all", []) if p != index.name] + [index.name])[-keep:]
    write_atomically(folder / _POINTER, json.dumps({"latest": index.name, "all": kept}).encode())
    _remove_unkept(folder, kept)
    return index


def latest(folder: str | os.PathLike) -> Optional[Path]:
    """The index of the latest complete checkpoint in `folder`, or None."""
    name = _pointer(Path(folder)).get("latest")
    return Path(folder) / name if name else None


def restore(sess: Any, index: str | os.PathLike) -> int:
    """Put every task's variables back as checkpoint `index` has them; returns its step."""
    ray = _ray()
    index = Path(index)
    try:
        record = json.loads(index.read_text())
        step, shards = int(record["step"]), dict(record["shards"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OpsdkError(f"{index}: not a readable checkpoint index ({exc})") from None
    sess.forget_pushed()  # values pushed before the restore must not start the next step
    refs = {task: sess.actor(task).restore_shard.remote(str(index.parent / s["file"]),
                                                         s["sha256"])
            for task, s in shards.items()}
    for task, ref in refs.items():
        try:
            ray.get(ref, timeout=sess.step_timeout)
        except Exception as exc:
            from opsdk.dist.master import _reason
            raise failure(f"restoring {index.name}: task {task}: {_reason(exc)}", exc) from None
    sess.trust_tasks()  # the tasks as they run now hold the variables again
    sess.note_holders(shards)
    return step


def _pointer(folder: Path) -> dict:
    try:
        return json.loads((folder / _POINTER).read_text())
    except (OSError, ValueError):
        return {}


def _remove_unkept(folder: Path, kept: list[str]) -> None:
    prefixes = {k[:-len(".index")] + "." for k in kept}
    for path in folder.glob("ckpt-*"):
        if not any(path.name.startswith(p) for p in prefixes):
            path.unlink(missing_ok=True)


def _ray() -> Any:
    from opsdk.dist.engine import ray_module
    return ray_module()
