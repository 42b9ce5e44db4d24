"""The buffer pool: dead arrays of a session kept for reuse, keyed by (device, dtype, shape).

The memory planner (compile/memory.py) decides per plan which steps take their output buffers
from the pool and which slots give their value back when their last reader is done; this module
is what those steps and releases call at run time.

What keeps a live buffer out of the pool: a value is given back only when the slot list held
the last reference to it (`sys.getrefcount`: no view of it, no fetch, no variable, no second
slot of an `identity`), it owns its memory (`owns_memory`), is writeable (a variable's stored
array is read-only) and C-contiguous, and has the slot's static dtype and shape. A buffer taken
from the pool is popped under the pool's lock, so two runs of one session on two threads never
hold the same one. The pool is bounded: it keeps at most `max_bytes` in all and `per_key`
buffers of one key; a buffer that does not fit goes back to the allocator.

Fetched arrays are the caller's, so their memory used to go back to the allocator when the caller
dropped them, and a large one came back from the system as fresh pages on the next step, every
page faulted in anew (a 64 MiB GELU output: 15 ms a step with its memory reused; 23 ms, or on
some steps 80-110 ms of system time in this project's virtual machines, with fresh pages). So a
fetched array of at least `LEND_FROM` bytes written by a step that takes from the pool is *lent*
(`lend`): the caller gets a view of it and the pool remembers the array; `take` hands the array
out again once no view of it is left (its reference count says only the pool holds it). An array
lent stays the caller's for as long as they keep it or any view of it; the pool remembers at most
`per_key` lent arrays of one key and `max_bytes` of them in all, forgetting the oldest first.
"""

from __future__ import annotations

import ctypes
import datetime
import logging
import os
import sys
import threading
from typing import Any, Optional

import numpy as np

from opsdk.registry.errors import OpsdkError

# (device name, dtype, shape): buffers of one key are interchangeable
Key = tuple

DEFAULT_MAX_BYTES = 128 << 20
PER_KEY = 16
# Fetched arrays of at least this many bytes are lent (smaller ones come from the allocator's
# free lists without a page fault)
LEND_FROM = 256 << 10


def default_pool_bytes() -> int:
    """SessionConfig's default bound: OPSDK_BUFFER_POOL_BYTES when set (0: no pool), else
    DEFAULT_MAX_BYTES."""
    text = os.environ.get("OPSDK_BUFFER_POOL_BYTES")
    if text is None:
        return DEFAULT_MAX_BYTES
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise OpsdkError(f"OPSDK_BUFFER_POOL_BYTES={text!r}: expected a number of bytes >= 0 "
                         f"(0 switches the buffer pool off)")
    return value


