"""Compiling one node of a plan into a Step: a closure `run(values, ctx)` over value slots.

The closures are specialised by shape of call (two inputs and one output is the hot path of
elementwise chains) and each turns a failure into the error the user reads, naming the node and
op, so executors need no bookkeeping to know which node failed. (`try` costs nothing in
CPython 3.11+ until something raises.)
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
import sys
from operator import itemgetter
from typing import Any, Callable, Optional, Sequence

import numpy as np

from opsdk.registry.errors import OpError, OpsdkError
from opsdk.registry.spec import ABSENT
from opsdk.runtime.devices import Device
from opsdk.runtime.ir.context import in_context, node_label
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.primitives import PRIMITIVES, assign_fresh
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.kernels.buffers import owns_memory, take_all
from opsdk.runtime.kernels.call_cache import SHAPES_MAX, BoundedDict
from opsdk.runtime.kernels.choice import (KernelChoice, bind_kernel, direct_python_kernel,
                                          given_output_call, kernel_call, scalar_form, star_call)

RunFn = Callable[[list, Any], None]


class Step:
    """One node to run: `run(values, ctx)` fills the node's output slots."""

    __slots__ = ("op", "run")

    def __init__(self, op: Operation, run: RunFn):
        self.op = op
        self.run = run


def step_error(op: Operation, exc: BaseException) -> BaseException:
    """What a failing node raises, its context attached once (`ir.context`): errors of the
    runtime's own nodes (they already say what is wrong, e.g. an uninitialised variable) pass
    through; kernel failures get "<op> (node 'n'): "."""
    if isinstance(exc, OpsdkError) and op.spec is None:
        return exc
    return in_context(node_label(op.type, op.name), exc)


def make_step(op: Operation, choice: Optional[KernelChoice], device: Device,
              inputs: Sequence[Tensor], slot_of: dict, outs: tuple[int, ...],
              scalars: frozenset = frozenset(), options: Any = None,
              needed: Optional[tuple[bool, ...]] = None, fresh: frozenset = frozenset(),
              donate: Optional[int] = None, take: Optional[tuple] = None) -> Step:
    """The step of `op` on `device`, reading the slots of `inputs` and writing `outs`.

    `scalars`: the slots that only scalar steps read and nobody fetches, so a 0-d result
    written there may stay a NumPy scalar (fold.scalar_slots). `needed`: per output, whether
    some step reads it or the caller fetches it (None: all are). `fresh`: the slots holding
    arrays that a compiled kernel allocated in this step, which an assign may keep uncopied.
    `donate`: the index of an input whose buffer the kernel may write its output into (the
    memory planner's choice, compile/memory.py: the input's value dies here). `take`: (a pool
    key per output, the kernel as a function of (inputs, given outputs)) for a step that takes
    its output buffers from the session's pool (kernels/buffers.py)."""
    ins = tuple(slot_of[t] for t in inputs)
    if op.spec is None:
        if op.type == "assign" and ins[0] in fresh:
            return Step(op, _primitive_run(op, assign_fresh, ins, outs))
        prim = PRIMITIVES[op.type]
        run = prim.prepare(op, device, options) if prim.prepare is not None else prim.run
        return Step(op, _primitive_run(op, run, ins, outs))
    if needed is not None and not all(needed):
        whole = choice
        choice = partial_kernel(op, choice, needed)
        if choice is not whole:
            donate = None  # a kernel computing some outputs only takes no `out=`
    if op.attrs.get("sequence") and op.attrs.get("seed") and choice is not None \
            and choice.kind == "python":
        return Step(op, _sequence_run(op, choice, ins, outs))
    if op.absent:  # the kernel takes None for each absent input: the general call inserts them
        return _general_step(op, choice, inputs, ins, outs)
    form = scalar_form(op, choice)
    if form is not None:
        return Step(op, _scalar_run(op, form, ins, outs[0], outs[0] in scalars))
    open_shapes = any(t.shape is None or None in t.shape for t in inputs)
    if donate is not None:
        # The raw kernel where it needs nothing bound, else through the device's convention
        # (attrs bound: softmax's axis). A donation planned on declared shapes alone
        # (compile/memory.py) checks the actual shapes against the declaration first, as
        # _general_step's steps do.
        raw = direct_python_kernel(op.spec, choice, op.attrs, op.type_attrs)
        into = None if raw is not None else given_output_call(op.spec, choice, op.attrs, op.type_attrs)
        if raw is not None or into is not None:  # (the planner donates only where one is)
            open_inputs = tuple(i for i, t in enumerate(inputs) if t.shape is None or None in t.shape)
            return Step(op, _donating_run(op, raw, into, device.xp, ins, outs, donate, open_inputs))
    if not open_shapes:
        raw = direct_python_kernel(op.spec, choice, op.attrs, op.type_attrs)
        if take is not None:
            return Step(op, _pooled_run(op, take[1], ins, outs, take[0]))
        if raw is not None and len(ins) == 2:
            return Step(op, _direct_run2(op, raw, device.xp, ins, outs[0]))
    return _general_step(op, choice, inputs, ins, outs)


