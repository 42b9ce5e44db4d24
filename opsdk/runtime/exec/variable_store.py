"""The values of one session's variables: arrays of whichever device each variable lives on.

Atomicity. Every variable has its own lock. `assign`, `update` (assign_add/assign_sub) and a
`transaction` over a set of variables hold the locks of the variables they touch, so a
read-modify-write of a variable never interleaves with another write of it: an optimizer's
update of a variable, its slots and its shared state (train/update.py) is one transaction, and
threads (or a distributed executor's asynchronous workers on one store) running train steps at
once lose no update. A transaction takes its locks in name order, so two transactions over
overlapping sets cannot deadlock.

In-place updates. A write normally replaces the array. An optimizer's update may instead write
into the stored array itself when nothing else holds it (`Transaction.take`: no step value, no
fetched or saved value, no view refers to it; TensorFlow's update kernels write their variable in
place too), which saves allocating and faulting in fresh memory every step. So a `read` takes the
variable's lock: a reader never holds an array while it is being written, and an array a reader
holds is never taken.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Iterable, Optional

import numpy as np

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.devices import Device, device_of, to_host
from opsdk.runtime.kernels.buffers import owns_memory


class UninitialisedVariableError(OpsdkError):
    """A variable was read before anything gave it a value (TF's FailedPreconditionError)."""


class VariableStore:
    """The values of one session's variables, by variable node name."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()  # guards the creation of per-variable locks
        self._streams: dict[tuple[str, int], tuple[np.random.Generator, threading.Lock]] = {}

    def random_stream(self, node: str, seed: int) -> tuple[np.random.Generator, threading.Lock]:
        """The generator of a seeded random node's sequence in this session, and the lock to
        draw under: made at its first use from `seed` (so its first values are those the seed
        alone gives), advanced by every draw; a new session starts again (TensorFlow's seeded
        random ops, whose state lives in the session's kernels)."""
        key = (node, seed)
        stream = self._streams.get(key)
        if stream is None:
            with self._lock:
                stream = self._streams.setdefault(key, (np.random.default_rng(seed),
                                                        threading.Lock()))
        return stream

    def read(self, name: str, device: Optional[Device] = None) -> Any:
        """The current value (as an array of `device` when given); an uninitialised variable is
        an error saying what to run."""
        with self._lock_of(name):
            value = self._current(name)
        return _on(device, value)

    def _current(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise UninitialisedVariableError(f"variable '{name}' is not initialised; run "
                             "global_variables_initializer() first") from None

    def host_values(self) -> dict[str, np.ndarray]:
        """Every initialised variable's value as a NumPy array (what a checkpoint stores), taken
        at one instant: no transaction is half-applied in it."""
        with self.transaction(list(self._values)):
            items = list(self._values.items())
        return {name: to_host(value) for name, value in items}

    def assign(self, name: str, value: Any, fresh: bool = False) -> Any:
        """Store `value`: a copy, unless `fresh` says nobody outside the step holds it (the
        output of a compiled kernel, which allocates its outputs). Stored NumPy arrays are made
        read-only: kernels never write into their inputs, and a fetched one is handed out as a
        copy (Session.run), so changing a fetched value never changes the variable."""
        value = _stored(value, fresh)
        with self._lock_of(name):
            self._values[name] = value
        return value

    def update(self, name: str, value: Any, fn: Callable) -> Any:
        """`fn(current, value)` stored atomically (concurrent assign_add steps do not lose updates)."""
        with self._lock_of(name):
            new = fn(self._current(name), value)
            new = new.astype(value.dtype, copy=False) if hasattr(new, "astype") else np.asarray(
                new, dtype=value.dtype)
            _freeze(new)
            self._values[name] = new
        return new

    def transaction(self, names: Iterable[str]) -> "Transaction":
        """A context holding the locks of `names`: reads and writes through it are one atomic
        step for every other user of those variables.

            with store.transaction(["w", "w/Momentum"]) as tx:
                tx.write("w", tx.read("w") - 1)
        """
        return Transaction(self, names if type(names) is _Ordered else sorted(set(names)))

    @staticmethod
    def ordered(names: Iterable[str]) -> "_Ordered":
        """`names` prepared once for `transaction` (deduplicated, in lock order), for a caller
        that opens transactions over the same variables on every step."""
        return _Ordered(sorted(set(names)))

    def initialised(self, name: str) -> bool:
        return name in self._values

    def _lock_of(self, name: str) -> threading.Lock:
        lock = self._locks.get(name)
        if lock is None:
            with self._lock:
                lock = self._locks.setdefault(name, threading.Lock())
        return lock


class _Ordered(list):
    """Variable names already deduplicated and sorted (`VariableStore.ordered`)."""


class Transaction:
    """The locks of some variables, held from `__enter__` to `__exit__` (in name order)."""

    __slots__ = ("store", "names", "_members", "_held")

    def __init__(self, store: VariableStore, names: list[str]):
        self.store, self.names = store, names
        self._members = frozenset(names)
        self._held: list[threading.Lock] = []

    def __enter__(self) -> "Transaction":
        for name in self.names:
            lock = self.store._lock_of(name)
            lock.acquire()
            self._held.append(lock)
        return self

    def __exit__(self, *exc: Any) -> None:
        held, self._held = self._held, []
        for lock in reversed(held):
            lock.release()

    def read(self, name: str, device: Optional[Device] = None) -> Any:
        """The variable's value; it must be one of the transaction's names."""
        self._check(name)
        return _on(device, self.store._current(name))

    def take(self, name: str) -> Optional[np.ndarray]:
        """The stored array itself, made writeable, when nothing but the store holds it (a host
        array owning its memory, contiguous), for a kernel to update in place; else None. The
        caller writes it back with `write(name, array, fresh=True)`, which freezes it again."""
        self._check(name)
        value = self.store._values.get(name)
        if type(value) is not np.ndarray or not owns_memory(value) or \
                not value.flags.c_contiguous or sys.getrefcount(value) != _ONLY_THE_STORE:
            return None
        try:
            value.flags.writeable = True
        except ValueError:  # a kernel glue's array, frozen: NumPy cannot unfreeze it (its base
            return None     # is the glue's capsule, no buffer); the update writes a fresh one
        return value

    def write(self, name: str, value: Any, fresh: bool = False) -> Any:
        """Store `value` (as `VariableStore.assign` does) inside the transaction."""
        self._check(name)
        value = _stored(value, fresh)
        self.store._values[name] = value
        return value

    def _check(self, name: str) -> None:
        if not self._held or name not in self._members:
            raise OpsdkError(f"variable '{name}' is not locked by this transaction (it holds "
                             f"{', '.join(self.names) or 'none'})")


def _on(device: Optional[Device], value: Any) -> Any:
    """`value` as an array of `device` (itself when it is one already, or no device is asked)."""
    if device is None or device.owns(value):
        return value
    return device.copy_from(value, device_of(value))


def _stored(value: Any, fresh: bool) -> Any:
    if not fresh:
        value = value.copy() if hasattr(value, "copy") and hasattr(value, "shape") else (
            np.array(value, copy=True))
    _freeze(value)
    return value


def _freeze(value: Any) -> None:
    if isinstance(value, np.ndarray):
        value.flags.writeable = False


def _references_of_a_stored_value() -> int:
    """What `sys.getrefcount` says in `Transaction.take` of a value only the store holds (the
    dict's reference, the local name, the call's argument: the count differs between Python
    versions, so it is measured the same way once)."""
    values = {"x": np.empty(1)}
    value = values.get("x")
    return sys.getrefcount(value)


_ONLY_THE_STORE = _references_of_a_stored_value()
