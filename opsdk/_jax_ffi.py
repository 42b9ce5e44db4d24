"""opsdk.jax's FFI path: a declared op's compiled cpu kernel called by XLA, no Python per call.

`opsdk build` links a handler library per op with a compiled cpu kernel (opsdk/build/jax_ffi.py,
generated/cpp/<op>_jax_ffi.cc) when jaxlib is installed. `target(spec)` registers that library's
handler with `jax.ffi.register_ffi_target` once and names it; `call(...)` emits the
`jax.ffi.ffi_call`, passing what the pybind11 glue would bind at run time but which is static
under jit: the dims, the leading `...` dims, the dtype codes and the attrs. Ops without a handler
(python kernels, list tensors, shape functions, no jaxlib headers at build time) use
`jax.pure_callback` (opsdk.jax).
"""

from __future__ import annotations

import ctypes
import functools
import json
from pathlib import Path
from typing import Any, Optional

import jax
import numpy as np

from opsdk.registry.dtypes import DTYPE_NAMES
from opsdk.registry.manifest import file_sha256
from opsdk.registry.spec import OpSpec

_libraries: list[Any] = []  # loaded handler libraries stay loaded: XLA holds their functions


def target(spec: OpSpec) -> Optional[str]:
    """The registered FFI target of the op's built handler, or None (then: pure_callback)."""
    if jax.default_backend() != "cpu":
        return None
    build = Path(spec.workspace) / "build"
    try:  # a rebuild (new manifests) is seen by the next trace, as the cpu kernel's loader sees it
        stamps = tuple((build / device / spec.name / "manifest.json").stat().st_mtime_ns
                       for device in ("cpu", "jax_ffi"))
    except OSError:
        return None
    return _registered(spec.workspace, spec.name, stamps)


@functools.lru_cache(maxsize=None)
def _registered(workspace: str, op: str, stamps: tuple = ()) -> Optional[str]:
    folder = Path(workspace) / "build" / "jax_ffi" / op
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        cpu = json.loads((Path(workspace) / "build" / "cpu" / op / "manifest.json").read_text())
        library = folder / Path(str(manifest["file"])).name
        if manifest.get("cpu_key") != cpu.get("key") or file_sha256(library) != manifest["sha256"]:
            return None  # built against another cpu kernel than the current one, or damaged
        handle = ctypes.CDLL(str(library))
        function = getattr(handle, str(manifest["symbol"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    name = f"opsdk_{op}_{manifest['sha256'][:12]}"
    jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(function), platform="cpu")
    _libraries.append(handle)
    return name


def call(spec: OpSpec, name: str, inputs: list, shapes: list, sizes: dict, types: dict,
         attrs: dict, results: tuple) -> Optional[tuple]:
    """The op's outputs through its handler; None when a dim is not known statically."""
    dims = [sizes.get(d) for d in spec.dim_names]
    if any(d is None for d in dims):
        return None
    batch: list[int] = []
    for tensor, shape in zip(spec.inputs, shapes):
        if tensor.has_ellipsis:
            batch = list(shape[:len(shape) - (len(tensor.shape) - 1)])
            break
    given = {"dims": np.asarray(dims, np.int64), "batch": np.asarray(batch, np.int64),
             "codes": np.asarray([DTYPE_NAMES.index(types[ta.name]) for ta in spec.type_attrs],
                                 np.int64)}
    for attr in spec.attrs:
        given[attr.name] = _attr_value(attr.type, attrs.get(attr.name, attr.default))
    # vmap: XLA loops over the batch calling the kernel (no Python); the dims passed are those
    # of one element, so the kernel never sees the batch.
    out = jax.ffi.ffi_call(name, results, vmap_method="sequential")(*inputs, **given)
    return tuple(out)


def _attr_value(kind: str, value: Any) -> Any:
    """An attr as the FFI attribute the generated handler reads (bools as int64 0/1)."""
    if kind in ("int", "bool"):
        return np.int64(int(value))
    if kind == "float":
        return np.float64(value)
    if kind == "list(int)":
        return np.asarray(list(value), np.int64)
    if kind == "list(float)":
        return np.asarray(list(value), np.float64)
    return str(value)

