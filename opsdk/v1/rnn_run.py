"""Running recurrent cells (rnn.py) over time, as TF1 does: `static_rnn` (unrolled over a Python
list), `dynamic_rnn` (opsdk's differentiable `while_loop` over a number of steps known only at
run time), their bidirectional forms, and `sequence_length` for all four.

`sequence_length` follows TensorFlow: at step t an example with length <= t keeps its state and
outputs zeros, so the final state is the one after its last valid step. The backward direction
of a bidirectional RNN runs the steps from last to first under the same mask: each example's
valid steps are then read in reverse, which is what TensorFlow gets by reversing each sequence
within its length, running forward and reversing the outputs back.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.control_flow.builders import loop_intermediates, with_final
from opsdk.v1.tensors import convert_to_tensor as _t, op_seed


def _cell_scope(cell: Any) -> str:
    return getattr(cell, "name", None) or getattr(cell, "_default_name", "multi_rnn_cell")


def _depth(who: str, x: Any) -> int:
    if x.shape is None or x.shape[-1] is None:
        raise OpsdkError(f"{who}: the last dim (the depth) of the inputs must be known when the "
                         f"graph is built, got shape {x.shape}")
    return int(x.shape[-1])


def _zero_like_batch(cell: Any, x: Any) -> Any:
    """The cell's zero state with x's (maybe unknown) batch size: x @ zeros([depth, units])."""
    depth = int(x.shape[-1])

    def zeros(units: int) -> Any:
        return _ops.matmul(x, _ops.zeros(shape=[depth, units], dtype=x.dtype))
    return _map_sizes(cell.state_size, zeros)


def _map_sizes(size: Any, fn: Any) -> Any:
    if isinstance(size, tuple):
        parts = [_map_sizes(s, fn) for s in size]
        return type(size)(*parts) if hasattr(size, "_fields") else tuple(parts)
    return fn(size)


def _flat(state: Any) -> list:
    if isinstance(state, tuple):
        return [t for s in state for t in _flat(s)]
    return [state]


def _pack(like: Any, flat: list) -> Any:
    if isinstance(like, tuple):
        parts, i = [], 0
        for s in like:
            n = len(_flat(s))
            parts.append(_pack(s, flat[i:i + n]))
            i += n
        return type(like)(*parts) if hasattr(like, "_fields") else tuple(parts)
    return flat[0]


# ------------------------------------------------------------------------- sequence lengths
def _lengths(who: str, sequence_length: Any) -> Any:
    if sequence_length is None:
        return None
    lengths = _t(sequence_length)
    if lengths.dtype not in ("int32", "int64"):
        raise OpsdkError(f"{who}: sequence_length must be int32 or int64 (one length per "
                         f"example), got {lengths.dtype}")
    if lengths.shape is not None and len(lengths.shape) != 1:
        raise OpsdkError(f"{who}: sequence_length must be a vector [batch], got shape "
                         f"{lengths.shape}")
    return lengths


def _masked(lengths: Any, t: Any, out: Any, new: Any, old: Any) -> tuple:
    """Step t's (output, state) for examples still running (t < length), (zeros, old state) for
    the others. m * a + (1 - m) * b with m in {0, 1} is exactly a or b (finite values)."""
    if lengths is None:
        return out, new
    if not isinstance(t, opsdk.Tensor):
        t = opsdk.constant(np.asarray(t, dtype=lengths.dtype))
    elif t.dtype != lengths.dtype:
        t = _ops.cast(t, dtype=lengths.dtype)
    live = _ops.reshape(_ops.cast(_ops.less(t, lengths), dtype=out.dtype), shape=[-1, 1])
    dead = 1.0 - live
    kept = [live * n + dead * o for n, o in zip(_flat(new), _flat(old))]
    return out * live, _pack(new, kept)


# ------------------------------------------------------------------------------- static_rnn
def _static_run(who: str, cell: Any, inputs: list, initial_state: Any, lengths: Any,
                scope: str, reverse: bool = False) -> tuple:
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise OpsdkError(f"{who}: inputs must be a non-empty list of [batch, depth] tensors")
    xs = [_t(x) for x in inputs]
    cell.build(_depth(who, xs[0]), scope)
    state = initial_state if initial_state is not None else _zero_like_batch(cell, xs[0])
    outputs: list = [None] * len(xs)
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for t in order:
        out, new = cell.step(xs[t], state)
        outputs[t], state = _masked(lengths, t, out, new, state)
    return outputs, state


def static_rnn(cell: Any, inputs: list, initial_state: Any = None, dtype: Any = None,
               sequence_length: Any = None, scope: Optional[str] = None) -> tuple:
    """The cell applied to each tensor of `inputs` in turn: (outputs, final state)."""
    lengths = _lengths("static_rnn", sequence_length)
    return _static_run("static_rnn", cell, inputs, initial_state, lengths,
                       scope or "rnn/" + _cell_scope(cell))


def static_bidirectional_rnn(cell_fw: Any, cell_bw: Any, inputs: list,
                             initial_state_fw: Any = None, initial_state_bw: Any = None,
                             dtype: Any = None, sequence_length: Any = None,
                             scope: Optional[str] = None) -> tuple:
    """(outputs, state_fw, state_bw): outputs[t] is the forward cell's output at t and the
    backward cell's (run from the last step to the first) side by side in the last axis.
    Variables under `<scope or bidirectional_rnn>/fw/<cell>` and `.../bw/<cell>`, as TF's."""
    who = "static_bidirectional_rnn"
    lengths = _lengths(who, sequence_length)
    top = scope or "bidirectional_rnn"
    fw, state_fw = _static_run(who, cell_fw, inputs, initial_state_fw, lengths,
                               f"{top}/fw/{_cell_scope(cell_fw)}")
    bw, state_bw = _static_run(who, cell_bw, inputs, initial_state_bw, lengths,
                               f"{top}/bw/{_cell_scope(cell_bw)}", reverse=True)
    outputs = [_ops.concat([f, b], axis=1) for f, b in zip(fw, bw)]
    return outputs, state_fw, state_bw


