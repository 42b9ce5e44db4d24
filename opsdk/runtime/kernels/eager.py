"""Eager calls: validate an op call on arrays and run its kernel now, on a device.

`device` names where the call runs: None (the host, or the GPU when an input is a GPU array),
"python" or "cpu" (the host with that kernel kind forced), "cuda", or any device name
(`/gpu:0`, `/test:0`). Inputs are moved onto that device; results stay on it (NumPy arrays on
the host, CuPy arrays on a GPU). Both modes of `apply_op` validate through the registry
(`normalize_attrs`, `infer_outputs`), and errors carry the op's name, once (`ir.context`).
"""

from __future__ import annotations

import math
import sys
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from opsdk.registry.errors import OpError, OpsdkError
from opsdk.registry.spec import ABSENT, OpSpec
from opsdk.runtime.devices import Device, get_device, host
from opsdk.runtime.ir.context import in_context
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.kernels.buffers import (LEND_FROM, BufferPool, default_pool_bytes, owns_memory,
                                           pooling_problem)
from opsdk.runtime.kernels.call_cache import EAGER_CALLS, EagerCall, eager_key
from opsdk.runtime.kernels.choice import bind_kernel, choose_kernel, group_outputs
from opsdk.runtime.kernels.interop import as_kernel_array, is_foreign_array

_refs = sys.getrefcount

# Eager `device=` spellings that force a kernel kind on the host.
_HOST_KINDS = {"python": "python", "cpu": "cpu"}


def eager_device(device: Optional[str], values: Sequence[Any]) -> tuple[Device, Optional[str]]:
    """(the device an eager call runs on, the kernel kind it forces or None)."""
    if device is None:
        on_gpu = any(hasattr(v, "__cuda_array_interface__") for v in values)
        return (get_device("/device:GPU:0") if on_gpu else host()), None
    if device in _HOST_KINDS:
        return host(), _HOST_KINDS[device]
    return get_device(device), None


def run_eager(spec: OpSpec, inputs: Sequence[Any], attrs: Mapping[str, Any],
              device: Optional[str] = None) -> Any:
    """Run the op now on arrays; see the module docstring."""
    return run_eager_keyed(spec, inputs, attrs, device, eager_key(spec, inputs, attrs, device))


def run_eager_keyed(spec: OpSpec, inputs: Sequence[Any], attrs: Mapping[str, Any],
                    device: Optional[str], key: Optional[tuple]) -> Any:
    """`run_eager` with the call's cache key (None: not cacheable): a hit skips straight to the
    kernel; a miss runs the full path and, when it succeeds, stores what it resolved."""
    if key is not None:
        entry = EAGER_CALLS.data.get(key)
        if entry is not None and entry.spec is spec:
            return _run_cached(entry, inputs)
    refuse_graph_values(spec, inputs, "an eager call")
    where, kind = eager_device(device, flat_values(spec, inputs))
    why = where.unavailable()
    if why is not None:
        raise OpsdkError(f"{spec.name}: device='{device}' {why}")
    wanted = scalar_dtypes(spec, inputs)
    grouped = [None if value is None  # absent: the kernel gets None (the registry refuses it if required)
               else [_on(where, spec, tspec, v, d) for v in value] if tspec.is_list
               else _on(where, spec, tspec, value, d)
               for tspec, value, d in zip(spec.inputs, inputs, wanted)]
    attrs, type_attrs = normalize(spec, inputs, attrs, spec.name)
    shapes = [ABSENT if g is None else [a.shape for a in g] if isinstance(g, list) else g.shape
              for g in grouped]
    dtypes = [ABSENT if g is None else [a.dtype.name for a in g] if isinstance(g, list)
              else g.dtype.name for g in grouped]
    outputs = infer(spec, shapes, dtypes, attrs, type_attrs, spec.name)
    choice = choose_kernel(spec, where, kind)
    # A big-endian input is converted by `_on`; the cached path passes inputs as they are.
    cacheable = key is not None and where.is_host and all(v.dtype.isnative for v in inputs)
    entry = EagerCall(spec, device, kind, attrs, type_attrs, choice) if cacheable else None
    bound = bind_kernel(spec, choice, attrs, type_attrs) if entry is None else entry.call
    flat = [a for g in grouped for a in (g if isinstance(g, list) else [g])]
    try:
        flat_out = [_result(where, o) for o in bound(flat)]
    except Exception as exc:  # any kernel failure becomes one error naming the op
        raise in_context(spec.name, exc) from exc
    if entry is not None:  # only a call that succeeded is remembered
        entry.outputs.put(tuple(shapes), outputs)
        EAGER_CALLS.put(key, entry)
    # A list output stays a list of arrays (one per element), as docs/internals.md says.
    values = group_outputs(spec, flat_out, attrs)
    return values[0] if len(values) == 1 else tuple(values)