def _general_step(op: Operation, choice: Optional[KernelChoice], inputs: Sequence[Tensor],
                  ins: tuple, outs: tuple[int, ...]) -> Step:
    """The kernel through its device's calling convention, the actual shapes checked first where
    the static ones are open."""
    open_shapes = any(t.shape is None or None in t.shape for t in inputs)
    # One plain output: the kernel's own return value is the slot's, no tuple in between.
    # One declared output, not a list: an op declaring more (an empty list among them) may
    # still have one graph output, and its kernel returns a tuple all the same.
    single = len(op.spec.outputs) == 1 and not op.spec.outputs[0].is_list
    call = (kernel_call if single else bind_kernel)(op.spec, choice, op.attrs, op.type_attrs, op.absent)
    # The kernel called with no frame in between where the convention allows (a step of tiny
    # inputs is mostly such frames): one output, or a built kernel's glue, whose tuple of
    # outputs is generated from the declaration (a python kernel's is checked by bind_kernel).
    star = None
    if choice is not None and (single or (choice.kind == "cpu" and not any(
            t.is_list for t in op.spec.outputs))):
        star = star_call(op.spec, choice, op.attrs, op.type_attrs, op.absent)
    # A built cpu kernel's glue checks its inputs against the declaration itself, with the
    # wording of the registry's inference (docs/internals.md, The binding module), so its
    # error reads as the check's would: checking first only doubled the work.
    if open_shapes and not (choice is not None and choice.kind == "cpu" and choice.device.is_host):
        open_inputs = tuple(i for i, t in enumerate(inputs) if t.shape is None or None in t.shape)
        return Step(op, _checked_run(op, call, ins, outs, single, open_inputs, star))
    return Step(op, _kernel_run(op, call, ins, outs, single, star))


def _sequence_run(op: Operation, choice: KernelChoice, ins: tuple, outs: tuple[int, ...]) -> RunFn:
    """A seeded random node drawing the next values of its sequence at every execution: its
    python kernel is handed `rng=`, the session's generator for this node (kept in the
    variable store, so a new session starts the sequence again), drawn from under its lock."""
    spec, seed, device = op.spec, int(op.attrs["seed"]), choice.device

    def run(v: list, ctx: Any) -> None:
        rng, lock = ctx.variables.random_stream(op.name, seed)
        call = device.call(spec, "python", partial(choice.fn, rng=rng), op.attrs, op.type_attrs)
        try:
            with lock:
                result = call([v[i] for i in ins])
        except Exception as exc:
            raise step_error(op, exc) from exc
        if len(outs) == 1:
            v[outs[0]] = result
        else:
            for slot, value in zip(outs, result):
                v[slot] = value
    return run


def partial_kernel(op: Operation, choice: Optional[KernelChoice],
                   needed: tuple[bool, ...]) -> Optional[KernelChoice]:
    """The python kernel computing only the needed outputs, where it offers one: a kernel
    function may carry `partial(needed) -> kernel or None`, a kernel of the same signature that
    returns None for the outputs not needed (matmul_grad for a layer whose input needs no
    gradient computes x^T @ grad_z alone: half the work)."""
    if choice is None or choice.kind != "python" or len(op.outputs) != len(op.spec.outputs):
        return choice
    make = getattr(choice.fn, "partial", None)
    fn = make(needed) if make is not None else None
    return choice if fn is None else replace(choice, fn=fn)


