"""The runtime primitives replicated training adds (registered on import of opsdk.dist).

- `_dist_round` (ps): the round a variable's accumulator is in; a worker reads it with the
  variable, and its gradient counts for that round only.
- `_dist_apply` (ps): a worker's gradient for one variable (dense, or sparse as (indices, rows)).
  `replicas` = 0 applies it at once (asynchronous training); else gradients are aggregated per
  round and the round's mean is applied once the `replicas`-th arrives; a gradient of an
  earlier round (a backup worker that was too late) is dropped and counted. The update runs the
  optimizer's declared `apply_*` op under the variable's lock, so concurrent updates never lose
  one another. It does not wait: it outputs the round its gradient waits in and the
  gradient's ticket (-1s: none waits).
- `_dist_wait` (ps): waits until the round a `_dist_apply` output names is applied, so the
  step of every contributor returns once its rounds are; a task runs a partition's waits after
  all of its contributions (opsdk/dist/partitions.py adds those control edges). The wait honours
  the step's token: an abort or the deadline ends it and takes the step's gradient out.
  Contributing everything before waiting on anything keeps a cluster going when the variables'
  rounds part: a worker that died inside a step may have completed one variable's round (the
  global step's counts at once) and not another's, and a step that waited on each in turn
  would then wait for a round that the other workers' steps could only finish after it.
- `_dist_partition_ids` / `_dist_stitch` (worker): the ids of a lookup split by shard (`mod`:
  id % shards, row id // shards), and the rows put back in order. So a shard receives only the
  ids it holds and the gradient of a lookup reaches it as (its ids, their gradient rows).
"""

from __future__ import annotations

import functools
import itertools
import threading
import weakref
from typing import Any

import numpy as np

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.autodiff.gradients import register_gradient_rule
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.registries import builtin_registry
from opsdk.runtime.ir.primitives import PRIMITIVES, Primitive, register_primitive
from opsdk.runtime.kernels.eager import run_eager

_WAIT_S = 0.05


class Accumulator:
    """The gradients of one variable's current round, and what happened to earlier ones."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.round = 0
        self.dense: list = []
        self.sparse: list = []
        self.applied = 0   # updates applied (rounds, or single gradients when asynchronous)
        self.dropped = 0   # stale gradients dropped
        self.owners: dict[int, int] = {}  # id() of a waiting gradient -> its step id
        self.pending: dict[int, tuple] = {}  # a waiting gradient's ticket -> the gradient


def withdraw(variables: Any, step_id: int) -> None:
    """Take the gradients of an aborted step out of every accumulator of this store, so that
    they never count toward a round (the abort reaches a task before any later step's
    gradient does: the master waits for it)."""
    with _TABLES_LOCK:
        table = dict(_TABLES.get(variables, {}))
    for acc in table.values():
        with acc.cond:
            for waiting in (acc.dense, acc.sparse):
                waiting[:] = [g for g in waiting if acc.owners.get(id(g)) != step_id]
            acc.pending = {t: g for t, g in acc.pending.items()
                           if acc.owners.get(id(g)) != step_id}
            acc.owners = {k: v for k, v in acc.owners.items() if v != step_id}


# Accumulators live beside the variables they update: one table per variable store (a task's,
# or an in-process Session's), gone with it.
_TABLES: "weakref.WeakKeyDictionary[Any, dict[str, Accumulator]]" = weakref.WeakKeyDictionary()
_TABLES_LOCK = threading.Lock()


def accumulator(variables: Any, name: str) -> Accumulator:
    """The accumulator of variable `name` in this store (made on first use)."""
    with _TABLES_LOCK:
        table = _TABLES.setdefault(variables, {})
        if name not in table:
            table[name] = Accumulator()
        return table[name]


def accumulator_counts(variables: Any) -> dict[str, dict]:
    """Per variable: round, updates applied, stale gradients dropped (tests, the benchmark)."""
    with _TABLES_LOCK:
        table = dict(_TABLES.get(variables, {}))
    return {n: {"round": a.round, "applied": a.applied, "dropped": a.dropped}
            for n, a in table.items()}


def reset_accumulators(variables: Any) -> None:
    """Forget the gradients waiting in this store's accumulators (after a restore)."""
    with _TABLES_LOCK:
        table = _TABLES.get(variables, {})
    for acc in table.values():
        with acc.cond:
            acc.dense, acc.sparse, acc.owners, acc.pending = [], [], {}, {}


