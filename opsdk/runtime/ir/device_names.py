"""Device names: `/job:worker/task:1/device:GPU:0`, `/cpu:0`, `cuda`, parsed once into a spec.

A graph records the device string a `with g.device(...)` scope asked for; the placement pass turns
it into a device object (`opsdk.runtime.devices`). The IR knows no device types: a type is any
name (`CPU`, `GPU`, `TEST`, ...), upper-cased, and `cuda` is spelled `GPU` as in TensorFlow; which
types exist is the devices registry's business. Nested scopes merge field by field (inner fields
win), so `with device('/job:ps'): with device('/cpu:0'):` means `/job:ps/device:CPU:0`.

A *location* is where a node runs: a task and a device with every field set,
`/job:worker/replica:0/task:1/device:CPU:0`. Placement fills the fields a scope left unset from the
session's default task (`/job:localhost/replica:0/task:0`) and the device it chose; the partition
pass splits a program by location.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

from opsdk.registry.errors import OpsdkError

# Spellings of a type that name another: TensorFlow's `gpu` is opsdk's cuda device.
_TYPE_ALIASES = {"CUDA": "GPU"}
# The device types that exist, filled by `opsdk.runtime.devices` as it registers each one, so a
# scope naming no known type fails where it is written.
KNOWN_TYPES: set[str] = set()


def register_device_type(name: str) -> None:
    """Make `name` (upper case, e.g. 'GPU') a device type scopes may name."""
    KNOWN_TYPES.add(name.upper())

_PART = re.compile(r"^(job|task|replica|device):(.+)$")
_SHORT = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)(?::(\d+))?$")


@dataclass(frozen=True)
class DeviceSpec:
    """A parsed device name; any field may be unset (None) and is then filled by placement."""

    job: Optional[str] = None
    replica: Optional[int] = None
    task: Optional[int] = None
    device_type: Optional[str] = None  # "CPU", "GPU", "TEST", ...
    index: Optional[int] = None

    @classmethod
    def parse(cls, text: str | None) -> "DeviceSpec":
        """Parse `/job:ps/task:0/cpu:0`, `/device:GPU:1`, `gpu:0`, `cuda` or '' (unset)."""
        spec = cls()
        for part in (p for p in (text or "").strip().split("/") if p):
            # A bare `cpu:0` is short for `device:cpu:0`.
            match = _PART.match(part)
            key, value = match.groups() if match else ("device", part)
            spec = cls._with_field(spec, text or "", key, value)
        return spec

    @classmethod
    def _with_field(cls, spec: "DeviceSpec", text: str, key: str, value: str) -> "DeviceSpec":
        if key == "job":
            return replace(spec, job=value)
        if key in ("task", "replica") and value.isdigit():
            return replace(spec, **{key: int(value)})
        short = _SHORT.match(value) if key == "device" else None
        if short:
            kind = short.group(1).upper()
            kind = _TYPE_ALIASES.get(kind, kind)
            if KNOWN_TYPES and kind not in KNOWN_TYPES:
                short = None
        if short:
            return replace(spec, device_type=kind,
                           index=int(short.group(2)) if short.group(2) else None)
        known = ", ".join(sorted(KNOWN_TYPES)) or "CPU, GPU"
        raise OpsdkError(f"device '{text}': cannot read '{key}:{value}' (device types: {known}; "
                         "write e.g. '/cpu:0', '/gpu:0' or '/job:worker/task:1/cpu:0')")

    def merged_into(self, outer: "DeviceSpec") -> "DeviceSpec":
        """This (inner) spec over an outer one: fields set here win."""
        return DeviceSpec(
            job=self.job if self.job is not None else outer.job,
            replica=self.replica if self.replica is not None else outer.replica,
            task=self.task if self.task is not None else outer.task,
            device_type=self.device_type if self.device_type is not None else outer.device_type,
            index=self.index if self.index is not None else outer.index,
        )

    def to_string(self) -> str:
        """The canonical name, e.g. `/job:ps/task:0/device:CPU:0`; '' when nothing is set."""
        parts = []
        if self.job is not None:
            parts.append(f"/job:{self.job}")
        if self.replica is not None:
            parts.append(f"/replica:{self.replica}")
        if self.task is not None:
            parts.append(f"/task:{self.task}")
        if self.device_type is not None:
            index = "" if self.index is None else f":{self.index}"
            parts.append(f"/device:{self.device_type}{index}")
        return "".join(parts)


    def task_name(self) -> str:
        """The task part alone, e.g. `/job:ps/replica:0/task:0` ('' when no field of it is set)."""
        return DeviceSpec(self.job, self.replica, self.task).to_string()


DEFAULT_TASK = "/job:localhost/replica:0/task:0"


def task_spec(text: str) -> DeviceSpec:
    """A task name with every field set (`/job:ps/replica:0/task:1`); a device part is refused."""
    spec = DeviceSpec.parse(text)
    if spec.device_type is not None or spec.index is not None:
        raise OpsdkError(f"task '{text}': a task names a job, replica and task, not a device")
    if spec.job is None or spec.replica is None or spec.task is None:
        raise OpsdkError(f"task '{text}': write every field, e.g. '{DEFAULT_TASK}'")
    return spec


def location(requested: str | DeviceSpec, default_task: str, device_name: str) -> str:
    """The full location of a node: the task fields of its request (a scope's device string),
    unset ones from `default_task`, and the device it was placed on (`/device:CPU:0`)."""
    spec = requested if isinstance(requested, DeviceSpec) else DeviceSpec.parse(requested)
    task = DeviceSpec(spec.job, spec.replica, spec.task).merged_into(DeviceSpec.parse(default_task))
    if task.job is not None and task.replica is None:
        task = replace(task, replica=0)
    if task.job is not None and task.task is None:
        task = replace(task, task=0)
    return task.to_string() + device_name


def task_of(location_name: str) -> str:
    """The task part of a location: `/job:ps/replica:0/task:0/device:CPU:0` -> `/job:ps/replica:0/task:0`."""
    return DeviceSpec.parse(location_name).task_name()


def device_part(location_name: str) -> str:
    """The device part of a location: `/job:ps/replica:0/task:0/device:CPU:0` -> `/device:CPU:0`."""
    spec = DeviceSpec.parse(location_name)
    return DeviceSpec(device_type=spec.device_type, index=spec.index).to_string()


def merge_device(outer: str, inner: str | None) -> str:
    """The canonical device string for `inner` nested in a scope whose device is `outer`."""
    if inner is None:
        return outer
    return DeviceSpec.parse(inner).merged_into(DeviceSpec.parse(outer)).to_string()