def refuse_graph_values(spec: OpSpec, inputs: Sequence[Any], what: str) -> None:
    """Eager calls take arrays: a Variable or graph Tensor has a value only inside a Session."""
    for tspec, value in zip(spec.inputs, inputs):
        items = value if tspec.is_list and isinstance(value, (list, tuple)) else [value]
        for item in items:
            if hasattr(item, "_as_graph_element") or isinstance(item, Tensor):
                kind = "graph Tensor" if isinstance(item, Tensor) else "Variable"
                raise OpsdkError(
                    f"{spec.name}: input '{tspec.name}' is the {kind} '{item.name}', whose value "
                    f"exists only while a Session runs; {what} takes arrays: build the op in a "
                    f"graph and run it with Session.run, or pass the value "
                    f"(sess.run({item.name!r}))")


def _run_cached(entry: EagerCall, inputs: Sequence[Any]) -> Any:
    """An eager call whose op, device, dtypes and attrs were resolved before (all inputs NumPy
    arrays, none a list): check shapes unless this signature passed before, run the kernel."""
    spec = entry.spec
    shapes = tuple([value.shape for value in inputs])
    if shapes not in entry.outputs.data:  # the same check, and error, as the full path
        dtypes = [value.dtype.name for value in inputs]
        entry.outputs.put(shapes, infer(spec, list(shapes), dtypes, entry.attrs,
                                        entry.type_attrs, spec.name))
    call = entry.kernel()
    if entry.single:
        key = entry.lend_keys.data.get(shapes, _UNKNOWN)
        if key is _UNKNOWN:
            key = _lend_key(entry.outputs.data[shapes][0])
            entry.lend_keys.put(shapes, key)
        if key is not None:
            pool = eager_buffers()
            if pool is not None and entry.into() is not None:
                return _lent_call(entry, pool, key, inputs)
    try:
        out = call(inputs)
    except Exception as exc:  # any kernel failure becomes one error naming the op
        raise in_context(spec.name, exc) from exc
    if entry.single:
        return np.asarray(out[0])
    values = group_outputs(spec, [np.asarray(o) for o in out], entry.attrs)
    return values[0] if len(values) == 1 else tuple(values)


# -- Lent outputs --------------------------------------------------------------------------------
#
# A repeated eager call with a large output faulted in fresh pages for it on every call: its
# array went back to the system when the caller dropped it (glibc maps blocks of 32 MiB and more
# afresh; pairwise_manhattan's 64 MiB output at n=m=4096 spent 10-13 ms of each 85 ms call in
# the kernel, there). So, as Session.run does with its fetches (docs/internals.md, Lent
# fetches), a cached call of a single-output op on the host whose kernel writes into given
# outputs lends a result of LEND_FROM bytes or more from a process-wide pool, and a later call
# of the same output shape and dtype writes into it once the caller has dropped it and every
# view of it.

_eager_pool: dict = {}
_UNKNOWN = object()


def eager_buffers() -> Optional[BufferPool]:
    """The process's pool for eager calls' outputs (bounded as a session's by
    OPSDK_BUFFER_POOL_BYTES, read on first use; 0: none, results own their memory)."""
    try:
        return _eager_pool["pool"]
    except KeyError:
        size = default_pool_bytes()
        made = BufferPool(size) if size and pooling_problem() is None else None
        return _eager_pool.setdefault("pool", made)


def _lend_key(output: tuple) -> Optional[tuple]:
    """The pool key of an inferred (shape, dtype) output worth lending, else None."""
    shape, dtype = output
    if shape is None or any(type(d) is not int for d in shape):
        return None
    dtype = np.dtype(dtype)
    if dtype.itemsize * math.prod(shape) < LEND_FROM:
        return None
    return (host().name, dtype, tuple(shape))


def _lent_call(entry: EagerCall, pool: BufferPool, key: tuple, inputs: Sequence[Any]) -> Any:
    """Run the cached call into a buffer from `pool` where it has one of `key` (else the
    kernel allocates), and lend the result when only this call holds it."""
    buf = pool.take(key)
    try:
        out = entry.into()(inputs, () if buf is None else (buf,))
    except Exception as exc:  # any kernel failure becomes one error naming the op
        raise in_context(entry.spec.name, exc) from exc
    del buf
    if (type(out) is np.ndarray and _refs(out) == 2  # `out` and the argument: no input, no view
            and out.dtype == key[1] and out.shape == key[2] and out.flags.writeable
            and out.flags.c_contiguous and owns_memory(out)):
        return pool.lend(key, out)
    return np.asarray(out)