# ------------------------------------------------------------------- random values in the loop
class _StepNoise:
    """Dropout noise for the steps of one dynamic_rnn loop. The loop's gradient runs the body
    again on each step's recorded inputs and cannot draw the same random values twice, so each
    [batch, k] draw in the body is the slice at step t of a [time, batch, k] draw made outside
    the loop (a new one at every run, as TF's per-step masks are)."""

    def __init__(self, steps: Any, t: Any):
        self.steps, self.t = steps, t

    def draw(self, x: Any, seed: Optional[int]) -> Optional[Any]:
        shape = x.shape
        if shape is None or len(shape) != 2 or shape[1] is None or x.dtype != self.steps.dtype:
            return None  # not a [batch, k] step value: drawn in the body (no gradient through it)
        with self.steps.graph.as_default(), opsdk.control_dependencies(None):
            like = _ops.add(_ops.slice(_ops.zeros_like(self.steps), begin=[0, 0, 0],
                                       size=[-1, -1, 1]),
                            _ops.zeros(shape=[int(x.shape[1])], dtype=x.dtype))
            every_step = _ops.random_uniform_like(like, seed=op_seed(seed), sequence=True)
        return _ops.gather(every_step, self.t)


_NOISE: contextvars.ContextVar = contextvars.ContextVar("opsdk_v1_step_noise", default=None)


@contextlib.contextmanager
def _drawing_outside(steps: Any, t: Any) -> Iterator[None]:
    token = _NOISE.set(_StepNoise(steps, t))
    try:
        yield
    finally:
        _NOISE.reset(token)


def step_noise(x: Any, seed: Optional[int]) -> Optional[Any]:
    """Uniform noise like x for the dynamic_rnn step being built, or None outside one."""
    source = _NOISE.get()
    return None if source is None else source.draw(x, seed)


