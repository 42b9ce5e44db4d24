"""Compiling one node of a plan into a Step: a closure `run(values, ctx)` over value slots.

The closures are specialised by shape of call (two inputs and one output is the hot path of
elementwise chains) and each turns a failure into the error the user reads, naming the node and
op, so executors need no bookkeeping to know which node failed. (`try` costs nothing in
CPython 3.11+ until something raises.)
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from opsdk.registry.errors import OpError, OpsdkError

from .graph import Operation
from .kernels import KernelChoice, bind_kernel, direct_python_kernel, kernel_failure
from .primitives import PRIMITIVES

RunFn = Callable[[list, Any], None]


class Step:
    """One node to run: `run(values, ctx)` fills the node's output slots."""

    __slots__ = ("op", "run")

    def __init__(self, op: Operation, run: RunFn):
        self.op = op
        self.run = run


def step_error(op: Operation, exc: BaseException) -> BaseException:
    """What a failing node raises: errors of the runtime's own nodes (they already say what is
    wrong, e.g. an uninitialised variable) pass through; kernel failures get "<op> (node 'n'): "."""
    if isinstance(exc, OpsdkError) and (op.spec is None or f"(node '{op.name}')" in str(exc)):
        return exc
    return kernel_failure(f"{op.type} (node '{op.name}')", exc)


def make_step(op: Operation, choice: Optional[KernelChoice], slot_of: dict,
              outs: tuple[int, ...]) -> Step:
    """The step of `op`, reading its inputs' slots and writing `outs`."""
    ins = tuple(slot_of[t] for t in op.inputs)
    if op.spec is None:
        return Step(op, _primitive_run(op, ins, outs))
    open_shapes = any(t.shape is None or None in t.shape for t in op.inputs)
    if not open_shapes:
        raw = direct_python_kernel(op.spec, choice, op.attrs, op.type_attrs)
        if raw is not None and len(ins) == 2:
            return Step(op, _direct_run2(op, raw, ins, outs[0]))
    call = bind_kernel(op.spec, choice, op.attrs, op.type_attrs)
    if open_shapes:
        call = _checked_call(op, call)
    return Step(op, _kernel_run(op, call, ins, outs))


def _direct_run2(op: Operation, fn: Callable, ins: tuple, o: int) -> RunFn:
    # The hot path of elementwise binary ops: one closure, then the kernel itself.
    a, b = ins

    def run(v: list, ctx: Any) -> None:
        try:
            v[o] = fn(np, v[a], v[b])
        except Exception as exc:
            raise step_error(op, exc) from exc
    return run


def _primitive_run(op: Operation, ins: tuple, outs: tuple) -> RunFn:
    prim = PRIMITIVES[op.type].run

    def run(v: list, ctx: Any) -> None:
        try:
            results = prim(ctx, op, [v[i] for i in ins])
        except Exception as exc:
            raise step_error(op, exc) from exc
        for slot, value in zip(outs, results):
            v[slot] = value
    return run


def _kernel_run(op: Operation, call: Callable, ins: tuple, outs: tuple) -> RunFn:
    if len(outs) == 1:
        (o,) = outs

        def run1(v: list, ctx: Any) -> None:
            try:
                v[o] = call([v[i] for i in ins])[0]
            except Exception as exc:
                raise step_error(op, exc) from exc
        return run1

    def run(v: list, ctx: Any) -> None:
        try:
            results = call([v[i] for i in ins])
        except Exception as exc:
            raise step_error(op, exc) from exc
        for slot, value in zip(outs, results):
            v[slot] = value
    return run


def _checked_call(op: Operation, call: Callable) -> Callable:
    """Check the actual shapes against the declaration before the kernel (only for nodes whose
    static shapes were not fully known; built kernels check in their glue too)."""
    from opsdk.registry import infer_outputs
    spec, attrs = op.spec, {**op.attrs, **op.type_attrs}
    groups = _input_groups(op)

    def checked(values: Sequence) -> tuple:
        arrays = [np.asarray(v) for v in values]
        shapes = [[arrays[i].shape for i in g] if isinstance(g, list) else arrays[g].shape
                  for g in groups]
        dtypes = [[arrays[i].dtype.name for i in g] if isinstance(g, list) else arrays[g].dtype.name
                  for g in groups]
        try:
            infer_outputs(spec, shapes, dtypes, attrs)
        except OpError as exc:
            text = str(exc)
            text = text[len(spec.name) + 2:] if text.startswith(f"{spec.name}: ") else text
            raise OpError(f"{op.type} (node '{op.name}'): {text}") from None
        return call(values)
    return checked


def _input_groups(op: Operation) -> list:
    """Per declared input: the index of its flat input, or a list of them for a list input."""
    groups: list = []
    i = 0
    for t in op.spec.inputs:
        if t.is_list:
            n = int(op.attrs[t.list_len])
            groups.append(list(range(i, i + n)))
            i += n
        else:
            groups.append(i)
            i += 1
    return groups
