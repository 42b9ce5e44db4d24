"""Devices as objects, one module per device type, found by name.

    get_device("/gpu:0")        # the CudaDevice with index 0 (available or not)
    host()                      # the CPU device, where feeds arrive and fetches are returned

Adding a device type: a module with a `Device` subclass, and one `register(...)` line below.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

import numpy as np

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.devices.base import Device
from opsdk.runtime.devices.cpu import CpuDevice
from opsdk.runtime.devices.cuda import CudaDevice
from opsdk.runtime.devices.testing import TestDevice
from opsdk.runtime.ir.device_names import DeviceSpec, register_device_type

__all__ = ["Device", "DEVICE_TYPES", "get_device", "host", "register", "to_host", "device_of"]

DEVICE_TYPES: dict[str, type[Device]] = {}
_instances: dict[tuple[str, int], Device] = {}
_lock = threading.Lock()


def register(device_type: type[Device]) -> type[Device]:
    """Make a device type known by its `type_name` (device scopes may then name it)."""
    DEVICE_TYPES[device_type.type_name] = device_type
    register_device_type(device_type.type_name)
    return device_type


register(CpuDevice)
register(CudaDevice)
register(TestDevice)


def get_device(name: str | DeviceSpec, index: Optional[int] = None) -> Device:
    """The device a name (`/gpu:0`, `/device:CPU:0`, `cuda`, ...) or a parsed spec stands for;
    an unset type means the host. One object per (type, index) in the process."""
    spec = name if isinstance(name, DeviceSpec) else DeviceSpec.parse(name)
    kind = spec.device_type or "CPU"
    number = index if index is not None else (spec.index or 0)
    device_type = DEVICE_TYPES.get(kind)
    if device_type is None:
        raise OpsdkError(f"unknown device type '{kind}' (known: {', '.join(sorted(DEVICE_TYPES))})")
    key = (kind, number)
    device = _instances.get(key)
    if device is None:
        with _lock:
            device = _instances.setdefault(key, device_type(number))
    return device


def host() -> Device:
    """The CPU device: where feeds arrive and fetches are returned."""
    return get_device("/device:CPU:0")


def device_of(value: Any) -> Device:
    """The device whose array `value` is (the host for NumPy arrays and Python values)."""
    for (kind, index), device in list(_instances.items()):
        if not device.is_host and device.owns(value):
            return device
    if hasattr(value, "__cuda_array_interface__"):
        return get_device("/device:GPU:0")
    return host()


def to_host(value: Any) -> np.ndarray:
    """`value` as a NumPy array, copied from whichever device holds it."""
    if isinstance(value, np.ndarray):
        return value
    return device_of(value).to_host(value)