# ------------------------------------------------------------------------------ dynamic_rnn
def _dynamic_run(who: str, cell: Any, steps: Any, initial_state: Any, lengths: Any, scope: str,
                 reverse: bool = False) -> tuple:
    """The cell over steps [time, batch, depth] by a while_loop: (outputs [time, batch, units],
    final state). The number of steps is read from steps at run time."""
    depth = _depth(who, steps)
    cell.build(depth, scope)
    zero = opsdk.constant(np.int32(0))
    first = _ops.gather(steps, zero)
    state = initial_state if initial_state is not None else _zero_like_batch(cell, first)
    units = int(cell.output_size)
    count = _ops.gather(_ops.shape(steps), zero)
    # Each step's output is a loop value; the loop's recorded history of it (h[i]: the value
    # iteration i received, so the output of step i-1) holds them all, a gradient flowing back
    # through it. So a step costs its own output, not a pass over a [time, batch, units] sum.
    # The first value is zeros shaped as an output: [batch, units] from the first step.
    out0 = _ops.add(_ops.slice(_ops.zeros_like(first), begin=[0, 0], size=[-1, 1]),
                    _ops.zeros(shape=[units], dtype=steps.dtype))

    def body(i, out, *flat):
        t = count - 1 - i if reverse else i
        old = _pack(state, list(flat))
        with _drawing_outside(steps, t):
            out, new = cell.step(_ops.gather(steps, t), old)
        out, new = _masked(lengths, t, out, new, old)
        return (i + 1, _ops.reshape(out, shape=[-1, units]), *_flat(new))

    _, last, *final = opsdk.while_loop(lambda i, *rest: _ops.less(i, count), body,
                                       [zero, out0, *_flat(state)], keep_intermediates=True)
    _, histories = loop_intermediates(last.op)
    # [output 0, ..., output count-1]: what each iteration computed (none at all for no steps)
    outputs = with_final(histories[1], _ops.reshape(last, shape=[-1, units]), computed=True)
    if reverse:  # iteration i ran step count-1-i
        outputs = _ops.gather(outputs, _ops.arange(count - 1, opsdk.constant(np.int32(-1)),
                                                   opsdk.constant(np.int32(-1))))
    time, batch = steps.shape[0], first.shape[0] if first.shape is not None else None
    if time is not None:  # the sizes known when the graph is built stay known
        outputs = _ops.reshape(outputs, shape=[time, -1 if batch is None else batch, units])
    return outputs, _pack(state, final)


def _time_major(who: str, inputs: Any, time_major: bool) -> Any:
    x = _t(inputs)
    if x.shape is not None and len(x.shape) != 3:
        raise OpsdkError(f"{who}: inputs must be [batch, time, depth] (or [time, batch, depth] "
                         f"with time_major=True), got shape {x.shape}")
    return x if time_major else _ops.transpose(x, perm=[1, 0, 2])


def dynamic_rnn(cell: Any, inputs: Any, sequence_length: Any = None, initial_state: Any = None,
                dtype: Any = None, parallel_iterations: Any = None, swap_memory: bool = False,
                time_major: bool = False, scope: Optional[str] = None) -> tuple:
    """The cell run over the time axis of `inputs` ([batch, time, depth]) by a while_loop:
    (outputs [batch, time, units], final state). The number of steps may be unknown until the
    graph runs."""
    who = "dynamic_rnn"
    lengths = _lengths(who, sequence_length)
    steps = _time_major(who, inputs, time_major)
    outputs, state = _dynamic_run(who, cell, steps, initial_state, lengths,
                                  scope or "rnn/" + _cell_scope(cell))
    return (outputs if time_major else _ops.transpose(outputs, perm=[1, 0, 2])), state


def bidirectional_dynamic_rnn(cell_fw: Any, cell_bw: Any, inputs: Any,
                              sequence_length: Any = None, initial_state_fw: Any = None,
                              initial_state_bw: Any = None, dtype: Any = None,
                              parallel_iterations: Any = None, swap_memory: bool = False,
                              time_major: bool = False, scope: Optional[str] = None) -> tuple:
    """((outputs_fw, outputs_bw), (state_fw, state_bw)), each output shaped like dynamic_rnn's;
    the backward cell reads each sequence from its last valid step to its first."""
    who = "bidirectional_dynamic_rnn"
    lengths = _lengths(who, sequence_length)
    steps = _time_major(who, inputs, time_major)
    top = scope or "bidirectional_rnn"
    fw, state_fw = _dynamic_run(who, cell_fw, steps, initial_state_fw, lengths,
                                f"{top}/fw/{_cell_scope(cell_fw)}")
    bw, state_bw = _dynamic_run(who, cell_bw, steps, initial_state_bw, lengths,
                                f"{top}/bw/{_cell_scope(cell_bw)}", reverse=True)
    if not time_major:
        fw, bw = (_ops.transpose(o, perm=[1, 0, 2]) for o in (fw, bw))
    return (fw, bw), (state_fw, state_bw)


