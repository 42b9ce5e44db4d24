"""The partition pass: the placed program split by location, with a Send/Recv pair at each cut.

`partition_graph` is the seam the distributed executor uses: it takes any location function
(a device name now; a task name such as `/job:worker/task:1` for distribution) and returns the
nodes of each location and the edges that cross locations, each keyed so that its Send and its
Recv find each other in a rendezvous (the key names the tensor and both ends; a step id is
added at run time). In one process the executor's slot list is the rendezvous: a cut is a slot
the sending partition writes and the receiving partition reads, and all partitions of a step run
in one ready queue of the one executor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from opsdk.runtime.compile.program import Program
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.tensor import Tensor


@dataclass(frozen=True)
class Cut:
    """An edge between two locations: the tensor, where it is made and where it is read."""

    tensor: Tensor
    source: str
    destination: str

    @property
    def key(self) -> str:
        """The rendezvous key of this edge's Send/Recv pair (a step id is added at run time)."""
        return f"{self.tensor.name};{self.source};{self.destination}"


@dataclass
class Partitioning:
    """Nodes per location (in program order) and the cuts between locations."""

    parts: dict[str, list[Operation]] = field(default_factory=dict)
    cuts: list[Cut] = field(default_factory=list)

    def location_of(self, op: Operation) -> str:
        for location, ops in self.parts.items():
            if op in ops:
                return location
        raise KeyError(op.name)


def partition_graph(ops: Sequence[Operation], inputs_of: Callable[[Operation], Sequence[Tensor]],
                    location_of: Callable[[Operation], str], fed: frozenset = frozenset(),
                    feed_location: str = "") -> Partitioning:
    """Split `ops` by `location_of`; every input edge whose producer is elsewhere is a cut (one
    per tensor and destination, however many nodes read it there)."""
    result = Partitioning()
    where: dict[Operation, str] = {}
    seen: set[tuple[Tensor, str]] = set()
    for op in ops:
        here = location_of(op)
        where[op] = here
        result.parts.setdefault(here, []).append(op)
        for t in inputs_of(op):
            source = feed_location if t in fed else where.get(t.op, here)
            if source != here and (t, here) not in seen:
                seen.add((t, here))
                result.cuts.append(Cut(t, source, here))
    return result


def partition_pass(program: Program) -> Program:
    """Partition the nodes that still run after folding, by device."""
    kept = program.numbering.kept if program.numbering is not None else program.ops
    program.partitions = partition_graph(kept, program.inputs_of,
                                         lambda op: program.device[op].name, program.feed_set,
                                         program.feed_device.name)
    for location, ops in program.partitions.parts.items():
        program.note("partition", f"{location}: {len(ops)} node(s)")
    for cut in program.partitions.cuts:
        program.note("partition", f"cut {cut.tensor.name}: {cut.source} -> {cut.destination}")
    return program


def one_partition(program: Program) -> Program:
    """The partition pass switched off: one partition holds every node."""
    kept = program.numbering.kept if program.numbering is not None else program.ops
    program.partitions = Partitioning({"": list(kept)}, [])
    program.note("partition", "off: one partition")
    return program
