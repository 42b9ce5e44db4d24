"""The partition pass: the placed program split by location, a `_send`/`_recv` pair at each cut.

Every node has a location (a task and a device, compile/place.py). The pass gives each location
a `Partition`: its nodes in order, and for every edge that crosses locations a `_send` node on
the producer's side and a `_recv` node on the reader's (compile/sendrecv.py), one pair per
(tensor, destination) however many nodes read it there. A control edge that crosses becomes a
pair carrying an empty marker. Constants are not sent: each location that reads one holds its
own copy, which waits for the constant's control inputs (a constant read only elsewhere, and
then a marker nothing waits for, is taken out). Fed values arrive at the program's feed location; fetched values are received at its
result location. `Partition.to_graph()` gives the partition as a standalone graph (placeholders
for its fed values), which the project's graph format exports, and which a task lowers and runs
as it is (`pipeline.plan_for_partition`). `lower` (compile/plan.py) turns each partition into
its steps; in one process the partitions of a step run on the one executor and meet in an
in-process rendezvous.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from opsdk.runtime.compile.fold import constant_node
from opsdk.runtime.compile.fused_node import member_values
from opsdk.runtime.compile.program import Program
from opsdk.runtime.compile.sendrecv import RECV, SEND
from opsdk.runtime.devices import Device, get_device
from opsdk.runtime.ir.graph import Graph, Operation
from opsdk.runtime.ir.tensor import Tensor


@dataclass
class Partition:
    """The nodes of one location and how they read each other (see the module docstring)."""

    location: str
    device: Device
    ops: list[Operation] = field(default_factory=list)  # topological order
    inputs: dict[Operation, tuple[Tensor, ...]] = field(default_factory=dict)
    controls: dict[Operation, tuple[Operation, ...]] = field(default_factory=dict)
    feeds: list[Tensor] = field(default_factory=list)  # values the caller gives this partition
    fetches: dict = field(default_factory=dict)  # caller's fetched tensor -> tensor here
    targets: list[Operation] = field(default_factory=list)  # nodes run for their effects

    def inputs_of(self, op: Operation) -> tuple[Tensor, ...]:
        return self.inputs.get(op, op.inputs)

    def controls_of(self, op: Operation) -> tuple[Operation, ...]:
        return self.controls.get(op, op.control_inputs)

    @property
    def sends(self) -> list[Operation]:
        return [op for op in self.ops if op.type == SEND]

    @property
    def recvs(self) -> list[Operation]:
        return [op for op in self.ops if op.type == RECV]

    def to_graph(self) -> "PartitionGraph":
        """This partition as a standalone graph (see `PartitionGraph`)."""
        return _standalone(self)


@dataclass(frozen=True)
class PartitionGraph:
    """A partition as a graph of its own: `feeds` are its placeholders' tensor names, in the order
    of `Partition.feeds`; `fetches` the names of the tensors holding the caller's fetches, in the
    order of `Partition.fetches`; `targets` the names of the nodes run for their effects."""

    graph: Graph
    feeds: tuple[str, ...]
    fetches: tuple[str, ...]
    targets: tuple[str, ...]


class _Cutter:
    """Builds the partitions of one program."""

    def __init__(self, program: Program):
        self.program = program
        self.parts: dict[str, Partition] = {}
        self.received: dict[tuple, Tensor] = {}

    def part(self, location: str) -> Partition:
        if location not in self.parts:
            self.parts[location] = Partition(location, get_device(location))
        return self.parts[location]

    def read(self, t: Tensor, here: str) -> Tensor:
        """The tensor of location `here` holding `t`'s value (t itself if it lives here)."""
        source = self.program.location_of(t)
        if source == here:
            return t
        key = (t, here)
        if key not in self.received:
            if t.op.type == "const" and t not in self.program.feed_set:
                # the copy waits for what the constant waits for (there, through markers)
                waits = tuple(self.wait_for(c, here) for c in self.program.controls_of(t.op))
                copy = constant_node(self.program, t.op, t, t.op.attrs["value"], here)
                self.part(here).ops.append(copy.op)
                if waits:
                    self.part(here).controls[copy.op] = waits
                self.received[key] = copy
            else:
                self.received[key] = self._pair(t, source, here)
        return self.received[key]

    def wait_for(self, c: Operation, here: str) -> Operation:
        """The node of location `here` that stands for control input `c`."""
        source = self.program.location[c]
        if source == here:
            return c
        key = ("control", c, here)  # one marker per (node, destination)
        if key not in self.received:
            self.received[key] = self._pair(None, source, here, control_of=c)
        return self.received[key].op

    def _pair(self, t: Optional[Tensor], source: str, here: str,
              control_of: Optional[Operation] = None) -> Tensor:
        p, n = self.program, len(self.received)
        origin = t.op if t is not None else control_of
        name = t.name if t is not None else f"^{control_of.name}"
        attrs = {"tensor_name": name, "send_location": source, "recv_location": here,
                 "send_incarnation": 0}
        send = Operation(origin.graph, SEND, f"{origin.name}/_send_{n}",
                         (t,) if t is not None else (), attrs, {},
                         (control_of,) if control_of is not None else (), origin.device, None,
                         origin._id)
        recv = Operation(origin.graph, RECV, f"{origin.name}/_recv_{n}", (), attrs, {}, (),
                         origin.device, None, origin._id)
        shape, dtype = ((t.shape, t.dtype) if t is not None else ((0,), "bool"))
        recv.outputs = (Tensor(recv, 0, shape, dtype),)
        for node, where in ((send, source), (recv, here)):
            p.location[node] = where
            p.device[node] = self.part(where).device
        self.part(source).ops.append(send)
        self.part(here).ops.append(recv)
        if t is not None and t in p.feed_set:
            self._feed(t, source)
        return recv.outputs[0]

    def _feed(self, t: Tensor, where: str) -> None:
        feeds = self.part(where).feeds
        if t not in feeds:
            feeds.append(t)

    def add(self, op: Operation) -> None:
        """Put `op` in its location's partition, cutting its crossing input edges."""
        p = self.program
        here = p.location[op]
        inputs = p.inputs_of(op)
        read = tuple(self.read(t, here) for t in inputs)
        controls = p.controls_of(op)
        waits = tuple(self.wait_for(c, here) for c in controls)
        part = self.part(here)
        part.ops.append(op)
        if read != op.inputs:
            part.inputs[op] = read
        if waits != op.control_inputs:
            part.controls[op] = waits
        for t in inputs:
            if t in p.feed_set and p.location_of(t) == here:
                self._feed(t, here)


