"""What a device is: its arrays, its copies to and from the host, and how its kernels are called.

A device type is one subclass of `Device` in one module of this package, registered by one line
in `__init__.py`. Placement, `_recv` steps, the executor and eager calls ask the device object;
nothing else in the runtime knows what "cpu" or "cuda" means.

Kernel kinds are the registry's names for kernel sources (`python`, `cpu`, `cuda`); a device
lists the kinds it can run, preferred first. The calling convention of each kind on a device is
`Device.call`, which returns a function of the flat input values (a list input as a Python list)
giving what the kernel gives (bare for one output, a tuple for several).
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any, Callable, ClassVar, Mapping, Optional, Sequence

import numpy as np

from opsdk.registry.errors import OpsdkError
from opsdk.registry.spec import OpSpec

KernelCall = Callable[[Sequence[Any]], Any]
# (input values, given outputs): the outputs a tuple of one buffer per declared output, or ()
# for the kernel to allocate them
GivenCall = Callable[[Sequence[Any], tuple], Any]


class Device:
    """One device of one type (`index` tells several of a type apart)."""

    type_name: ClassVar[str] = ""  # as device names spell it: "CPU", "GPU", ...
    kernel_kinds: ClassVar[tuple[str, ...]] = ()  # kernel sources it runs, preferred first
    auto: ClassVar[bool] = False  # placement may choose it for nodes with no device scope
    is_host: ClassVar[bool] = False  # its arrays are NumPy arrays in this process
    # The compiler of its fused elementwise kernels: a name of entry point group
    # `opsdk.fusion_compilers` (kernels/fused.py). None: its elementwise nodes run unfused.
    fusion_target: ClassVar[Optional[str]] = None

    def __init__(self, index: int = 0):
        self.index = index
        self.copies_in = 0  # values copied onto this device (counted for tests and explain)
        self.copies_out = 0
        self._count = threading.Lock()

    @property
    def name(self) -> str:
        """The canonical name, e.g. `/device:GPU:0`."""
        return f"/device:{self.type_name}:{self.index}"

    def __repr__(self) -> str:
        return f"<Device {self.name}>"

    # ------------------------------------------------------------------ the device's arrays
    def unavailable(self) -> Optional[str]:
        """None when the device can run kernels here, else what it needs, as a phrase
        ("needs a CUDA GPU; CuPy sees no GPU on this machine")."""
        return None

    @property
    def xp(self) -> Any:
        """The array module python kernels get on this device."""
        raise NotImplementedError

    def owns(self, value: Any) -> bool:
        """Whether `value` is an array of this device type."""
        raise NotImplementedError

    def from_host(self, array: np.ndarray) -> Any:
        """`array` (NumPy) copied onto this device."""
        raise NotImplementedError

    def to_host(self, value: Any) -> np.ndarray:
        """A value of this device as a NumPy array."""
        raise NotImplementedError

    def copy_from(self, value: Any, source: "Device") -> Any:
        """`value`, living on `source`, as a value of this device (through the host by default;
        a value already of this device type passes unchanged)."""
        if source is self or self.owns(value):
            return value
        host = source.to_host(value)
        with source._count:
            source.copies_out += 1
        if self.is_host:
            return host
        with self._count:
            self.copies_in += 1
        return self.from_host(host)

    # ------------------------------------------------------------------ calling kernels
    def call(self, spec: OpSpec, kind: str, fn: Callable, attrs: Mapping[str, Any],
             type_attrs: Mapping[str, str]) -> KernelCall:
        """The kernel `fn` of kind `kind` as a function of the flat input values. The default
        convention is the python kernel's: `fn(xp, *inputs, **attrs, **type attrs as dtypes)`."""
        if kind != "python":
            raise OpsdkError(f"op '{spec.name}': {self.name} cannot run {kind} kernels")
        return python_call(spec, fn, attrs, type_attrs, self.xp)

    def star_call(self, spec: OpSpec, kind: str, fn: Callable, attrs: Mapping[str, Any],
                  type_attrs: Mapping[str, str]) -> Optional[tuple[Callable, bool]]:
        """The kernel as `f(*inputs)` with nothing in Python between a step and the kernel, where
        `call`'s convention amounts to that, else None: (f, retry), `retry` saying that a
        ValueError or TypeError of f's is to be retried through `call`, which may first convert
        the inputs (a built kernel's glue takes contiguous arrays only). A python kernel without
        list inputs: `fn` with the array module and its attrs bound, never retried."""
        if kind != "python" or packer(spec, attrs) is not None:
            return None
        kwargs = {**attrs, **{k: np.dtype(v) for k, v in type_attrs.items()}}
        return partial(fn, self.xp, **kwargs), False

    def call_into(self, spec: OpSpec, kind: str, fn: Callable, attrs: Mapping[str, Any],
                  type_attrs: Mapping[str, str]) -> Optional[GivenCall]:
        """The kernel as a function of (input values, given outputs), or None when it cannot
        write into given buffers. A python kernel can when one output of its op declares
        `inplace` (the declaration's promise that the kernel takes `out=` for that output,
        docs/opdefs.md); its given outputs are then that one buffer."""
        if kind != "python" or not python_takes_out(spec) or packer(spec, attrs) is not None:
            return None
        plain = python_call(spec, fn, attrs, type_attrs, self.xp)
        xp, kwargs = self.xp, {**attrs, **{k: np.dtype(v) for k, v in type_attrs.items()}}

        def given(values: Sequence[Any], outs: tuple) -> Any:
            return fn(xp, *values, **kwargs, out=outs[0]) if outs else plain(values)
        return given


def python_takes_out(spec: OpSpec) -> bool:
    """Whether `spec`'s python kernel takes `out=`: one output (of one or several), not a list,
    declares `inplace` (OpSpec.inplace_output)."""
    return spec.inplace_output is not None


def python_call(spec: OpSpec, fn: Callable, attrs: Mapping[str, Any],
                type_attrs: Mapping[str, str], xp: Any) -> KernelCall:
    """`fn(xp, *inputs, **attrs, **unbound type attrs as NumPy dtypes)`, list inputs regrouped."""
    pack = packer(spec, attrs)
    kwargs = dict(attrs)
    kwargs.update({k: np.dtype(v) for k, v in type_attrs.items()})
    if not kwargs and pack is None:
        return lambda values: fn(xp, *values)  # the hot path: no packing, no kwargs
    if pack is None:
        return lambda values: fn(xp, *values, **kwargs)
    return lambda values: fn(xp, *pack(values), **kwargs)


def compiled_tail(spec: OpSpec, attrs: Mapping[str, Any], type_attrs: Mapping[str, str]) -> tuple:
    """What a built kernel takes after its inputs: attrs in declaration order, then the unbound
    type attrs' dtype names."""
    return tuple(attrs[a.name] for a in spec.attrs) + tuple(
        type_attrs[t.name] for t in spec.unbound_type_attrs)


def packer(spec: OpSpec, attrs: Mapping[str, Any]) -> Optional[Callable[[Sequence], list]]:
    """Regroup flat inputs into the declared inputs (list inputs become lists); None if flat."""
    if not any(t.is_list for t in spec.inputs):
        return None
    sizes = [int(attrs[t.list_len]) if t.is_list else None for t in spec.inputs]

    def pack(values: Sequence) -> list:
        out, i = [], 0
        for size in sizes:
            if size is None:
                out.append(values[i])
                i += 1
            else:
                out.append(list(values[i:i + size]))
                i += size
        return out
    return pack
