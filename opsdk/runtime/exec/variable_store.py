"""The values of one session's variables: arrays of whichever device each variable lives on."""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

import numpy as np

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.devices import Device, device_of, to_host


class VariableStore:
    """The values of one session's variables, by variable node name."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._lock = threading.Lock()

    def read(self, name: str, device: Optional[Device] = None) -> Any:
        """The current value (as an array of `device` when given); an uninitialised variable is
        an error saying what to run."""
        try:
            value = self._values[name]
        except KeyError:
            raise OpsdkError(f"variable '{name}' is not initialised; run "
                             "global_variables_initializer() first") from None
        if device is None or device.owns(value):
            return value
        return device.copy_from(value, device_of(value))

    def host_values(self) -> dict[str, np.ndarray]:
        """Every initialised variable's value as a NumPy array (what a checkpoint stores)."""
        with self._lock:
            items = list(self._values.items())
        return {name: to_host(value) for name, value in items}

    def assign(self, name: str, value: Any, fresh: bool = False) -> Any:
        """Store `value`: a copy, unless `fresh` says nobody outside the step holds it (the
        output of a compiled kernel, which allocates its outputs). Stored NumPy arrays are made
        read-only: kernels never write into their inputs, and a fetched one is handed out as a
        copy (Session.run), so changing a fetched value never changes the variable."""
        if not fresh:
            value = value.copy() if hasattr(value, "copy") and hasattr(value, "shape") else (
                np.array(value, copy=True))
        _freeze(value)
        with self._lock:
            self._values[name] = value
        return value

    def update(self, name: str, value: Any, fn: Callable) -> Any:
        """`fn(current, value)` stored atomically (concurrent assign_add steps do not lose updates)."""
        with self._lock:
            new = fn(self.read(name), value)
            new = new.astype(value.dtype, copy=False) if hasattr(new, "astype") else np.asarray(
                new, dtype=value.dtype)
            _freeze(new)
            self._values[name] = new
        return new

    def initialised(self, name: str) -> bool:
        return name in self._values


def _freeze(value: Any) -> None:
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
