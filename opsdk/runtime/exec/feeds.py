"""Fed values as the arrays a step reads: `check_feed` makes each the placeholder's dtype when
that keeps every value, and refuses it naming the placeholder otherwise (docs/internals.md,
Feeds)."""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Optional

import numpy as np

from opsdk.registry.errors import OpsdkError

from opsdk.runtime.devices import device_of
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.kernels.interop import as_kernel_array

_NP_DTYPES: dict[str, np.dtype] = {}  # dtype name -> NumPy dtype


def _np_dtype(name: str) -> np.dtype:
    dtype = _NP_DTYPES.get(name)
    if dtype is None:
        dtype = _NP_DTYPES.setdefault(name, np.dtype(name))
    return dtype


def check_feed(tensor: Tensor, value: Any, keep_on: Any = None) -> np.ndarray:
    """`value` as an array of the tensor's dtype; a contradiction of its static shape, a
    cross-kind dtype (float into int) or a value the dtype cannot hold (2**40 into int32, a
    finite float64 that overflows float32) is an error naming the tensor. Big-endian arrays are
    converted to the native byte order (exact). An array of device `keep_on` of the tensor's
    dtype stays there, its shape checked (the plan reads it only on that device); any other
    device array is copied to the host."""
    if keep_on is not None and type(value) is not np.ndarray and keep_on.owns(value) and \
            getattr(value, "dtype", None) == _np_dtype(tensor.dtype):
        _check_shape(tensor, value)
        return value
    try:
        array = value if type(value) is np.ndarray else _host_array(value)
    except OpsdkError as exc:
        raise OpsdkError(f"feed for '{tensor.name}': {exc}") from None
    # `is` first: NumPy's dtypes are singletons, and `.name` costs microseconds.
    if array.dtype is not _np_dtype(tensor.dtype) and (
            array.dtype.name != tensor.dtype or not array.dtype.isnative):
        if not np.can_cast(array.dtype, tensor.dtype, "same_kind"):
            raise OpsdkError(f"feed for '{tensor.name}' has dtype {array.dtype.name}, which does not "
                             f"convert to the tensor's {tensor.dtype}")
        # Only a narrowing cast can lose a value: the source's extremes decide it (two
        # reductions, no temporary), and only a value beyond them is looked for.
        bounds = _narrowing(array.dtype, tensor.dtype)
        if bounds is not None and array.size and (
                np.minimum.reduce(array, axis=None) < bounds[0]
                or np.maximum.reduce(array, axis=None) > bounds[1]):
            lost = _first_lost(array, np.dtype(tensor.dtype))
            if lost is not None:
                raise OpsdkError(f"feed for '{tensor.name}' holds values that {tensor.dtype} "
                                 f"cannot represent (e.g. {lost}); feed values in the range of "
                                 f"{tensor.dtype}, or make the placeholder wider")
        array = array.astype(tensor.dtype)
    _check_shape(tensor, array)
    return array


def _check_shape(tensor: Tensor, array: Any) -> None:
    shape = tensor.shape
    if shape is not None and (array.ndim != len(shape) or any(
            d is not None and d != s for d, s in zip(shape, array.shape))):
        want = "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
        raise OpsdkError(f"feed for '{tensor.name}' has shape {list(array.shape)} but the tensor's "
                         f"shape is {want}")


def feed_checker(tensor: Tensor, keep_on: Any = None) -> Callable[[Any], Any]:
    """`check_feed` for one tensor, specialised once: a NumPy array of the tensor's exact dtype
    whose shape matches the static one passes with a type, dtype and shape comparison; anything
    else takes `check_feed` itself, so every conversion and error is the same."""
    if keep_on is not None:
        return lambda value: check_feed(tensor, value, keep_on)
    dtype, shape = _np_dtype(tensor.dtype), tensor.shape
    ndarray = np.ndarray
    known = () if shape is None else tuple(i for i, d in enumerate(shape) if d is not None)
    if shape is not None and known:
        dims = itemgetter(*known)  # one index gives a bare int, several a tuple
        want = dims(shape)
        ndim = len(shape)

        def check(value: Any) -> Any:
            if (type(value) is ndarray and value.dtype is dtype and value.ndim == ndim
                    and dims(value.shape) == want):
                return value
            return check_feed(tensor, value)
        return check
    ndim = None if shape is None else len(shape)

    def check_rank(value: Any) -> Any:
        if type(value) is ndarray and value.dtype is dtype and (ndim is None or value.ndim == ndim):
            return value
        return check_feed(tensor, value)
    return check_rank


_NARROWING: dict[tuple, Optional[tuple[Any, Any]]] = {}


def _narrowing(source: np.dtype, target: str) -> Optional[tuple[Any, Any]]:
    """(lowest, highest) value `target` holds when casting `source` to it may lose a value (a
    narrowing cast between numbers), else None; remembered per pair of dtypes."""
    key = (source, target)
    if key not in _NARROWING:
        dtype = np.dtype(target)
        bounds = None
        if (source.kind in "iuf" and dtype.kind in "iuf"
                and not np.can_cast(source, dtype, "safe")):
            # floats: a finite value beyond max overflows; ints: Python ints, compared with
            # the source's extremes exactly (NumPy compares an integer with them exactly)
            bounds = ((-float(np.finfo(dtype).max), float(np.finfo(dtype).max))
                      if dtype.kind == "f" else (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)))
        _NARROWING[key] = bounds
    return _NARROWING[key]


def _first_lost(array: np.ndarray, dtype: np.dtype) -> Any:
    """The first value of `array` that casting to `dtype` would not keep (a finite float that
    overflows to infinity, an int out of range), or None when every value fits."""
    if dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):
            lost = np.isfinite(array) & ~np.isfinite(array.astype(dtype))
    elif dtype.kind in "iu" and array.dtype.kind in "iu":
        info = np.iinfo(dtype)
        lost = (array < info.min) | (array > info.max)
    else:
        return None
    flat = lost.reshape(-1)
    return array.reshape(-1)[int(np.argmax(flat))].item() if flat.any() else None


def _host_array(value: Any) -> np.ndarray:
    """A fed value as a NumPy array: a device array (CuPy's, the test device's) is copied to the
    host, and a `_recv` moves it on to the devices that read it; another framework's host
    array (torch, JAX: DLPack) is viewed without a copy, a torch tensor that requires grad
    included (a feed is read, never differentiated through)."""
    device = device_of(value)
    if not device.is_host:
        return device.to_host(value)
    try:
        return np.asarray(as_kernel_array(value))
    except (ValueError, TypeError, RuntimeError, BufferError) as exc:
        # a ragged list, an object NumPy cannot read, a framework's refusal to export
        raise OpsdkError(f"the fed value is not an array: {exc}") from None