class BufferPool:
    """Dead host arrays kept for the next step that writes an output of the same key."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, per_key: int = PER_KEY):
        self.max_bytes = max_bytes
        self.per_key = per_key
        self.bytes = 0  # held now
        self.taken = 0  # buffers handed to steps (for tests and tuning)
        self.given = 0  # buffers kept when a value died
        self.lent = 0  # fetched arrays lent (lend)
        self.reclaimed = 0  # lent arrays handed out again once the caller dropped them
        self.lent_bytes = 0  # remembered lent arrays, in all
        self._free: dict[Key, list] = {}
        self._lent: dict[Key, list] = {}  # key -> lent arrays, oldest first
        self._lent_order: list = []  # (key, id) of every remembered lent array, oldest first
        self._lock = threading.Lock()

    def take(self, key: Key) -> Optional[np.ndarray]:
        """A buffer of `key` that nobody else holds, or None (the kernel allocates)."""
        free = self._free.get(key)
        if not free:  # the common miss costs no lock
            return self._reclaim(key) if key in self._lent else None
        with self._lock:
            if not free:
                return None
            buf = free.pop()
            self.bytes -= buf.nbytes
            self.taken += 1
        return buf

    def lend(self, key: Key, buf: np.ndarray) -> np.ndarray:
        """The array to hand the caller for fetched array `buf` (which owns its memory and which
        nothing but the caller's slot holds: checked by the caller): a view of it, `buf` being
        remembered to be taken again once the view and every view of it are gone; or `buf`
        itself where the bounds leave no room."""
        n = buf.nbytes
        if n > self.max_bytes or self.per_key < 1:
            return buf
        with self._lock:
            while (len(self._lent.get(key, ())) >= self.per_key
                   or self.lent_bytes + n > self.max_bytes):
                self._forget_oldest(key if len(self._lent.get(key, ())) >= self.per_key else None)
            # looked up after the forgetting, which drops a key's list once it is empty
            self._lent.setdefault(key, []).append(buf)
            self._lent_order.append((key, id(buf)))
            self.lent_bytes += n
            self.lent += 1
        return buf.view()

    def _forget_oldest(self, key: Optional[Key]) -> None:
        """Forget the oldest lent array (of `key` when given); it stays the caller's. Under the
        lock."""
        order = self._lent_order
        i = 0 if key is None else next(j for j, (k, _) in enumerate(order) if k == key)
        k, ident = order.pop(i)
        lent = self._lent[k]
        j = next(j for j, b in enumerate(lent) if id(b) == ident)
        self.lent_bytes -= lent.pop(j).nbytes
        if not lent:
            del self._lent[k]

    def _reclaim(self, key: Key) -> Optional[np.ndarray]:
        """A lent array of `key` that the caller has dropped, with every view of it, or None."""
        with self._lock:
            lent = self._lent.get(key)
            if not lent:
                return None
            for j in range(len(lent)):
                # the list and the argument: no view holds it (a view of a view of it holds it
                # too, NumPy collapsing bases to the array owning the memory)
                if _refs(lent[j]) == 2:
                    buf = lent.pop(j)
                    if not lent:
                        del self._lent[key]
                    ident = id(buf)
                    self._lent_order.remove(next(e for e in self._lent_order
                                                 if e[1] == ident and e[0] == key))
                    self.lent_bytes -= buf.nbytes
                    self.reclaimed += 1
                    self.taken += 1
                    return buf
        return None

    def give(self, key: Key, buf: np.ndarray) -> None:
        """Keep `buf` (dead: checked by the caller) for a later `take`, if the bounds allow."""
        n = buf.nbytes
        with self._lock:
            free = self._free.setdefault(key, [])
            if len(free) >= self.per_key or self.bytes + n > self.max_bytes:
                return
            free.append(buf)
            self.bytes += n
            self.given += 1

    def clear(self) -> None:
        with self._lock:
            self._free.clear()
            self.bytes = 0
            self._lent.clear()
            self._lent_order.clear()
            self.lent_bytes = 0


_refs = sys.getrefcount
_ndarray = np.ndarray

# The compiled kernels' glue allocates outputs of 64 KiB and more on a 64-byte boundary, owned by
# a capsule of this name as the array's base (opsdk/include/opsdk/glue.h: empty).
_ALIGNED = b"opsdk.aligned"
_capsule_type = type(datetime.datetime_CAPI)
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.argtypes = (ctypes.py_object,)
_capsule_name.restype = ctypes.c_char_p


def owns_memory(buf: np.ndarray) -> bool:
    """Whether host array `buf` owns its memory: NumPy's own (no base), or the glue's aligned
    allocation (a base that is that capsule, which nothing else holds: a view of `buf` holds
    `buf` itself, so the caller's reference count of `buf` sees it). A foreign capsule (memory
    another library shares) is not ours to reuse."""
    base = buf.base
    return base is None or (type(base) is _capsule_type and _capsule_name(base) == _ALIGNED)


# A value of at most this many bytes is not worth keeping (the planner, compile/memory.py, counts
# a static shape at 8 bytes an item against it; a release here, the value's own bytes).
SMALL_BYTES = 4096


def release(pool: Optional[BufferPool], key: Key, values: list, slot: int) -> None:
    """Release slot `slot`'s value, giving it to `pool` when nothing else can reach it. A key
    whose shape is None (a value whose shape the plan does not know) takes the value's own."""
    buf = values[slot]
    values[slot] = None
    if (pool is not None and type(buf) is _ndarray and _refs(buf) == 2  # `buf` and refs' arg
            and (buf.base is None or owns_memory(buf))  # the common case without a call
            and buf.flags.writeable and buf.flags.c_contiguous and buf.dtype == key[1]):
        if key[2] is None:
            if buf.nbytes > SMALL_BYTES:
                pool.give((key[0], key[1], buf.shape), buf)
        elif buf.shape == key[2]:
            pool.give(key, buf)


def take_all(pool: Any, keys: tuple) -> tuple:
    """One pooled buffer per key, or () when the pool lacks one of them (the kernel then
    allocates every output; the buffers taken go back)."""
    if pool is None:
        return ()
    bufs = []
    for key in keys:
        buf = pool.take(key)
        if buf is None:
            for k, b in zip(keys, bufs):
                pool.give(k, b)
            return ()
        bufs.append(buf)
    return tuple(bufs)


# -- The reference counts, checked ----------------------------------------------------------------
#
# Whether a buffer is free is read from sys.getrefcount (`release`, `BufferPool._reclaim`), with
# the counts CPython 3.10-3.13 give: the argument of the call counted once, each holder once. An
# interpreter that borrows references onto its stack (CPython 3.14 may) can report one less, and
# then an array something else holds would look free and be written by a later step. So the two
# gates run once on probe arrays before any pool exists; where they misjudge, no session and no
# eager call pools anything (results are as without the pool) and the log says so once.

log = logging.getLogger("opsdk.buffers")
_checked: dict = {}


def _gates_judge_right() -> bool:
    pool = BufferPool(1 << 20)
    key = ("probe", np.dtype(np.float64), (1024,))
    held = np.zeros(1024)
    values = [held]
    release(pool, key, values, 0)  # `held` still names it: not to be kept
    if pool.bytes:
        return False
    values = [np.zeros(1024)]
    release(pool, key, values, 0)  # only the slot held it: kept
    if not pool.bytes:
        return False
    pool.clear()
    view = pool.lend(key, np.zeros(1024))
    if pool.take(key) is not None:  # the view holds it
        return False
    del view
    return pool.take(key) is not None


def pooling_problem() -> Optional[str]:
    """Why buffers cannot be pooled in this interpreter (None when they can): see above."""
    if "problem" not in _checked:
        problem = None if _gates_judge_right() else (
            f"buffer pool off: sys.getrefcount counts differently in Python "
            f"{sys.version.split()[0]}, so whether a buffer is free cannot be read from it; "
            f"results are as without the pool")
        if problem is not None:
            log.warning(problem)
        _checked["problem"] = problem
    return _checked["problem"]