def read_with_round(variables: Any, name: str) -> tuple:
    """Variable `name`'s round and value, read together (no update between: an update holds
    the accumulator's lock), as a worker reading both at its step's start would see them."""
    acc = accumulator(variables, name)
    with acc.cond:
        return np.asarray(acc.round, np.int64), variables.read(name)


def _round(ctx: Any, op: Any, inputs: list) -> tuple:
    acc = accumulator(ctx.variables, op.attrs["variable"])
    return (np.asarray(acc.round, np.int64),)


_NONE_PENDING = np.array([-1, -1], np.int64)  # (round, ticket): no gradient waits
_TICKETS = itertools.count()  # a waiting gradient's ticket (steps may share a token)


def _contribute(ctx: Any, op: Any, inputs: list) -> tuple:
    a = op.attrs
    acc = accumulator(ctx.variables, a["variable"])
    local = int(inputs[0])
    grad = tuple(np.asarray(v) for v in inputs[1:])
    with acc.cond:
        if a["replicas"] == 0:
            _apply(ctx, op, [grad])
            acc.applied += 1
            return (_NONE_PENDING,)
        if local < acc.round:
            acc.dropped += 1
            return (_NONE_PENDING,)
        waiting = acc.sparse if a["sparse"] else acc.dense
        waiting.append(grad)
        acc.owners[id(grad)] = ctx.step_id
        if len(acc.sparse) + len(acc.dense) >= a["replicas"]:
            _apply(ctx, op, acc.sparse or acc.dense)
            acc.sparse, acc.dense, acc.owners, acc.pending = [], [], {}, {}
            acc.round += 1
            acc.applied += 1
            acc.cond.notify_all()
            return (_NONE_PENDING,)
        ticket = next(_TICKETS)
        acc.pending[ticket] = grad
        return (np.array([acc.round, ticket], np.int64),)


def _wait(ctx: Any, op: Any, inputs: list) -> tuple:
    mine, ticket = (int(v) for v in inputs[0])
    if mine < 0:
        return ()
    name = op.attrs["variable"]
    acc = accumulator(ctx.variables, name)
    with acc.cond:
        while acc.round == mine:
            try:
                ctx.token.check(f"{op.type} (node '{op.name}'): waiting for round {mine} of "
                                f"'{name}''s other gradients")
            except BaseException:
                # The step is over (aborted, closed, late): its gradient must not count for
                # the round either.
                grad = acc.pending.pop(ticket, None)
                for waiting in (acc.dense, acc.sparse):
                    waiting[:] = [g for g in waiting if g is not grad]
                acc.owners.pop(id(grad), None)
                raise
            acc.cond.wait(_WAIT_S)
        acc.pending.pop(ticket, None)
    return ()


def _apply(ctx: Any, op: Any, grads: list) -> None:
    """Apply the mean of `grads` with the optimizer's update op (under the accumulator lock):
    update_op(variable, *slots, *reads, *hypers with the gradient at `grad_at`), then each
    `scalings` variable multiplied by its factor (Adam's powers)."""
    a = op.attrs
    store = ctx.variables
    names = [a["variable"], *a["slots"]]
    if a["update_op"] == "":  # a counter (the global step): one per round
        store.update(names[0], np.ones((), store.read(names[0]).dtype), np.add)
        return
    spec = _update_spec(a["update_op"])
    current = [store.read(n) for n in names]
    dtype = current[0].dtype
    reads = [store.read(n) for n in a.get("reads", ())]
    hypers = [np.asarray(h, dtype) for h in a["hypers"]]
    at, attrs = a.get("grad_at", len(hypers)), dict(a.get("op_attrs", ()))

    def update(owned: list, grad: np.ndarray) -> tuple:
        new = run_eager(spec, [*owned, *reads, *hypers[:at], grad, *hypers[at:]], attrs)
        return (new,) if isinstance(new, np.ndarray) else tuple(new)

    if not a["sparse"]:
        # An array: the mean of 0-d gradients is a NumPy scalar, which the eager call cache
        # does not key (every round of a scalar variable took the uncached path, 0.07 ms).
        grad = grads[0][0] if len(grads) == 1 else np.asarray(np.mean([g[0] for g in grads],
                                                                      axis=0))
        for name, value in zip(names, update(current, grad.astype(dtype, copy=False))):
            store.assign(name, value)
    else:
        ids = np.concatenate([g[0] for g in grads]).astype(np.int64, copy=False)
        rows = np.concatenate([g[1] for g in grads]).astype(dtype, copy=False) / len(grads)
        unique, where = np.unique(ids, return_inverse=True)
        summed = np.zeros((len(unique),) + rows.shape[1:], dtype)
        np.add.at(summed, where, rows)
        new = update([c[unique] for c in current], summed)
        for name, value, old in zip(names, new, current):
            store.assign(name, _scattered(old, unique, value), fresh=True)
    for name, factor in a.get("scalings", ()):
        store.update(name, np.asarray(factor, dtype), np.multiply)


