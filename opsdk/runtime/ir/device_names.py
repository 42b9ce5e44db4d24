"""Device names: `/job:worker/task:1/device:GPU:0`, `/cpu:0`, `cuda`, parsed once into a spec.

A graph records the device string a `with g.device(...)` scope asked for; the placement pass of a
plan turns it into a kernel choice. Nested scopes merge field by field (inner fields win), as in
TensorFlow, so `with device('/job:ps'): with device('/cpu:0'):` means `/job:ps/device:CPU:0`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

from opsdk.registry.errors import OpsdkError

# Device types as users write them -> the kernel device of the registry that serves them.
_TYPE_ALIASES = {"cpu": "CPU", "gpu": "GPU", "cuda": "GPU"}
KERNEL_DEVICE = {"CPU": "cpu", "GPU": "cuda"}

_PART = re.compile(r"^(job|task|replica|device):(.+)$")
_SHORT = re.compile(r"^(cpu|gpu|cuda)(?::(\d+))?$", re.IGNORECASE)


@dataclass(frozen=True)
class DeviceSpec:
    """A parsed device name; any field may be unset (None) and is then filled by placement."""

    job: Optional[str] = None
    task: Optional[int] = None
    device_type: Optional[str] = None  # "CPU" or "GPU"
    index: Optional[int] = None

    @classmethod
    def parse(cls, text: str | None) -> "DeviceSpec":
        """Parse `/job:ps/task:0/cpu:0`, `/device:GPU:1`, `gpu:0`, `cuda` or '' (unset)."""
        spec = cls()
        for part in (p for p in (text or "").strip().split("/") if p):
            # A bare `cpu:0` is short for `device:cpu:0`.
            match = _PART.match(part)
            key, value = match.groups() if match else ("device", part)
            spec = cls._with_field(spec, text, key, value)
        return spec

    @classmethod
    def _with_field(cls, spec: "DeviceSpec", text: str, key: str, value: str) -> "DeviceSpec":
        if key == "job":
            return replace(spec, job=value)
        if key in ("task", "replica") and value.isdigit():
            return replace(spec, task=int(value)) if key == "task" else spec
        short = _SHORT.match(value) if key == "device" else None
        if short:
            return replace(spec, device_type=_TYPE_ALIASES[short.group(1).lower()],
                           index=int(short.group(2)) if short.group(2) else None)
        raise OpsdkError(f"device '{text}': cannot read '{key}:{value}' (write e.g. '/cpu:0', "
                         "'/gpu:0' or '/job:worker/task:1/cpu:0')")

    def merged_into(self, outer: "DeviceSpec") -> "DeviceSpec":
        """This (inner) spec over an outer one: fields set here win."""
        return DeviceSpec(
            job=self.job if self.job is not None else outer.job,
            task=self.task if self.task is not None else outer.task,
            device_type=self.device_type if self.device_type is not None else outer.device_type,
            index=self.index if self.index is not None else outer.index,
        )

    @property
    def kernel_device(self) -> Optional[str]:
        """`cpu` or `cuda`, the registry's name for the device type, or None when unset."""
        return KERNEL_DEVICE.get(self.device_type) if self.device_type else None

    def to_string(self) -> str:
        """The canonical name, e.g. `/job:ps/task:0/device:CPU:0`; '' when nothing is set."""
        parts = []
        if self.job is not None:
            parts.append(f"/job:{self.job}")
        if self.task is not None:
            parts.append(f"/task:{self.task}")
        if self.device_type is not None:
            index = "" if self.index is None else f":{self.index}"
            parts.append(f"/device:{self.device_type}{index}")
        return "".join(parts)


def merge_device(outer: str, inner: str | None) -> str:
    """The canonical device string for `inner` nested in a scope whose device is `outer`."""
    if inner is None:
        return outer
    return DeviceSpec.parse(inner).merged_into(DeviceSpec.parse(outer)).to_string()
