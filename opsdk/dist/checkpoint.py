"""Checkpoints of a cluster's variables: one file per task holding variables, the index last.

    <folder>/ckpt-<step>.<task>.shard    written by the task itself (the runtime's checkpoint
                                         format, train/saver.py), atomically
    <folder>/ckpt-<step>.index           JSON: step, per task its shard file and sha256
    <folder>/checkpoint                  JSON: the kept indexes, newest last

Each shard is written to a temporary file, fsynced and renamed by its task; only when every
shard is in place does the master write the index, then the `checkpoint` pointer, each
atomically. A crash at any moment leaves the previous checkpoint whole and readable: an index
names only shards that were complete before it was written. Tasks write to `folder` on their
own file system, so on several machines it must be a shared one.

The index and the `checkpoint` list are the runtime's sharded checkpoint (train/saver.py):
`tf.train.latest_checkpoint(folder)` gives the newest index, and a `Saver` in one process
restores it (an evaluation script after training on a cluster).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Optional

import numpy as np

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.variables import global_variables
from opsdk.runtime.ir.device_names import location, task_of
from opsdk.runtime.train.saver import (checked_values, encode, get_checkpoint_state,
                                       is_checkpoint_file, latest_checkpoint, read_checkpoint,
                                       read_shard, read_sharded_index)  # noqa: F401

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
    listed = _kept(folder)
    kept = ([p for p in listed if p != index.name] + [index.name])[-keep:]
    write_atomically(folder / _POINTER, json.dumps({"checkpoints": kept}).encode())
    _remove_unkept(folder, kept)
    return index


def latest(folder: str | os.PathLike) -> Optional[Path]:
    """The index of the latest complete checkpoint in `folder`, or None."""
    found = latest_checkpoint(folder)
    return Path(found) if found else None


def restore(sess: Any, index: str | os.PathLike) -> int:
    """Put every task's variables back as checkpoint `index` has them; returns its step. A
    checkpoint of one file (a Saver's, written in one process) restores too: every global
    variable of the session's graph must be in it, and each task gets the values it holds."""
    index = Path(index)
    if is_checkpoint_file(index):
        return _restore_file(sess, index)
    step, shards = read_sharded_index(index)  # names only files of its folder
    _put_back(sess, index, {task: (lambda actor, s=s: actor.restore_shard.remote(
        str(index.parent / s["file"]), s["sha256"])) for task, s in shards.items()})
    return step


def _restore_file(sess: Any, path: Path) -> int:
    values = checked_values(path, read_checkpoint(path), global_variables(sess.graph))
    restore_values(sess, path, values)
    step = values.get("global_step")
    if step is not None and np.ndim(step) == 0:
        return int(step)
    digits = re.search(r"-(\d+)$", path.name)
    return int(digits.group(1)) if digits else 0


def restore_values(sess: Any, path: Path, values: dict) -> None:
    """Give each task of `sess` the values of `values` (variable name -> array) it holds: a
    variable lives on the task of its device scope, else on the session's own."""
    by_task: dict[str, dict] = {}
    for op in sess.graph.operations:
        if op.type == "variable" and op.name in values:
            task = task_of(location(op.device, sess.task, ""))
            by_task.setdefault(task, {})[op.name] = values[op.name]
    _put_back(sess, path, {task: (lambda actor, held=held: actor.restore.remote(held))
                           for task, held in by_task.items()})


def _put_back(sess: Any, path: Path, calls: dict) -> None:
    """Run each task's restore call (task -> call(actor) -> Ray ref) and wait for them all; the
    tasks as they run then hold the variables again, the others none."""
    ray = _ray()
    sess.forget_pushed()  # values pushed before the restore must not start the next step
    refs = {task: call(sess.actor(task)) for task, call in calls.items()}
    for task, ref in refs.items():
        try:
            ray.get(ref, timeout=sess.step_timeout)
        except Exception as exc:
            from opsdk.dist.master import _reason
            raise failure(f"restoring {path.name}: task {task}: {_reason(exc)}", exc) from None
    sess.trust_tasks()
    sess.note_holders(calls)


def _kept(folder: Path) -> list[str]:
    """The indexes the folder's `checkpoint` list keeps ([] when it is unreadable: a save
    writes a new one)."""
    try:
        state = get_checkpoint_state(folder)
    except OpsdkError:
        return []
    return [Path(p).name for p in state.all_model_checkpoint_paths] if state else []


def _remove_unkept(folder: Path, kept: list[str]) -> None:
    prefixes = {k[:-len(".index")] + "." for k in kept}
    for path in folder.glob("ckpt-*"):
        if not any(path.name.startswith(p) for p in prefixes):
            path.unlink(missing_ok=True)


def _ray() -> Any:
    from opsdk.dist.engine import ray_module
    return ray_module()
