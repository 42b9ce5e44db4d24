"""A test device: a second, separate device on any machine, so placement, copies and soft
placement are tested without a GPU (`/test:0`, `/device:TEST:0`).

Its arrays are `TestArray`s: NumPy arrays behind a wrapper that host code cannot read. NumPy
refuses them (`__array__` raises, `__array_ufunc__ = None`), and its array module `TEST_XP`
refuses host arrays, so a value that crosses between the host and this device without the copy
the runtime must insert fails loudly instead of working by accident. Copies to and from it are
counted on the device object. It runs python kernels only (like a GPU running array-API code),
so ops with only built kernels fall back to the host under soft placement.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.devices.base import Device


class TestArray:
    """An array of the test device."""

    __slots__ = ("data",)
    __array_ufunc__ = None  # NumPy ufuncs refuse it: host code must not compute on it
    __test__ = False  # not a pytest test class

    def __init__(self, data: np.ndarray):
        self.data = data

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError("a test-device array reached host code without a copy to the host")

    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)
    T = property(lambda self: TestArray(self.data.T))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # __array_interface__ and the like would let NumPy read it
            raise AttributeError(name)
        return _wrap(getattr(self.data, name))

    def __getitem__(self, key: Any) -> Any:
        return _wrap(self.data[_unwrap(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        self.data[_unwrap(key)] = _unwrap(value)

    def __len__(self) -> int:
        return len(self.data)

    def __float__(self) -> float:
        return float(self.data)

    def __int__(self) -> int:
        return int(self.data)

    def __bool__(self) -> bool:
        return bool(self.data)

    def __repr__(self) -> str:
        return f"TestArray({self.data!r})"


def _binary(op: Callable) -> Callable:
    return lambda self, other: _wrap(op(self.data, _unwrap(other)))


def _reflected(op: Callable) -> Callable:
    return lambda self, other: _wrap(op(_unwrap(other), self.data))


for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv),
                   ("mod", operator.mod), ("pow", operator.pow), ("matmul", operator.matmul),
                   ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor)):
    setattr(TestArray, f"__{_name}__", _binary(_op))
    setattr(TestArray, f"__r{_name}__", _reflected(_op))
for _name, _op in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt),
                   ("ge", operator.ge), ("eq", operator.eq), ("ne", operator.ne)):
    setattr(TestArray, f"__{_name}__", _binary(_op))
for _name, _op in (("neg", operator.neg), ("pos", operator.pos), ("abs", operator.abs),
                   ("invert", operator.invert)):
    setattr(TestArray, f"__{_name}__", lambda self, _op=_op: _wrap(_op(self.data)))
TestArray.__hash__ = None  # type: ignore[assignment]  # arrays are not hashable


def _wrap(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return TestArray(value)
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    if callable(value) and not isinstance(value, type):
        return _wrapped_function(value)
    return value


def _unwrap(value: Any) -> Any:
    if isinstance(value, TestArray):
        return value.data
    if isinstance(value, np.ndarray):
        raise OpsdkError("a host (NumPy) array reached the test device without a copy")
    if isinstance(value, tuple):
        return tuple(_unwrap(v) for v in value)
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


def _wrapped_function(fn: Callable) -> Callable:
    def call(*args: Any, **kwargs: Any) -> Any:
        result = fn(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()})
        return _wrap(result)
    return call


class _WrappedUfunc:
    """A NumPy ufunc over TestArrays, with its methods (`reduce`, `accumulate`, ...)."""

    def __init__(self, ufunc: np.ufunc):
        self._ufunc = ufunc
        self._call = _wrapped_function(ufunc)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return _wrap(getattr(self._ufunc, name))


class _TestXP:
    """NumPy's namespace over TestArrays: what a python kernel gets as `xp` on this device.
    (Not NumPy: kernels that take NumPy-only fast paths, checked by `xp.__name__`, skip them.)"""

    __name__ = "opsdk.runtime.devices.testing.TEST_XP"

    def __getattr__(self, name: str) -> Any:
        value = getattr(np, name)
        if isinstance(value, np.ufunc):
            return _WrappedUfunc(value)
        if isinstance(value, type) or not callable(value):
            return value  # dtypes, constants and scalar types are shared with the host
        if name == "asarray" or name == "array":
            return _asarray
        return _wrapped_function(value)

    @staticmethod
    def asnumpy(value: Any) -> np.ndarray:
        """A host copy of a test array (CuPy's `cupy.asnumpy`): how a kernel reads a small input
        on the host, such as a shape."""
        return np.array(_unwrap(value))


def _asarray(value: Any, *args: Any, **kwargs: Any) -> TestArray:
    # Building an array from Python values or a test array is fine; from a host array it is not.
    return TestArray(np.asarray(_unwrap(value), *args, **kwargs))


TEST_XP = _TestXP()


class TestDevice(Device):
    """The test device; see the module docstring."""

    __test__ = False
    type_name = "TEST"
    kernel_kinds = ("python",)
    auto = False  # never chosen without a device scope (or a session that prefers it)

    @property
    def xp(self) -> Any:
        return TEST_XP

    def owns(self, value: Any) -> bool:
        return isinstance(value, TestArray)

    def from_host(self, array: np.ndarray) -> TestArray:
        return TestArray(np.array(array, copy=True))

    def to_host(self, value: Any) -> np.ndarray:
        if not isinstance(value, TestArray):
            raise OpsdkError(f"{self.name}: a {type(value).__name__} is not a test-device array")
        return np.array(value.data, copy=True)