def _direct_run2(op: Operation, fn: Callable, xp: Any, ins: tuple, o: int) -> RunFn:
    # The hot path of elementwise binary ops: one closure, then the kernel itself.
    a, b = ins

    def run(v: list, ctx: Any) -> None:
        try:
            v[o] = fn(xp, v[a], v[b])
        except Exception as exc:
            raise step_error(op, exc) from exc
    return run


def _donating_run(op: Operation, fn: Optional[Callable], into: Optional[Callable], xp: Any,
                  ins: tuple, outs: tuple, d: int, open_inputs: tuple[int, ...] = ()) -> RunFn:
    """A python kernel handed `out=` (for its op's one output, or for the one of several that
    declares `inplace`, the kernel returning them all): the buffer of input `d`, when this step
    holds the only reference to it (the slot list, and nothing else: no view, no fetch, no
    variable) and it is a writable array of its own. Otherwise the kernel allocates, as always.
    `fn` is the raw kernel, called `fn(xp, *inputs, out=)`, or None and `into(inputs, given
    outputs)` the kernel with its attrs bound (kernels.choice.given_output_call). With
    `open_inputs` (inputs whose static shape is open), their actual shapes are checked against
    the declaration first (as _checked_run does), which makes the output's shape the donor's."""
    slot, several = ins[d], len(outs) > 1
    o = outs[0]
    refs = sys.getrefcount
    ndarray = np.ndarray
    gather = _gatherer(ins)
    check = _shape_check(op, open_inputs) if open_inputs else None

    def run(v: list, ctx: Any) -> None:
        buf = v[slot]
        try:
            if check is not None:
                check(gather(v))  # (the tuple is gone before the reference count below)
            given = (type(buf) is ndarray and (buf.base is None or owns_memory(buf))
                     and buf.flags.writeable and refs(buf) == 3)  # v's entry, `buf`, refs' argument
            if fn is None:
                result = into(gather(v), (buf,) if given else ())
            elif given:
                result = fn(xp, *[v[i] for i in ins], out=buf)
            else:
                result = fn(xp, *[v[i] for i in ins])
        except Exception as exc:
            raise step_error(op, exc) from exc
        if several:
            for slot_out, value in zip(outs, result):
                v[slot_out] = value
        else:
            v[o] = result
    return run


def _pooled_run(op: Operation, into: Callable, ins: tuple, outs: tuple, keys: tuple) -> RunFn:
    """A kernel handed output buffers from the session's pool (`ctx.buffers`): a dead value of
    the same (device, dtype, shape) that nothing else holds; where the pool has none, the
    kernel allocates."""
    gather = _gatherer(ins)
    if len(outs) == 1:
        (o,), (key,) = outs, keys

        def run1(v: list, ctx: Any) -> None:
            pool = ctx.buffers
            buf = None if pool is None else pool.take(key)
            try:
                v[o] = into(gather(v), () if buf is None else (buf,))
            except Exception as exc:
                raise step_error(op, exc) from exc
        return run1

    def run(v: list, ctx: Any) -> None:
        try:
            results = into(gather(v), take_all(ctx.buffers, keys))
        except Exception as exc:
            raise step_error(op, exc) from exc
        for slot, value in zip(outs, results):
            v[slot] = value
    return run


def _scalar_run(op: Operation, form: Callable, ins: tuple, o: int, keep_scalar: bool) -> RunFn:
    """A 0-d float node computed by its kernel's `scalar_form` (an operator on NumPy scalars,
    ~0.1 us against ~2 us for a ufunc call on 0-d arrays). The result is a NumPy scalar; it
    becomes a 0-d array, as the kernel would return, unless the plan allows keeping it."""
    if len(ins) == 2 and keep_scalar:
        a, b = ins

        def run2(v: list, ctx: Any) -> None:
            try:
                v[o] = form(v[a], v[b])
            except Exception as exc:
                raise step_error(op, exc) from exc
        return run2

    def run(v: list, ctx: Any) -> None:
        try:
            value = form(*[v[i] for i in ins])
            v[o] = value if keep_scalar else np.asarray(value)
        except Exception as exc:
            raise step_error(op, exc) from exc
    return run


