"""Caches of what a repeated call resolved, so the hot paths pay a dict lookup, not a check.

Eager calls (`EagerCall`): an eager call normalises its attrs, resolves type attrs, infers
shapes and picks a kernel. For the same op called again on the same device with the same input
dtypes and attrs, all of that gives the same answers, so the first call that *succeeds* stores
them, and later calls go straight to the kernel; shape inference is remembered per input-shape
signature inside the entry. Only successful calls are stored and a miss runs the whole path,
so every error reads exactly as it does without the cache. The cache covers the common case:
every input a NumPy array, no list inputs, a host device; anything else (Python numbers, lists,
CuPy arrays, graph values) takes the full path.

A kernel is resolved again at most every `RECHECK_S` seconds: `load_kernel` stats the build
manifest and picks up a rebuild, and a rebuild takes far longer than that, so a process that
keeps calling an op sees the new kernel without paying a `stat` per call.

Session steps use `BoundedDict` for the input signatures a node's run-time check has passed.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from opsdk.registry.spec import OpSpec

from opsdk.runtime.kernels.choice import (BoundKernel, KernelChoice, bind_kernel, choose_kernel,
                                          given_output_call)

RECHECK_S = 0.5
ENTRIES_MAX = 512  # (op, device, dtypes, attrs) combinations kept
SHAPES_MAX = 256  # input-shape signatures kept per combination
_UNSET = object()

_SCALAR_TYPES = frozenset((int, str, bool, type(None)))


class BoundedDict:
    """A dict that forgets its oldest entry beyond `size` entries.

    Insertion order is the age: a working set that fits never churns, and a lookup is one
    plain `dict.get`. Writes (misses only) take a lock so eviction is safe across threads.
    """

    __slots__ = ("data", "size", "_lock")

    def __init__(self, size: int):
        self.data: dict = {}
        self.size = size
        self._lock = threading.Lock()

    def put(self, key: Any, value: Any) -> None:
        """Store `value` under `key`, evicting the oldest entry when full."""
        with self._lock:
            if key not in self.data and len(self.data) >= self.size:
                self.data.pop(next(iter(self.data)))
            self.data[key] = value

    def clear(self) -> None:
        """Forget everything (tests; a registry reload)."""
        with self._lock:
            self.data.clear()


class EagerCall:
    """One resolved (op, device, input dtypes, attrs) combination.

    `outputs` maps an input-shape signature (a tuple of shapes) to what `infer_outputs` gave
    for it, so a shape seen before is validated by one dict lookup.
    """

    __slots__ = ("spec", "device", "kind", "attrs", "type_attrs", "choice", "call", "checked_at",
                 "outputs", "single", "_into", "lend_keys")

    def __init__(self, spec: OpSpec, device: Optional[str], kind: Optional[str], attrs: dict,
                 type_attrs: dict, choice: KernelChoice):
        self.spec, self.device, self.kind = spec, device, kind
        self.attrs, self.type_attrs = attrs, type_attrs
        self.choice = choice
        self.call: BoundKernel = bind_kernel(spec, choice, attrs, type_attrs)
        self.checked_at = time.monotonic()
        self.outputs = BoundedDict(SHAPES_MAX)
        # One plain output: the result is that array, with no regrouping.
        self.single = len(spec.outputs) == 1 and not spec.outputs[0].is_list
        self._into: Any = _UNSET  # given_output_call of the current choice, found on first use
        # input shapes -> the pool key of an output worth lending, or None (kernels/eager.py)
        self.lend_keys = BoundedDict(SHAPES_MAX)

    def kernel(self) -> BoundKernel:
        """The bound kernel, re-resolved when the last resolution is older than RECHECK_S."""
        now = time.monotonic()
        if now - self.checked_at > RECHECK_S:
            choice = choose_kernel(self.spec, self.choice.device, self.kind)
            if choice.fn is not self.choice.fn:
                self.call = bind_kernel(self.spec, choice, self.attrs, self.type_attrs)
                self.choice = choice
                self._into = _UNSET
            self.checked_at = now
        return self.call

    def into(self) -> Optional[Callable]:
        """The kernel as a function of (inputs, given outputs) on the host (choice.py:
        given_output_call), or None where it cannot be handed its outputs. Call after kernel()."""
        if self._into is _UNSET:
            self._into = (given_output_call(self.spec, self.choice, self.attrs, self.type_attrs)
                          if self.choice.device.is_host else None)
        return self._into


EAGER_CALLS = BoundedDict(ENTRIES_MAX)


def eager_key(spec: OpSpec, inputs: Sequence[Any], attrs: Mapping[str, Any],
              device: Optional[str]) -> Optional[tuple]:
    """The cache key of an eager call, or None when the cache does not cover it.

    Attr values key with their type (3, 3.0 and True are equal in Python but not as attrs) and
    floats by their bits (-0.0 == 0.0, yet a scale of -0.0 is not one of 0.0).
    """
    if device not in (None, "cpu", "python") or len(inputs) != len(spec.inputs):
        return None
    dtypes = []
    for value in inputs:
        if type(value) is not np.ndarray:
            return None
        dtypes.append(value.dtype)
    if not attrs:
        return (spec.qualified_name, device, tuple(dtypes))
    frozen = []
    for name, value in attrs.items():
        kind = type(value)
        frozen.append((name, kind, value) if kind in _SCALAR_TYPES else (name, _freeze(value)))
    key = (spec.qualified_name, device, tuple(dtypes), tuple(frozen))
    try:
        hash(key)
    except TypeError:  # an attr value with no stable identity (an array): no caching
        return None
    return key


def _freeze(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALAR_TYPES:
        return kind, value
    if isinstance(value, (float, np.floating)):
        return kind, float(value).hex()
    if kind is list or kind is tuple:
        return kind, tuple(_freeze(item) for item in value)
    return kind, value
