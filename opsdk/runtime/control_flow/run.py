"""How `cond` and `while_loop` nodes run: their sub-graphs compiled by the same pipeline and
run on the same executor as any step, with the same placement, checks and optimisations.

When a plan containing a control-flow node is compiled, the node's `prepare` compiles each of
its sub-graphs into a plan whose inputs arrive, and whose outputs are delivered, on the node's
device (`_send`/`_recv` pairs move values in between), running every op with effects as well as what
the outputs need. At run time only the branch taken, or cond and body until the condition is
false, run; sub-plans run serially on the step's thread (a pool thread waiting on its own pool
could starve it).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from opsdk.registry.errors import OpError, OpsdkError, in_context
from opsdk.runtime.compile.pipeline import build_plan
from opsdk.runtime.compile.plan import Plan
from opsdk.runtime.control_flow.builders import (fits, recorded, shape_histories, shape_text,
                                                stashed_shapes)
from opsdk.runtime.devices import Device, to_host
from opsdk.runtime.exec.executor import StepContext, run_slots
from opsdk.runtime.exec.rendezvous import LocalRendezvous
from opsdk.runtime.ir.func_graph import SubGraph
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.primitives import Primitive, register_primitive

RunFn = Callable[[Any, Operation, list], tuple]


class SubPlan:
    """A sub-graph's plan, run on `device` (its inputs fed there, its outputs left there). The
    values of its first `handed` inputs are handed over by the caller (`run`'s `handed`), so
    its steps may write into them."""

    def __init__(self, sub: SubGraph, device: Device, options: Any, handed: int = 0):
        self.sub = sub
        self.plan = build_plan(sub.outputs, sub.inputs, options, feed_device=device,
                               result_device=device, roots=sub.effect_ops(),
                               handed=sub.inputs[:handed])
        index = {t: i for i, t in enumerate(sub.inputs)}
        self.feeds = tuple((index[t], slot) for t, slot in self.plan.feed_slots)

    def run(self, values: list, ctx: Any, who: str, handed: bool = False) -> tuple:
        """The outputs for input `values`; errors name `who` and the inner node. With `handed`,
        `values` is emptied once its items are in the plan's slots, so that the slots alone
        hold them (a step writes into a buffer only when nothing else refers to it)."""
        plan = self.plan
        if plan.rendezvous:  # the sub-graph spans devices: its own sends meet its own receives
            ctx = StepContext(ctx.variables, ctx.session, ctx.token, LocalRendezvous(), ctx.step_id)
        slots = list(plan.template)
        for i, slot in self.feeds:
            slots[slot] = values[i]
        if handed:
            values.clear()
        try:
            run_slots(plan, slots, ctx, None)
        except OpsdkError as exc:
            raise in_context(exc, f"{who}, in '{self.sub.name}': {exc}") from exc
        return tuple(slots[s] for s in plan.fetch_slots)


def _truth(who: str, value: Any) -> bool:
    array = to_host(value) if not isinstance(value, (bool, np.bool_)) else np.asarray(value)
    if array.size != 1:
        raise OpError(f"{who}: the condition has shape {list(array.shape)}; it must be a "
                      "single bool")
    return bool(array.reshape(()))


# ----------------------------------------------------------------------------------------- cond
def _prepare_cond(op: Operation, device: Device, options: Any) -> RunFn:
    who = f"cond (node '{op.name}')"
    subs = (op.attrs["then_branch"], op.attrs["else_branch"])
    plans = tuple(SubPlan(sub, device, options) for sub in subs)

    def run(ctx: Any, op: Operation, inputs: list) -> tuple:
        return plans[0 if _truth(who, inputs[0]) else 1].run(inputs[1:], ctx, who)
    return run


# ----------------------------------------------------------------------------------- while_loop
def _prepare_while(op: Operation, device: Device, options: Any) -> RunFn:
    who = f"while_loop (node '{op.name}')"
    cond_plan = SubPlan(op.attrs["cond"], device, options)
    # The loop variables are handed to the body: an iteration's values die as the next begin,
    # so the body may write into them (a TensorArray's writes then cost a row, not a copy).
    body_plan = SubPlan(op.attrs["body"], device, options, handed=len(op.attrs["shape_invariants"]))

    last = [0]  # the iterations of the last run: the first size of a history's buffer

    def run(ctx: Any, op: Operation, inputs: list) -> tuple:
        attrs = op.attrs
        invariants, names = attrs["shape_invariants"], attrs["loop_var_names"]
        n = len(invariants)
        values, captured = list(inputs[:n]), list(inputs[n:])
        limit, keep = attrs["maximum_iterations"], recorded(attrs, n)
        shapes = shape_histories(attrs)
        as_shape = [v in shapes for v in keep]
        history = [[] if shape else _Rows(device.xp, last[0], who, f"loop variable {names[v]}")
                   for v, shape in zip(keep, as_shape)]
        # the body's values a gradient reads (stash_intermediates): its outputs after the
        # loop variables', one row per iteration
        extra = body_plan.sub.outputs[n:]
        stash_shapes = stashed_shapes(attrs)
        stash = [[] if j in stash_shapes else _Rows(device.xp, last[0], who, f"value '{t.name}'")
                 for j, t in enumerate(extra)]
        count = 0
        _check_invariants(who, values, invariants, names, count)
        token = ctx.token
        while limit is None or count < limit:
            token.check(f"{who}, after {count} iteration(s)")
            pred = cond_plan.run([*values, *captured], ctx, who)[0]
            if not _truth(who, pred):
                break
            for h, v, shape in zip(history, keep, as_shape):
                h.append(np.shape(values[v]) if shape else values[v])
            given, values = [*values, *captured], None
            values = list(body_plan.run(given, ctx, who, handed=True))
            for j, (h, value) in enumerate(zip(stash, values[n:])):
                h.append(np.shape(value) if j in stash_shapes else value)
            del values[n:]
            count += 1
            _check_invariants(who, values, invariants, names, count)
        last[0] = count
        outputs = [*values, _on(device, np.asarray(count, dtype=np.int64))]
        outputs += [_stack_shapes(device, h, len(invariants[v])) if shape
                    else h.rows(np.shape(values[v]), _dtype(values[v]))
                    for h, v, shape in zip(history, keep, as_shape)]
        outputs += [_stack_shapes(device, h, len(t.shape)) if j in stash_shapes
                    else h.rows(tuple(d or 0 for d in t.shape or ()), np.dtype(t.dtype))
                    for j, (h, t) in enumerate(zip(stash, extra))]
        return tuple(outputs)
    return run


class _Rows:
    """A history being recorded: each iteration's value copied into the next row of a buffer
    while it is fresh (so it may die with its iteration, and its memory serve the next one),
    the buffer sized by the last run's count and doubled when full; the history is a view of
    its first rows, with no stack of the values at the end."""

    __slots__ = ("xp", "size", "who", "label", "buffer", "count")

    def __init__(self, xp: Any, size: int, who: str, label: str):
        self.xp, self.size, self.who, self.label = xp, max(size, 1), who, label
        self.buffer: Any = None
        self.count = 0

    def append(self, value: Any) -> None:
        buffer = self.buffer
        shape = getattr(value, "shape", None)
        if shape is None:
            value = np.asarray(value)
            shape = value.shape
        if buffer is None:
            buffer = self.buffer = self.xp.empty((self.size, *shape), dtype=value.dtype)
        elif shape != buffer.shape[1:]:
            raise OpError(f"{self.who}: recording the iterations (keep_intermediates, which a "
                          f"gradient through the loop turns on) needs {self.label} to keep one "
                          f"shape across iterations; it had {list(buffer.shape[1:])}, then "
                          f"{list(shape)}")
        elif self.count == len(buffer):
            grown = self.xp.empty((2 * len(buffer), *buffer.shape[1:]), dtype=buffer.dtype)
            grown[:self.count] = buffer
            buffer = self.buffer = grown
        buffer[self.count] = value
        self.count += 1

    def rows(self, shape: tuple, dtype: Any) -> Any:
        """The history: (count, *shape); of no iterations, empty of the given row shape."""
        if self.buffer is None:
            return self.xp.empty((0, *shape), dtype=dtype)
        return self.buffer[:self.count]


def _dtype(value: Any) -> Any:
    return value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype


def _on(device: Device, array: np.ndarray) -> Any:
    return array if device.is_host else device.from_host(array)


def _check_invariants(who: str, values: list, invariants: list, names: list, count: int) -> None:
    for value, shape, label in zip(values, invariants, names):
        if not fits(shape, np.shape(value)):
            when = "starts" if count == 0 else f"after iteration {count}"
            raise OpError(f"{who}: loop variable {label} has shape {list(np.shape(value))} "
                          f"({when}), which breaks its shape invariant {shape_text(shape)}")


def _stack_shapes(device: Device, history: list, rank: int) -> Any:
    """The shapes a loop variable had, one row per iteration: (count, rank) int64."""
    return _on(device, np.asarray(history, dtype=np.int64).reshape(len(history), rank))


def _not_prepared(ctx: Any, op: Operation, inputs: list) -> tuple:
    raise OpsdkError(f"{op.type} (node '{op.name}') runs only inside a compiled plan")


# Both nodes count as stateful: a sub-graph may assign variables or draw random numbers, and the
# plan must then neither fold nor merge the node (its `stateful` flag is per node type).
register_primitive(Primitive("cond", True, _not_prepared,
                             "runs then_branch or else_branch of its attrs on its inputs",
                             prepare=_prepare_cond))
register_primitive(Primitive("while_loop", True, _not_prepared,
                             "runs body while cond holds; outputs the final loop values",
                             prepare=_prepare_while))