@functools.lru_cache(maxsize=64)
def _update_spec(name: str) -> Any:
    """The optimizer's builtin update op: resolved once per process, not per gradient (loading
    the registry stats every declaration file to notice edits; builtin ops do not change under
    a running task)."""
    return builtin_registry().get(name)


def _scattered(old: np.ndarray, ids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`old` with rows `ids` replaced, written in place where the store's array is ours (the
    update holds the variable's lock; a 1M-row table is not copied per step)."""
    target = old
    try:
        target.flags.writeable = True
    except ValueError:  # not ours to write (a view): copy
        target = old.copy()
    target[ids] = rows
    return target


def _partition_ids(ctx: Any, op: Any, inputs: list) -> tuple:
    ids = np.asarray(inputs[0]).astype(np.int64, copy=False).reshape(-1)
    shards, shard = op.attrs["num_shards"], op.attrs["shard"]
    positions = np.flatnonzero(ids % shards == shard)
    return (ids[positions] // shards, positions.astype(np.int64))


def _stitch(ctx: Any, op: Any, inputs: list) -> tuple:
    n = op.attrs["num_shards"]
    positions, rows = inputs[:n], inputs[n:]
    count = sum(len(p) for p in positions)
    first = np.asarray(rows[0])
    out = np.empty((count,) + first.shape[1:], first.dtype)
    for p, r in zip(positions, rows):
        out[np.asarray(p)] = r
    return (out,)


def _stitch_gradient(op: Any, out_grads: list, differentiate: Any) -> list:
    """rows_i gets the output gradient at its positions; positions get none."""
    n = op.attrs["num_shards"]
    grad = out_grads[0]
    if grad is None:
        return [None] * len(op.inputs)
    rows = [apply_op(builtin_registry(), "gather", [grad, p], {"axis": 0}, device=op.device or None)
            for p in op.inputs[:n]]
    return [None] * n + rows


def _check_apply(attrs: dict, outputs: list) -> Any:
    for key, kind in (("variable", str), ("update_op", str), ("replicas", int), ("sparse", bool)):
        if type(attrs.get(key)) is not kind:
            return f"attr '{key}' must be a {kind.__name__}"
    return None


def _check_wait(attrs: dict, outputs: list) -> Any:
    return None if type(attrs.get("variable")) is str else "attr 'variable' must be a str"


if "_dist_apply" not in PRIMITIVES:
    register_primitive(Primitive("_dist_round", True, _round,
                                 "the round of a variable's gradient accumulator (ps)"))
    register_primitive(Primitive("_dist_apply", True, _contribute,
                                 "a replica's gradient: aggregated per round or applied at once",
                                 check=_check_apply))
    register_primitive(Primitive("_dist_wait", True, _wait,
                                 "the round of a _dist_apply's gradient, waited for after the step's "
                                 "contributions",
                                 check=_check_wait))
    register_primitive(Primitive("_dist_partition_ids", False, _partition_ids,
                                 "the ids of one shard (mod strategy) and their positions"))
    register_primitive(Primitive("_dist_stitch", False, _stitch,
                                 "rows of every shard put back in the ids' order"))
    register_gradient_rule("_dist_stitch", _stitch_gradient)
    for _name in ("_dist_round", "_dist_apply", "_dist_wait", "_dist_partition_ids"):
        register_gradient_rule(_name, lambda op, out_grads, _: [None] * len(op.inputs))