def partition_program(program: Program) -> dict[str, Partition]:
    """The partitions of a placed (and folded) program, by location."""
    cut = _Cutter(program)
    for t in program.feeds:
        cut._feed(t, program.feed_location)
    for op in program.ops:
        cut.add(op)
    result = program.result_location
    for e in program.fetches:
        if isinstance(e, Operation):
            cut.part(program.location[e]).targets.append(e)
            continue
        value = program.value_of(e)
        where = result if result is not None else program.location_of(value)
        cut.part(where).fetches[e] = cut.read(value, where)
    for op in program.roots:
        if op in program.location:
            cut.part(program.location[op]).targets.append(op)
    _drop_unread(cut.parts)
    return cut.parts


def _drop_unread(parts: dict[str, Partition]) -> None:
    """Take out the constants nothing reads in their partition, and then the control markers
    nothing waits for: each location reading a constant holds its own copy (which waits for
    the constant's control inputs), so a constant read only elsewhere would run for nothing,
    after a marker from another location."""
    for part in parts.values():
        needed, waited = _readers(part)
        part.ops = [op for op in part.ops if op.type != "const" or op in waited
                    or any(t in needed for t in op.outputs)]
    for part in list(parts.values()):
        needed, waited = _readers(part)
        for recv in [op for op in part.recvs if op.attrs["tensor_name"].startswith("^")
                     and op not in waited and op.outputs[0] not in needed]:
            drop_marker(parts, part, recv)


def _readers(part: Partition) -> tuple[set, set]:
    """(tensors read or fetched, nodes waited for or run as targets) in `part`."""
    needed, waited = set(part.fetches.values()), set(part.targets)
    for op in part.ops:
        needed.update(part.inputs_of(op))
        waited.update(part.controls_of(op))
    return needed, waited


def drop_marker(parts: dict[str, Partition], part: Partition, recv: Operation) -> None:
    """Take control marker `recv` out of `part` and its `_send` out of the sender's partition;
    the node the marker stood for becomes a target there, so it still runs."""
    part.ops.remove(recv)
    a = recv.attrs
    source = parts[a["send_location"]]
    send = next(op for op in source.sends if op.attrs["tensor_name"] == a["tensor_name"]
                and op.attrs["recv_location"] == a["recv_location"])
    source.ops.remove(send)
    for origin in source.controls_of(send):
        if origin not in source.targets:
            source.targets.append(origin)


