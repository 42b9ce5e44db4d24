"""Where a `_send` meets its `_recv` (compile/sendrecv.py): a table of values by key.

    key = (step id, tensor name, send location, recv location, send incarnation)

`LocalRendezvous` serves one process: the partitions of a Session step meet in one (each run has
its own), and a task of a cluster keeps one for the values other tasks send it. `recv` waits for
its value; the wait ends with the value, with the step's abort error (the first failure anywhere
in the step), or with a CancelledError when the run's token is cancelled or its deadline passes,
so no receiver waits forever.
"""

from __future__ import annotations

import threading
from typing import Any, Optional, Protocol

from opsdk.runtime.exec.executor import RunToken

_POLL = 0.05  # seconds between checks of the run's token while waiting


class Rendezvous(Protocol):
    """What `_send` and `_recv` steps need of a rendezvous."""

    def send(self, key: tuple, value: Any) -> None: ...

    def recv(self, key: tuple, token: RunToken) -> Any: ...

    def abort(self, step_id: int, error: BaseException) -> None: ...

    def end_step(self, step_id: int) -> None: ...


class LocalRendezvous:
    """An in-process rendezvous (see the module docstring). Thread-safe."""

    def __init__(self) -> None:
        self._values: dict[tuple, Any] = {}
        self._aborted: dict[int, BaseException] = {}
        self._cond = threading.Condition()

    def send(self, key: tuple, value: Any) -> None:
        """Deliver `value` under `key`; a second send of one key is a bug of the caller."""
        with self._cond:
            if key[0] in self._aborted:
                return  # the step is over; nobody will receive it
            if key in self._values:
                raise RuntimeError(f"rendezvous: {key[1]!r} sent twice in step {key[0]}")
            self._values[key] = value
            self._cond.notify_all()

    def recv(self, key: tuple, token: Optional[RunToken] = None) -> Any:
        """The value sent under `key`, waiting for it (see the module docstring)."""
        where = f"receiving '{key[1]}' from {key[2]}"
        with self._cond:
            while key not in self._values:
                error = self._aborted.get(key[0])
                if error is not None:
                    raise error
                if token is not None:
                    token.check(where)
                self._cond.wait(_POLL)
            return self._values.pop(key)

    def abort(self, step_id: int, error: BaseException) -> None:
        """Fail every receiver of step `step_id`, now and later, with `error`."""
        with self._cond:
            self._aborted.setdefault(step_id, error)
            for key in [k for k in self._values if k[0] == step_id]:
                del self._values[key]
            self._cond.notify_all()

    def end_step(self, step_id: int) -> None:
        """Forget what step `step_id` left behind (values nobody received, its abort)."""
        with self._cond:
            self._aborted.pop(step_id, None)
            for key in [k for k in self._values if k[0] == step_id]:
                del self._values[key]

    def pending(self) -> int:
        """How many values wait for their receiver (for tests)."""
        with self._cond:
            return len(self._values)
