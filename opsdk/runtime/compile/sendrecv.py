"""`_send` and `_recv`: the two ends of an edge that crosses locations.

The partition pass cuts every such edge into a `_send` at the producer's location and a `_recv`
at the reader's; both carry the same attrs, from which each run builds the rendezvous key

    (step id, tensor name, send location, recv location, send incarnation)

A step's context holds the rendezvous (`ctx.rendezvous`, `ctx.step_id`): in one process the
partitions of a step meet in an in-process rendezvous (exec/rendezvous.py); on a cluster each task
has its own, and values between tasks travel through it. `_recv` delivers the value on its own
device (a copy from the sender's device, the work the copies between devices always did). A
crossing control edge is a `_send` with no input: it sends an empty marker once the node it stands
for has run, and the reader waits on the matching `_recv`.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from opsdk.registry.errors import OpError
from opsdk.runtime.devices import get_device
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.primitives import Primitive, register_primitive

SEND, RECV = "_send", "_recv"
KEY_ATTRS = ("tensor_name", "send_location", "recv_location", "send_incarnation")


def control_marker() -> np.ndarray:
    """What a control edge sends: an empty bool array."""
    return np.zeros((0,), np.bool_)


def key_of(op: Operation, step_id: int) -> tuple:
    """The rendezvous key of a `_send` or `_recv` node in step `step_id`."""
    a = op.attrs
    return (step_id, a["tensor_name"], a["send_location"], a["recv_location"],
            a["send_incarnation"])


def _prepare_send(op: Operation, device: Any, options: Any):
    a = op.attrs
    rest = (a["tensor_name"], a["send_location"], a["recv_location"], a["send_incarnation"])
    control = not op.inputs

    def run(ctx: Any, op: Operation, inputs: list) -> tuple:
        value = control_marker() if control else inputs[0]
        ctx.rendezvous.send((ctx.step_id, *rest), value)
        return ()
    return run


def _prepare_recv(op: Operation, device: Any, options: Any):
    a = op.attrs
    rest = (a["tensor_name"], a["send_location"], a["recv_location"], a["send_incarnation"])
    source = get_device(a["send_location"])
    out = op.outputs[0]
    dtype, shape = np.dtype(out.dtype), out.shape

    def run(ctx: Any, op: Operation, inputs: list) -> tuple:
        value = ctx.rendezvous.recv((ctx.step_id, *rest), ctx.token)
        if getattr(value, "dtype", None) != dtype or (shape is not None and (
                len(value.shape) != len(shape)
                or any(d is not None and d != s for d, s in zip(shape, value.shape)))):
            raise OpError(f"_recv (node '{op.name}'): received '{a['tensor_name']}' as "
                          f"{getattr(value, 'dtype', type(value).__name__)} "
                          f"{list(getattr(value, 'shape', ()))}, but the graph says {dtype.name} "
                          f"{list(shape) if shape is not None else 'of any shape'}")
        return (device.copy_from(value, source),)
    return run


def _check(attrs: dict, outputs: list) -> Optional[str]:
    for name in KEY_ATTRS:
        want = int if name == "send_incarnation" else str
        if type(attrs.get(name)) is not want:
            return f"attr '{name}' must be a {want.__name__}"
    return None


def _check_recv(attrs: dict, outputs: list) -> Optional[str]:
    if len(outputs) != 1:
        return f"it has {len(outputs)} outputs; a _recv has one"
    return _check(attrs, outputs)


def _check_send(attrs: dict, outputs: list) -> Optional[str]:
    if outputs:
        return "a _send has no outputs"
    return _check(attrs, outputs)


register_primitive(Primitive(SEND, True, None, "sends its input to the matching _recv",
                             prepare=_prepare_send, check=_check_send))
register_primitive(Primitive(RECV, True, None, "receives the value of the matching _send",
                             prepare=_prepare_recv, check=_check_recv))


def device_feeds(ops: list[Operation], reads: list, feed_slots: tuple, fetched: set) -> dict:
    """Fed slots read only by `_send`s to one non-host device of this process, and not fetched:
    an array of that device fed there needs no trip through the host (each `_recv` takes a value
    that already lives on its device as it is). Slot -> that device."""
    readers: dict[int, list[Operation]] = {}
    for op, slots_read in zip(ops, reads):
        for s in slots_read:
            readers.setdefault(s, []).append(op)
    out = {}
    for _, slot in feed_slots:
        ops_reading = readers.get(slot, [])
        if slot in fetched or not ops_reading or any(op.type != SEND for op in ops_reading):
            continue
        targets = {op.attrs["recv_location"] for op in ops_reading}
        if len(targets) == 1:
            device = get_device(targets.pop())
            if not device.is_host:
                out[slot] = device
    return out
