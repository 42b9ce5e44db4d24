"""The plan under construction: what each pass of the pipeline reads and rewrites.

A Program starts as (fetches, feeds) over a graph and leaves the pipeline with the nodes to run
in order, their devices and kernels, the copies between devices, the folded constants and the
partitions. The user's graph is never changed: a pass that adds a node (a copy) creates it for
this program only and rewires inputs in `inputs`, not on the graph's nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from opsdk.runtime.devices import Device
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


@dataclass
class Program:
    """See the module docstring. `report` holds, per pass, what it did (for `explain`)."""

    fetches: tuple  # Tensors and Operations, as asked
    feeds: tuple[Tensor, ...]
    options: PlanOptions
    feed_device: Device  # where fed values live
    result_device: Optional[Device]  # where fetched tensors must end up (None: anywhere)
    roots: tuple[Operation, ...] = ()  # nodes to run besides what the fetches need
    ops: list[Operation] = field(default_factory=list)  # topological order
    inputs: dict[Operation, tuple[Tensor, ...]] = field(default_factory=dict)  # rewired inputs
    fetched: dict[Tensor, Tensor] = field(default_factory=dict)  # fetch -> tensor holding it
    device: dict[Operation, Device] = field(default_factory=dict)
    kernel: dict[Operation, KernelChoice] = field(default_factory=dict)
    numbering: Any = None  # set by the fold/CSE pass (compile.fold.Numbering)
    partitions: Any = None  # set by the partition pass (compile.partition.Partitioning)
    report: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.feed_set = frozenset(self.feeds)

    def inputs_of(self, op: Operation) -> tuple[Tensor, ...]:
        """The inputs `op` reads in this program (a copy's output where one was inserted)."""
        return self.inputs.get(op, op.inputs)

    def value_of(self, t: Tensor) -> Tensor:
        """The tensor that holds fetch `t` for the caller (its copy to the result device)."""
        return self.fetched.get(t, t)

    def device_of(self, t: Tensor) -> Device:
        """Where tensor `t` lives in this program: its producer's device, or the feed device."""
        if t in self.feed_set:
            return self.feed_device
        return self.device[t.op]

    def note(self, pass_name: str, line: str) -> None:
        self.report.setdefault(pass_name, []).append(line)
