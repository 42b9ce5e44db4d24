"""The fuse pass: maximal regions of elementwise nodes become one generated kernel each.

An op whose declaration gives its scalar formula (`elementwise:`, registry/elementwise.py) is
elementwise. The pass walks the program in order and grows regions of such nodes: one location
(on a device that has a fusion compiler: the host's `cpu`, a GPU's `cuda`), one float dtype, one
shape (inputs from outside the region are of that shape or hold a single value). A node joins
the regions of the nodes it reads when nothing else it reads depends on them (so the fused node
can run where its last member ran, with no cycle). Each region of two or more nodes is replaced
by one `_fused` node: its inputs are what the members read from outside, its outputs what is
read outside (or fetched); its kernel is the members' formulas composed (`FusedKernel`; a
member of several outputs, a binary op's gradient, joins only where none of its inputs is
broadcast, and gives a step per output),
compiled by the fusion compiler of the device's target (kernels/fused.py: C++ for the CPU;
kernels/fused_cuda.py: CUDA through NVRTC for a GPU) in the background while the node runs the
members' own kernels in order. Gradient graphs are fused the same way: their elementwise
gradient ops declare formulas too. A region may end in a sum or mean over trailing axes of one
of its values (`_ending`), on the host and on a GPU alike: the kernel then reduces rows as it
computes them.

Switched off (`passes_off={"fuse"}`), every node runs unfused; where a device's compiler is
missing (no g++ for the CPU, no NVRTC for a GPU; said once), that device's nodes do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from opsdk.registry.elementwise import FLOAT_TYPES, FusedKernel, Num, Var, output_formulas, substitute
from opsdk.runtime.compile.fused_node import FUSED, member_values
from opsdk.runtime.compile.program import Program
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.kernels.fused import fusion_compiler, fusion_problem, say_once
# On the host a region known to be smaller runs faster as separate NumPy calls; on a GPU each
# unfused op is a kernel launch of its own, so regions of any size are fused there.
MIN_ELEMENTS = 1 << 12
# The most values of an input repeating along a host region (a bias of the trailing axes): the
# kernel keeps a copy of them, a block longer, on its stack.
MAX_PERIOD = 4096
# Builtin reductions a region may end in, over trailing axes: the region's last value is then
# summed as it is computed and never written out (FusedKernel.reduction).
_REDUCTIONS = {"opsdk::reduce_sum": "sum", "opsdk::reduce_mean": "mean"}


@dataclass
class Region:
    """Nodes fused together, in program order, and the regions they depend on from outside."""

    ops: list[Operation] = field(default_factory=list)
    dtype: str = ""
    shape: Any = None
    location: str = ""
    target: str = ""  # the fusion compiler of its device (`cpu`, `cuda`)
    after: set[int] = field(default_factory=set)  # ids of regions it reads through other nodes
    # (trailing axes reduced, keepdims) once the region ends in a reduction: nothing joins after
    reduced: Optional[tuple[int, bool]] = None


def fuse_pass(program: Program) -> Program:
    """Replace each region of two or more elementwise nodes by one `_fused` node."""
    targets, blocked = _targets(program)
    if targets and targets <= blocked:
        return program
    regions = [r for r in _regions(program, blocked) if len(r.ops) >= 2]
    for region in regions:
        if _leaves_and_returns(program, region):  # checked on the program as fused so far
            program.note("fuse", f"{', '.join(op.name for op in region.ops)}: not fused (a path "
                                 f"leaves the region and returns to it)")
            continue
        node = _replace(program, region)
        program.note("fuse", f"{', '.join(op.name for op in region.ops)} -> {node.name} "
                             f"(kernel {node.attrs['kernel'].key()}, source "
                             f"{fusion_compiler(region.target).source_path(node.attrs['kernel'])})")
    if regions:
        program.ops = _reorder(program)
    else:
        program.note("fuse", "nothing fused")
    return program


def fuse_off(program: Program) -> Program:
    program.note("fuse", "off")
    return program


def _targets(program: Program) -> tuple[set[str], set[str]]:
    """The fusion targets of the program's devices, and those whose compiler is missing here
    (noted, and said once: their nodes run unfused)."""
    targets, blocked = set(), set()
    for device in sorted(set(program.device.values()), key=lambda d: (not d.is_host, d.name)):
        target = device.fusion_target
        if target is None or target in targets:
            continue
        targets.add(target)
        why = fusion_problem(target)
        if why is not None:
            blocked.add(target)
            where = "" if device.is_host else f" on {device.name}"
            say_once(f"elementwise regions{where} run unfused: {why}")
            program.note("fuse", f"nothing fused{where}: {why}")
    return targets, blocked


# ------------------------------------------------------------------------------- grouping
def _candidate(program: Program, op: Operation, blocked: set[str]) -> Optional[tuple]:
    """(dtype, shape, location) of a node that may join a region, else None."""
    spec = op.spec
    if spec is None or spec.elementwise is None or op.stateful or program.controls_of(op):
        return None
    target = program.device[op].fusion_target
    if target is None or target in blocked \
            or len(op.outputs) != len(output_formulas(spec.elementwise)):
        return None
    out = op.outputs[0]
    if out.dtype not in FLOAT_TYPES or out.shape is None \
            or any(o in program.feed_set or o.dtype != out.dtype or o.shape != out.shape
                   for o in op.outputs):
        return None
    if any(t.dtype != out.dtype for t in program.inputs_of(op)):
        return None
    if len(op.outputs) > 1 and any(t.shape is None or tuple(t.shape) != tuple(out.shape)
                                   for t in program.inputs_of(op)):
        return None  # an input broadcast: its gradient would be a sum, not elementwise
    if program.device[op].is_host and None not in out.shape and _size(out.shape) < MIN_ELEMENTS:
        return None
    return (out.dtype, out.shape, program.location[op])


def _ending(program: Program, op: Operation, regions: list[Region],
            region_of: dict) -> Optional[tuple[int, tuple[int, bool]]]:
    """(region, (trailing axes, keepdims)) when `op` is a sum or mean over trailing axes of a
    value of an open region at its own location, which it may then end; else None."""
    spec = op.spec
    if spec is None or spec.qualified_name not in _REDUCTIONS or op.stateful \
            or program.controls_of(op):
        return None
    (t,) = program.inputs_of(op)
    r = region_of.get(t.op) if t not in program.feed_set else None
    if r is None or regions[r].reduced is not None \
            or program.location[op] != regions[r].location:
        return None  # a reduction placed elsewhere runs there, not inside the region's kernel
    region, rank = regions[r], len(regions[r].shape)
    if tuple(t.shape) != tuple(region.shape) or op.outputs[0].dtype != region.dtype or rank == 0:
        return None
    axes = sorted({a % rank for a in op.attrs["axes"]}) if op.attrs["axes"] else list(range(rank))
    if axes != list(range(rank - len(axes), rank)):
        return None  # a leading or middle axis: its values are not contiguous rows
    return r, (len(axes), bool(op.attrs["keepdims"]))


def _regions(program: Program, blocked: set[str]) -> list[Region]:
    regions: list[Region] = []
    region_of: dict[Operation, int] = {}
    depends: dict[Operation, set[int]] = {}  # node -> regions it reads, directly or not
    for op in program.ops:
        reads = [t.op for t in program.inputs_of(op) if t not in program.feed_set]
        reads += list(program.controls_of(op))
        through = set().union(*(depends.get(p, set()) for p in reads)) if reads else set()
        ending = _ending(program, op, regions, region_of)
        if ending is not None:
            r, regions[r].reduced = ending
            regions[r].ops.append(op)
            region_of[op] = r
            depends[op] = through | {r}
            continue
        key = _candidate(program, op, blocked)
        joined = None if key is None else _join(program, op, key, regions, region_of, depends)
        if joined is None and key is not None and all(  # inputs one pass can read
                _fits(t, key[1], program.device[op].fusion_target) for t in program.inputs_of(op)):
            joined = len(regions)
            regions.append(Region(dtype=key[0], shape=key[1], location=key[2],
                                  target=program.device[op].fusion_target, after=set(through)))
        if joined is not None:
            regions[joined].ops.append(op)
            region_of[op] = joined
            through.add(joined)
        depends[op] = through
    return regions


def _join(program: Program, op: Operation, key: tuple, regions: list[Region],
          region_of: dict, depends: dict) -> Optional[int]:
    """The region `op` joins (merging the regions it reads when that is safe, else the latest
    one it may join alone), or None to start its own."""
    near = []
    for t in program.inputs_of(op):
        r = region_of.get(t.op) if t not in program.feed_set else None
        if r is not None and regions[r].reduced is None and (
                regions[r].dtype, regions[r].shape, regions[r].location) == key:
            near.append(r)
    choices = [set(near)] + [{r} for r in sorted(set(near), reverse=True)] if near else []
    for targets in choices:
        outside = [t for t in program.inputs_of(op)
                   if t in program.feed_set or region_of.get(t.op) not in targets]
        if _may_join(targets, outside, key, regions, depends):
            first = min(targets)
            for r in sorted(targets - {first}):
                _merge(regions, region_of, depends, r, first)
            regions[first].after |= {r for t in outside for r in depends.get(t.op, set())}
            return first
    return None


def _may_join(targets: set, outside: list, key: tuple, regions: list[Region],
              depends: dict) -> bool:
    """Whether a node reading `outside` may join the regions `targets` (merged): every outside
    input fits the region's shape and none depends on them, nor does one target on another."""
    for t in outside:
        upstream = depends.get(t.op, set())
        if not _fits(t, key[1], regions[min(targets)].target) or upstream & targets:
            return False
        if any(regions[r].after & targets for r in upstream):  # r reads a target: r -> t -> r
            return False
    return not any(regions[r].after & targets for r in targets)