def _primitive_run(op: Operation, prim: Callable, ins: tuple, outs: tuple) -> RunFn:
    def run(v: list, ctx: Any) -> None:
        try:
            results = prim(ctx, op, [v[i] for i in ins])
        except Exception as exc:
            raise step_error(op, exc) from exc
        for slot, value in zip(outs, results):
            v[slot] = value
    return run


def _kernel_run(op: Operation, call: Callable, ins: tuple, outs: tuple, single: bool,
                star: Optional[tuple[Callable, bool]] = None) -> RunFn:
    gather = _gatherer(ins)
    if star is not None:
        return _star_run(op, call, star, gather, outs, single)
    if single:
        (o,) = outs

        def run1(v: list, ctx: Any) -> None:
            try:
                v[o] = call(gather(v))
            except Exception as exc:
                raise step_error(op, exc) from exc
        return run1

    def run(v: list, ctx: Any) -> None:
        try:
            results = call(gather(v))
        except Exception as exc:
            raise step_error(op, exc) from exc
        for slot, value in zip(outs, results):
            v[slot] = value
    return run


def _star_run(op: Operation, call: Callable, star: tuple[Callable, bool], gather: Callable,
              outs: tuple, single: bool) -> RunFn:
    """_kernel_run calling the kernel as `f(*inputs)` (kernels.choice.star_call). With `retry`,
    a ValueError or TypeError is retried through `call`, the device's convention, which copies
    what the kernel refused (a strided view) or raises the kernel's own error again."""
    f, retry = star
    if single and not retry:
        (o,) = outs

        def run1(v: list, ctx: Any) -> None:
            try:
                v[o] = f(*gather(v))
            except Exception as exc:
                raise step_error(op, exc) from exc
        return run1
    if single:
        (o,) = outs

        def run1_retried(v: list, ctx: Any) -> None:
            values = gather(v)
            try:
                try:
                    v[o] = f(*values)
                except (ValueError, TypeError):
                    v[o] = call(values)
            except Exception as exc:
                raise step_error(op, exc) from exc
        return run1_retried

    # several outputs: a built kernel's glue (_general_step), always retried
    def run(v: list, ctx: Any) -> None:
        values = gather(v)
        try:
            try:
                results = f(*values)
            except (ValueError, TypeError):
                results = call(values)
        except Exception as exc:
            raise step_error(op, exc) from exc
        for slot, value in zip(outs, results):
            v[slot] = value
    return run


def _gatherer(ins: tuple) -> Callable[[list], Sequence]:
    """The input values of a step from the slot list, as a sequence (itemgetter: no frame)."""
    if len(ins) >= 2:
        return itemgetter(*ins)
    if len(ins) == 1:
        (i,) = ins
        return lambda v: (v[i],)
    return lambda v: ()


def _checked_run(op: Operation, call: Callable, ins: tuple, outs: tuple, single: bool,
                 open_inputs: tuple[int, ...],
                 star: Optional[tuple[Callable, bool]] = None) -> RunFn:
    """A step that checks the actual shapes against the declaration before the kernel (only
    for nodes whose static shapes were not fully known and whose kernel is not a built cpu
    kernel, which checks in its glue).

    Inputs whose (shape, dtype) signature passed before need no new check: the answer depends
    on nothing else, since the node's attrs are fixed. So a step repeated on the same shapes
    pays one dict lookup; a new signature runs `infer_outputs` (and joins the passed ones only
    if it passes). The signature covers the inputs of open static shape (`open_inputs`, by
    position) alone: the others hold their static shape and dtype at run time (a feed is held
    to it, a kernel's output is)."""
    gather = _gatherer(ins)
    if single and len(open_inputs) == 1:
        direct = None if star is None or star[1] else star[0]  # (nothing here is retried)
        return _checked_run_one(op, call, ins, outs[0], ins[open_inputs[0]],
                                BoundedDict(SHAPES_MAX), direct)
    check = _shape_check(op, open_inputs)

    def run(v: list, ctx: Any) -> None:
        values = gather(v)
        try:
            check(values)
            results = call(values)
        except Exception as exc:
            raise step_error(op, exc) from exc
        if single:
            v[outs[0]] = results
        else:
            for slot, value in zip(outs, results):
                v[slot] = value
    return run