def _result(device: Device, value: Any) -> Any:
    """A kernel's output as an array of the device it ran on (python kernels may return host
    values, e.g. a Python scalar, where the device's array module gave none)."""
    if device.is_host:
        return np.asarray(value)
    return value if device.owns(value) else device.from_host(np.asarray(value))


def flat_values(spec: OpSpec, inputs: Sequence[Any]) -> list:
    """The call's input values with list inputs spread out."""
    return [v for tspec, value in zip(spec.inputs, inputs)
            for v in (value if tspec.is_list and isinstance(value, (list, tuple)) else [value])]


def _on(device: Device, spec: OpSpec, tspec: Any, value: Any, dtype: Optional[str]) -> Any:
    """An input value as an array of `device` (Python values converted, host arrays copied)."""
    on_gpu = hasattr(value, "__cuda_array_interface__")
    if on_gpu and device.is_host:
        raise OpsdkError(f"{spec.name}: input '{tspec.name}' is a GPU array; call with "
                         "device='cuda', or copy it to the host first (x.get() for CuPy)")
    if device.owns(value) and not isinstance(value, np.generic) and getattr(
            getattr(value, "dtype", None), "isnative", True):
        return value
    array = input_array(spec.name, tspec.name, value, dtype)
    return array if device.is_host else device.from_host(array)


def input_array(who: str, name: str, value: Any, dtype: Optional[str]) -> np.ndarray:
    """A value given for an input as an array, the one casting rule of eager calls and graph
    constants alike: NumPy arrays and scalars keep their dtype (the registry then checks it);
    Python numbers and lists take `dtype` (another input's, so `x * 2` keeps x's dtype) when
    that represents them: an overflow to infinity or out of an int's range is an error.
    A big-endian array becomes its native-order copy (exact; kernels take native order)."""
    value = as_kernel_array(value)  # torch, JAX, ...: by DLPack (a tensor requiring grad too)
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))
    try:
        exact = np.asarray(value)
    except (ValueError, TypeError) as exc:  # a ragged list, an object NumPy cannot read
        raise OpError(f"{who}: input '{name}' is not an array: {exc}") from None
    if dtype is None:
        return exact
    with np.errstate(over="ignore", invalid="ignore"):
        array = np.asarray(value, dtype=dtype) if exact.dtype != object else exact
    if exact.dtype.kind in "biuf" and array.dtype.kind in "biuf" and exact.size:
        lost = (np.isfinite(exact) & ~np.isfinite(array)) if array.dtype.kind == "f" else (
            array.astype(exact.dtype) != exact)
        if np.any(lost):
            raise OpError(f"{who}: input '{name}' is {value!r}, which {dtype} cannot represent "
                          f"(the input's dtype comes from the other inputs of its type attr)")
    return array


def scalar_dtypes(spec: OpSpec, values: Sequence[Any]) -> list[Optional[str]]:
    """The dtype a Python number or list given for each input should take: that of another input
    sharing its type attr (so `add(x_float32, 2)` stays float32); None leaves NumPy's choice."""
    bound: dict[str, str] = {}
    for tspec, value in zip(spec.inputs, values):
        first = value[0] if tspec.is_list and value else value
        if is_foreign_array(first):
            first = as_kernel_array(first)
        if isinstance(first, (Tensor, np.ndarray, np.generic)) or hasattr(first, "dtype"):
            bound.setdefault(tspec.dtype, np.dtype(first.dtype).name)
    return [bound.get(t.dtype) for t in spec.inputs]


def normalize(spec: OpSpec, inputs: Sequence[Any], attrs: Mapping[str, Any], who: str
              ) -> tuple[dict, dict[str, str]]:
    """The call's attrs checked and completed by the registry, split into scalar attrs and the
    values of unbound type attrs (`{"DstT": "float32"}`); errors name `who`."""
    from opsdk.registry import normalize_attrs
    try:
        attrs = normalize_attrs(spec, attrs, inputs)
    except OpError as exc:
        raise in_context(who, exc) from None
    type_attrs: dict[str, str] = {}
    for ta in spec.unbound_type_attrs:
        if ta.name not in attrs:
            raise OpError(f"{who}: type attr '{ta.name}' must be given "
                          f"(one of {', '.join(ta.allowed)})")
        type_attrs[ta.name] = attrs.pop(ta.name)
    return attrs, type_attrs


def infer(spec: OpSpec, shapes: list, dtypes: list, attrs: dict, type_attrs: dict,
          who: str) -> list:
    """The registry's output (shape, dtype) pairs; errors name `who`."""
    from opsdk.registry import infer_outputs
    try:
        return infer_outputs(spec, shapes, dtypes, {**attrs, **type_attrs})
    except OpError as exc:
        raise in_context(who, exc) from None