def _fits(t: Tensor, shape: tuple, target: Optional[str]) -> bool:
    """An outside input may be of the region's shape, hold a single value, or, on the host, be
    the region's trailing axes (a bias: its values repeat along the region's elements)."""
    if t.shape is None:
        return False
    if tuple(t.shape) == tuple(shape) or (None not in t.shape and _size(t.shape) == 1):
        return True
    return target == "cpu" and _period(t.shape, shape) is not None


def _period(small: tuple, shape: tuple) -> Optional[int]:
    """M when `small`, leading 1s aside, is `shape`'s known trailing axes holding M values, from
    2 to MAX_PERIOD; else None."""
    dims = list(small)
    while dims and dims[0] == 1:
        dims.pop(0)
    if not dims or None in dims or len(dims) > len(shape) or len(dims) == len(shape) \
            or tuple(dims) != tuple(shape[len(shape) - len(dims):]):
        return None
    m = _size(dims)
    return m if 2 <= m <= MAX_PERIOD else None


def _merge(regions: list[Region], region_of: dict, depends: dict, src: int, dst: int) -> None:
    regions[dst].ops.extend(regions[src].ops)
    regions[dst].after |= regions[src].after
    regions[src].ops = []
    for op in regions[dst].ops:
        region_of[op] = dst
    for deps in [*depends.values(), *(r.after for r in regions)]:
        if src in deps:
            deps.discard(src)
            deps.add(dst)


