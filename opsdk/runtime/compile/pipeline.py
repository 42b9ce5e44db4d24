"""The compile pipeline: a named, ordered list of passes from (fetches, feeds) to a plan.

    prune -> place -> fold_cse -> fuse -> partition      then `lower` makes the Plan

Each pass is a function Program -> Program with its own tests; each can be switched off
(`PlanOptions.disabled`), and then its `off` form runs instead (the least that keeps the program
runnable: everything, on the host, no folding, no cut). `Session.explain` shows what every pass
did. Passes may add and remove nodes (slots are numbered by `lower`); later passes (fusion) are
inserted into `PIPELINE` by name, before `partition` (as `fuse` is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.compile.fold import fold_off, fold_pass
from opsdk.runtime.compile.fuse import fuse_off, fuse_pass
from opsdk.runtime.compile.partition import one_partition, partition_pass
from opsdk.runtime.compile.place import host_only, place_pass
from opsdk.runtime.compile.plan import Plan, lower
from opsdk.runtime.compile.program import PlanOptions, Program
from opsdk.runtime.compile.prune import keep_everything, prune_pass
from opsdk.runtime.devices import Device, host
from opsdk.runtime.ir.device_names import DeviceSpec
from opsdk.runtime.ir.graph import Graph, Operation
from opsdk.runtime.ir.tensor import Tensor


@dataclass(frozen=True)
class Pass:
    """One named pass and what runs in its place when it is switched off."""

    name: str
    run: Callable[[Program], Program]
    off: Callable[[Program], Program]
    doc: str


PIPELINE: tuple[Pass, ...] = (
    Pass("prune", prune_pass, keep_everything, "keep the nodes the fetches need, in order"),
    Pass("place", place_pass, host_only, "a location (task, device) and a kernel for every node"),
    Pass("fold_cse", fold_pass, fold_off, "fold constants, merge common subexpressions"),
    Pass("fuse", fuse_pass, fuse_off, "one generated kernel per region of elementwise nodes"),
    Pass("partition", partition_pass, one_partition,
         "a graph per location, a _send/_recv pair on every edge that crosses"),
)
PASS_NAMES = tuple(p.name for p in PIPELINE)


def check_options(options: PlanOptions) -> None:
    """Refuse a switch naming no pass."""
    unknown = sorted(set(options.disabled) - set(PASS_NAMES))
    if unknown:
        raise OpsdkError(f"unknown pass(es) {', '.join(unknown)} to switch off (passes: "
                         f"{', '.join(PASS_NAMES)})")


def compile_program(program: Program) -> Program:
    """Run every pass of the pipeline (or its `off` form) over the program."""
    for p in PIPELINE:
        program = (p.off if p.name in program.options.disabled else p.run)(program)
    return program


def new_program(elements: Sequence[Tensor | Operation], feeds: Sequence[Tensor],
                options: PlanOptions, feed_device: Optional[Device] = None,
                result_device: Optional[Device] = None,
                roots: Sequence[Operation] = (), handed: Sequence[Tensor] = ()) -> Program:
    """A program for (fetches, feeds): fed values on `feed_device`, fetched values delivered on
    `result_device` (both the host by default, as Session.run wants)."""
    return Program(tuple(elements), tuple(feeds), options, feed_device or host(),
                   result_device or host(), tuple(roots), frozenset(handed))


def build_plan(elements: Sequence[Tensor | Operation], feeds: Sequence[Tensor],
               options: PlanOptions, feed_device: Optional[Device] = None,
               result_device: Optional[Device] = None, roots: Sequence[Operation] = (),
               handed: Sequence[Tensor] = ()) -> Plan:
    """The plan that computes `elements` given values for `feeds` (see `new_program`);
    `handed`: the feeds whose values the caller hands over (Program.handed)."""
    program = new_program(elements, feeds, options, feed_device, result_device, roots, handed)
    return lower(compile_program(program))


def plan_for_partition(graph: Graph, feeds: Sequence[str], fetches: Sequence[str],
                       targets: Sequence[str], options: PlanOptions) -> Plan:
    """The plan of a partition graph (`Partition.to_graph()`, shipped to the task that runs it):
    its placeholders fed, its fetches computed, its target nodes and every `_send` run. Its nodes
    carry their full locations, so placement keeps them; `options.default_task` should be the
    task running it."""
    tensors = [graph.get_tensor(name) for name in feeds]
    elements = [graph.get_tensor(name) for name in fetches]
    roots = [graph.get_operation(name) for name in targets]
    roots += [op for op in graph.operations if op.type == "_send" and op not in roots]
    task = DeviceSpec.parse(options.default_task)
    for op in roots:
        spec = DeviceSpec.parse(op.device)
        if spec.job is not None and spec.task_name() != task.task_name():
            raise OpsdkError(f"node '{op.name}' is placed on {op.device}, not on this task "
                             f"({options.default_task})")
    return build_plan(elements, tensors, options, roots=roots)