def partition_pass(program: Program) -> Program:
    """Partition the program by location (see the module docstring)."""
    program.partitions = partition_program(program)
    for location, part in program.partitions.items():
        program.note("partition", f"{location}: {len(part.ops)} node(s)")
    for part in program.partitions.values():
        for recv in part.recvs:
            a = recv.attrs
            program.note("partition", f"cut {a['tensor_name']}: {a['send_location']} -> "
                                      f"{a['recv_location']}")
    return program


def one_partition(program: Program) -> Program:
    """The partition pass switched off: one partition holds every node, so no edge may cross
    locations (place everything on one device, or leave the pass on)."""
    from opsdk.registry.errors import OpsdkError
    for op in program.ops:
        here = program.location[op]
        for t in program.inputs_of(op):
            there = program.location_of(t)
            if there != here and t.op.type != "const":
                raise OpsdkError(f"{op.type} (node '{op.name}') on {here} reads '{t.name}' from "
                                 f"{there}, and the partition pass is off")
    parts = partition_program(program)
    program.partitions = parts
    program.note("partition", f"off: {len(parts)} partition(s), no edge cut")
    return program


def _standalone(part: Partition) -> PartitionGraph:
    g = Graph()
    mapped: dict[Tensor, Tensor] = {}
    nodes: dict[Operation, Operation] = {}
    feeds = []
    with g.device(part.location):
        for t in part.feeds:
            name = t.op.name if t.op.type == "placeholder" else f"{t.op.name}/fed_{t.index}"
            node = g.create_op("placeholder", [], {"dtype": t.dtype, "shape": t.shape},
                               [(t.shape, t.dtype)], name=name)
            mapped[t] = node.outputs[0]
            feeds.append(node.outputs[0].name)
        for op in part.ops:
            if op.type == "_fused":  # a graph file holds the members; the task fuses again
                _expand_fused(g, op, [mapped[t] for t in part.inputs_of(op)], mapped, nodes)
                continue
            _variable_first(g, op, part, nodes)
            clone = g.create_op(op.type, [mapped[t] for t in part.inputs_of(op)], op.attrs,
                                [(t.shape, t.dtype) for t in op.outputs], spec=op.spec,
                                name=op.name, type_attrs=op.type_attrs, absent=op.absent,
                                control_inputs=[nodes[c] for c in part.controls_of(op)])
            nodes[op] = clone
            for mine, theirs in zip(op.outputs, clone.outputs):
                mapped.setdefault(mine, theirs)
    return PartitionGraph(g, tuple(feeds), tuple(mapped[t].name for t in part.fetches.values()),
                          tuple(nodes[op].name for op in part.targets))


def _variable_first(g: Graph, op: Operation, part: Partition, nodes: dict) -> None:
    """An assign whose variable node is not in the partition (an initializer step never reads
    the variable) gets a copy of that node first: a graph file names only variables it holds."""
    name = op.attrs.get("variable") if op.type in ("assign", "assign_add", "assign_sub") else None
    if not isinstance(name, str) or any(n.name == name for n in nodes.values()):
        return
    var = op.graph.get_operation(name)
    if var in part.ops:
        return
    nodes[var] = g.create_op("variable", [], var.attrs,
                             [(t.shape, t.dtype) for t in var.outputs], name=var.name)


def _expand_fused(g: Graph, node: Operation, inputs: list, mapped: dict, nodes: dict) -> None:
    """Clone the members of a `_fused` node into `g` (compile/fuse.py records, per member, the
    value each input reads: `inK` for the node's K-th input, `tM` for member M's output, `tM_J`
    for its J-th of several, fused_node.member_values). A
    member fetched as an operation finds its clone in `nodes`; a control edge on the fused node
    waits for its last member (members have no effects, so that only orders the nodes)."""
    values = {f"in{i}": t for i, t in enumerate(inputs)}
    for k, (op, reads) in enumerate(zip(node.attrs["region"], node.attrs["reads"])):
        clone = g.create_op(op.type, [values[name] for name in reads], op.attrs,
                            [(t.shape, t.dtype) for t in op.outputs], spec=op.spec,
                            name=op.name, type_attrs=op.type_attrs)
        values.update(zip(member_values(k, len(clone.outputs)), clone.outputs))
        nodes[op] = nodes[node] = clone
    for out, name in zip(node.outputs, node.attrs["kernel"].outputs):
        mapped.setdefault(out, values[name])
