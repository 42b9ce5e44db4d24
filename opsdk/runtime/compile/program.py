"""The plan under construction: what each pass of the pipeline reads and rewrites.

A Program starts as (fetches, feeds) over a graph and leaves the pipeline with the nodes to run
in order, their locations, devices and kernels, the folded constants and the partitions. The
user's graph is never changed: a pass that adds a node (a folded constant, a `_send`/`_recv`
pair) creates it for this program only and rewires inputs in `inputs` (control inputs in
`controls`), not on the graph's nodes. Passes may add and remove nodes freely: value slots are
numbered only when a partition is lowered (compile/plan.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from opsdk.runtime.devices import Device
from opsdk.runtime.ir.device_names import DEFAULT_TASK
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.kernels.choice import KernelChoice


@dataclass(frozen=True)
class PlanOptions:
    """The switches of the pipeline (SessionConfig carries them). Optimisations never change
    results, only how much work a step does and where it runs."""

    constant_folding: bool = True
    cse: bool = True
    soft_placement: bool = True  # an op with no kernel for its requested device runs elsewhere
    # Device types tried, in order, for nodes with no device scope (None: every available
    # device that may be chosen automatically, accelerators first, then the host).
    device_preference: Optional[tuple[str, ...]] = None
    disabled: frozenset[str] = frozenset()  # names of passes switched off
    # The task of nodes whose device scope names none (ir/device_names.py, locations).
    default_task: str = DEFAULT_TASK


@dataclass
class Program:
    """See the module docstring. `report` holds, per pass, what it did (for `explain`)."""

    fetches: tuple  # Tensors and Operations, as asked
    feeds: tuple[Tensor, ...]
    options: PlanOptions
    feed_device: Device  # where fed values live
    result_device: Optional[Device]  # where fetched tensors must end up (None: anywhere)
    roots: tuple[Operation, ...] = ()  # nodes to run besides what the fetches need
    # Feeds whose values the caller hands over (a loop's variables, fed to its body): nothing
    # outside the step holds them, so the memory planner may let a step write into them.
    handed: frozenset = frozenset()
    ops: list[Operation] = field(default_factory=list)  # topological order
    inputs: dict[Operation, tuple[Tensor, ...]] = field(default_factory=dict)  # rewired inputs
    controls: dict[Operation, tuple[Operation, ...]] = field(default_factory=dict)  # rewired
    fetched: dict[Tensor, Tensor] = field(default_factory=dict)  # fetch -> tensor holding it
    location: dict[Operation, str] = field(default_factory=dict)  # full task + device name
    device: dict[Operation, Device] = field(default_factory=dict)
    kernel: dict[Operation, KernelChoice] = field(default_factory=dict)
    folded: list[Operation] = field(default_factory=list)  # set by fold_cse (for explain)
    merged: list[Operation] = field(default_factory=list)
    rewritten: list = field(default_factory=list)  # (node, the node standing for it): fold_cse
    partitions: Any = None  # set by the partition pass: location -> compile.partition.Partition
    report: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.feed_set = frozenset(self.feeds)
        self.feed_location = self.location_on(self.feed_device)
        self.result_location = (None if self.result_device is None
                                else self.location_on(self.result_device))

    def location_on(self, device: Device) -> str:
        """The location of `device` in the program's default task."""
        return self.options.default_task + device.name

    def inputs_of(self, op: Operation) -> tuple[Tensor, ...]:
        """The inputs `op` reads in this program (rewired by a pass, else the node's own)."""
        return self.inputs.get(op, op.inputs)

    def controls_of(self, op: Operation) -> tuple[Operation, ...]:
        """The nodes `op` waits for in this program (rewired by a pass, else the node's own)."""
        return self.controls.get(op, op.control_inputs)

    def value_of(self, t: Tensor) -> Tensor:
        """The tensor that holds fetch `t` for the caller (where a pass replaced it)."""
        return self.fetched.get(t, t)

    def device_of(self, t: Tensor) -> Device:
        """Where tensor `t` lives in this program: its producer's device, or the feed device."""
        if t in self.feed_set:
            return self.feed_device
        return self.device[t.op]

    def location_of(self, t: Tensor) -> str:
        """The location of tensor `t`: its producer's, or the feed location."""
        if t in self.feed_set:
            return self.feed_location
        return self.location[t.op]

    def note(self, pass_name: str, line: str) -> None:
        self.report.setdefault(pass_name, []).append(line)