# ------------------------------------------------------------- stacked bidirectional layers
def _layers(who: str, cells_fw: Any, cells_bw: Any, states_fw: Any, states_bw: Any) -> list:
    if not cells_fw or not cells_bw or len(cells_fw) != len(cells_bw):
        raise OpsdkError(f"{who}: cells_fw and cells_bw must be non-empty lists of one length, "
                         f"got {len(cells_fw or [])} and {len(cells_bw or [])} cells")
    for name, states in (("initial_states_fw", states_fw), ("initial_states_bw", states_bw)):
        if states and len(states) != len(cells_fw):
            raise OpsdkError(f"{who}: {name} must have one state per layer "
                             f"({len(cells_fw)}), got {len(states)}")
    return [(i, fw, bw, states_fw[i] if states_fw else None, states_bw[i] if states_bw else None)
            for i, (fw, bw) in enumerate(zip(cells_fw, cells_bw))]


def stack_bidirectional_rnn(cells_fw: list, cells_bw: list, inputs: list,
                            initial_states_fw: Any = None, initial_states_bw: Any = None,
                            dtype: Any = None, sequence_length: Any = None,
                            scope: Optional[str] = None) -> tuple:
    """`tf.contrib.rnn.stack_bidirectional_rnn`: layers of static_bidirectional_rnn, each
    reading the one below's outputs: (outputs, states_fw, states_bw), a state per layer.
    Variables under `<scope or stack_bidirectional_rnn>/cell_<i>/bidirectional_rnn/...`."""
    who, outputs = "stack_bidirectional_rnn", inputs
    states_fw, states_bw = [], []
    for i, fw, bw, s_fw, s_bw in _layers(who, cells_fw, cells_bw, initial_states_fw,
                                         initial_states_bw):
        outputs, s_fw, s_bw = static_bidirectional_rnn(
            fw, bw, outputs, s_fw, s_bw, dtype, sequence_length,
            f"{scope or 'stack_bidirectional_rnn'}/cell_{i}/bidirectional_rnn")
        states_fw.append(s_fw)
        states_bw.append(s_bw)
    return outputs, tuple(states_fw), tuple(states_bw)


def stack_bidirectional_dynamic_rnn(cells_fw: list, cells_bw: list, inputs: Any,
                                    initial_states_fw: Any = None, initial_states_bw: Any = None,
                                    dtype: Any = None, sequence_length: Any = None,
                                    parallel_iterations: Any = None, time_major: bool = False,
                                    scope: Optional[str] = None) -> tuple:
    """`tf.contrib.rnn.stack_bidirectional_dynamic_rnn`: layers of bidirectional_dynamic_rnn,
    each reading the one below's two outputs side by side: (outputs, states_fw, states_bw)."""
    who, outputs = "stack_bidirectional_dynamic_rnn", inputs
    states_fw, states_bw = [], []
    for i, fw, bw, s_fw, s_bw in _layers(who, cells_fw, cells_bw, initial_states_fw,
                                         initial_states_bw):
        (out_fw, out_bw), (s_fw, s_bw) = bidirectional_dynamic_rnn(
            fw, bw, outputs, sequence_length, s_fw, s_bw, dtype, time_major=time_major,
            scope=f"{scope or 'stack_bidirectional_rnn'}/cell_{i}/bidirectional_rnn")
        outputs = _ops.concat([out_fw, out_bw], axis=2)
        states_fw.append(s_fw)
        states_bw.append(s_bw)
    return outputs, tuple(states_fw), tuple(states_bw)