def _kind(t: Tensor, shape: tuple) -> str:
    """How the kernel reads outside input `t` (FusedKernel.inputs)."""
    if tuple(t.shape) == tuple(shape):
        return "array"
    return "scalar" if _size(t.shape) == 1 else f"period:{_period(t.shape, shape)}"


def _size(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _leaves_and_returns(program: Program, region: Region) -> bool:
    """Whether a path leaves the region and comes back (member -> outside node -> member), in
    the program with the regions before it already replaced: one node for the region would then
    both feed and read that outside node, a cycle. The grouping avoids most such regions, but
    two regions of unconnected members can each pass alone and close a cycle together (found by
    a TF1 VAE program, where the cycle dropped nodes from the order); this check decides."""
    inside = set(region.ops)
    users: dict[Operation, list[Operation]] = {}
    for op in program.ops:
        for t in program.inputs_of(op):
            users.setdefault(t.op, []).append(op)
        for c in program.controls_of(op):
            users.setdefault(c, []).append(op)
    seen: set[Operation] = set()
    stack = [u for m in region.ops for u in users.get(m, ()) if u not in inside]
    while stack:
        op = stack.pop()
        if op in inside:
            return True
        if op not in seen:
            seen.add(op)
            stack.extend(users.get(op, ()))
    return False


# ------------------------------------------------------------------------------- replacing
def _replace(program: Program, region: Region) -> Operation:
    members = sorted(region.ops, key=program.ops.index)
    inside = set(members)
    inputs: list[Tensor] = []
    names: dict[Tensor, Var] = {}
    steps, reads = [], []
    reduction = None
    for k, op in enumerate(members):
        if region.reduced is not None and op is members[-1]:  # the reduction ending it
            (t,) = program.inputs_of(op)
            reads.append((names[t].name,))
            reduction = (_REDUCTIONS[op.spec.qualified_name], names[t].name)
            names[op.outputs[0]] = Var(f"t{k}")
            continue
        env: dict[str, Any] = {}
        for spec_in, t in zip(op.spec.inputs, program.inputs_of(op)):
            if t not in names:
                names[t] = Var(f"in{len(inputs)}")
                inputs.append(t)
            env[spec_in.name] = names[t]
        reads.append(tuple(names[t].name for t in program.inputs_of(op)))
        env.update({a.name: Num(float(op.attrs[a.name])) for a in op.spec.attrs
                    if a.type in ("int", "float")})
        for t, name, formula in zip(op.outputs, member_values(k, len(op.outputs)),
                                    output_formulas(op.spec.elementwise)):
            steps.append((name, substitute(formula, env)))
            names[t] = Var(name)
    read_outside = _read_outside(program, inside)
    outputs = [t for op in members for t in op.outputs if t in read_outside]
    if reduction is not None and members[-1].outputs[0] not in outputs:
        outputs.append(members[-1].outputs[0])  # the kernel's last output, always written
    kernel = FusedKernel(region.dtype, tuple(_kind(t, region.shape) for t in inputs),
                         tuple(steps), tuple(names[t].name for t in outputs), reduction)
    last = members[-1]
    node = Operation(last.graph, FUSED, f"{last.name}/fused", tuple(inputs),
                     {"kernel": kernel, "target": region.target, "region": tuple(members),
                      "reads": tuple(reads), "reduced": region.reduced,
                      "kernels": tuple(program.kernel.get(op) for op in members)},
                     {}, (), last.device, None,
                     last._id)
    node.outputs = tuple(Tensor(node, i, t.shape, t.dtype) for i, t in enumerate(outputs))
    program.location[node] = region.location
    program.device[node] = program.device[last]
    _rewire(program, inside, dict(zip(outputs, node.outputs)), node)
    program.ops = [op for op in program.ops if op not in inside] + [node]
    return node


def _read_outside(program: Program, inside: set) -> set:
    """The members' values the fused node must output: read outside, fetched, or of a member
    run for itself (a fetched operation, a root) or waited for through a control edge, which
    the fused node then stands for (a region computing nothing would be no kernel)."""
    read = {t for op in program.ops if op not in inside for t in program.inputs_of(op)}
    read.update(program.value_of(e) for e in program.fetches if isinstance(e, Tensor))
    wanted = {e for e in (*program.fetches, *program.roots) if isinstance(e, Operation)}
    wanted.update(c for op in program.ops if op not in inside for c in program.controls_of(op))
    read.update(op.outputs[0] for op in inside if op in wanted)
    return read


def _rewire(program: Program, inside: set, by: dict, node: Operation) -> None:
    for op in program.ops:
        if op in inside:
            continue
        inputs = program.inputs_of(op)
        if any(t in by for t in inputs):
            program.inputs[op] = tuple(by.get(t, t) for t in inputs)
        controls = program.controls_of(op)
        if any(c in inside for c in controls):
            program.controls[op] = tuple(dict.fromkeys(node if c in inside else c
                                                       for c in controls))
    for e in program.fetches:
        if isinstance(e, Tensor) and program.value_of(e) in by:
            program.fetched[e] = by[program.value_of(e)]


def _reorder(program: Program) -> list[Operation]:
    """A topological order of the program after replacement, stable in creation order."""
    import heapq
    ops = program.ops
    members = set(ops)
    users: dict[Operation, list[Operation]] = {op: [] for op in ops}
    count = {}
    for op in ops:
        deps = {t.op for t in program.inputs_of(op) if t not in program.feed_set}
        deps |= set(program.controls_of(op))
        deps &= members
        count[op] = len(deps)
        for d in deps:
            users[d].append(op)
    ready = [(op._id, i, op) for i, op in enumerate(ops) if count[op] == 0]
    heapq.heapify(ready)
    order = []
    position = {op: i for i, op in enumerate(ops)}
    while ready:
        _, _, op = heapq.heappop(ready)
        order.append(op)
        for u in users[op]:
            count[u] -= 1
            if count[u] == 0:
                heapq.heappush(ready, (u._id, position[u], u))
    if len(order) != len(ops):  # a cycle: never drop nodes silently
        left = [op.name for op in ops if count[op] > 0]
        raise RuntimeError(f"fusion formed a cycle through {', '.join(left[:6])}: a bug in "
                           f"opsdk's fuse pass (SessionConfig(passes_off={{'fuse'}}) avoids it)")
    return order