def _checked_run_one(op: Operation, call: Callable, ins: tuple, o: int, slot: int,
                     passed: BoundedDict, star: Optional[Callable] = None) -> RunFn:
    """_checked_run of one output and one open input (in `slot`), its signature built inline:
    a reduction's or a gradient's step on a batch of unknown size. `star`: the kernel as
    `star(*inputs)`, called instead of `call(inputs)` (no frame in between)."""
    seen = passed.data
    gather = _gatherer(ins)
    if star is None:  # (a kernel whose inputs the convention regroups: one frame more)
        star = lambda *values: call(values)  # noqa: E731

    def run(v: list, ctx: Any) -> None:
        x = v[slot]
        values = gather(v)
        try:
            try:
                signature = (x.shape, x.dtype)
            except AttributeError:  # a plain Python value: checked every time, not remembered
                signature = None
            if signature is None or signature not in seen:
                _admit(op, passed, signature, values)
            v[o] = star(*values)
        except Exception as exc:
            raise step_error(op, exc) from exc
    return run


def _shape_check(op: Operation, open_inputs: tuple[int, ...]) -> Callable[[Sequence], None]:
    """_checked_run's check, as a function of a step's input values: raises where the actual
    shapes break the declaration, and remembers each signature that passed."""
    passed = BoundedDict(SHAPES_MAX)
    seen = passed.data
    signature_of = _signature(open_inputs)

    def check(values: Sequence) -> None:
        try:
            signature = signature_of(values)
        except AttributeError:  # a plain Python value: checked every time, not remembered
            signature = None
        if signature is None or signature not in seen:
            _admit(op, passed, signature, values)
    return check


def _admit(op: Operation, passed: BoundedDict, signature: Optional[tuple],
           values: Sequence) -> None:
    """Check inputs whose signature has not passed (None: no array, checked every time) and
    remember it once it passes."""
    _check_inputs(op, values)
    if signature is not None:
        passed.put(signature, None)


def _signature(open_inputs: tuple[int, ...]) -> Callable[[Sequence], tuple]:
    """The (shape, dtype) signature of the values at `open_inputs`, flat (one tuple, no list:
    it is built on every run of the step); AttributeError for a value that is no array."""
    if len(open_inputs) == 1:
        (i,) = open_inputs
        return lambda values: (values[i].shape, values[i].dtype)
    if len(open_inputs) == 2:
        i, j = open_inputs
        return lambda values: (values[i].shape, values[i].dtype, values[j].shape, values[j].dtype)
    return lambda values: tuple([(values[i].shape, values[i].dtype) for i in open_inputs])


def _check_inputs(op: Operation, values: Sequence) -> None:
    """`infer_outputs` over the actual values; its OpError renamed for the node."""
    from opsdk.registry import infer_outputs
    arrays = [v if hasattr(v, "shape") and hasattr(v, "dtype") else np.asarray(v) for v in values]
    groups = _input_groups(op)
    shapes = [ABSENT if g is None else [arrays[i].shape for i in g] if isinstance(g, list)
              else arrays[g].shape for g in groups]
    dtypes = [ABSENT if g is None else [arrays[i].dtype.name for i in g] if isinstance(g, list)
              else arrays[g].dtype.name for g in groups]
    try:
        infer_outputs(op.spec, shapes, dtypes, {**op.attrs, **op.type_attrs})
    except OpError as exc:
        raise in_context(node_label(op.type, op.name), exc) from None


def _input_groups(op: Operation) -> list:
    """Per declared input: the index of its flat input, a list of them for a list input, or None
    for an absent optional input."""
    groups: list = []
    i = 0
    for t in op.spec.inputs:
        if t.name in op.absent:
            groups.append(None)
        elif t.is_list:
            n = int(op.attrs[t.list_len])
            groups.append(list(range(i, i + n)))
            i += n
        else:
            groups.append(i)
            i += 1
    return groups
