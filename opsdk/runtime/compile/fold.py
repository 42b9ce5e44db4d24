"""The fold/CSE pass: constant folding and common-subexpression elimination, as a rewrite of the
program's nodes.

One walk in topological order. A node whose inputs are all constants and that is not stateful is
folded: its kernel runs once, here, on the device it was placed on, and each of its outputs
becomes a `const` node of this program (same location, the value as the kernel gave it, read-only
as every constant: each step shares it). So is a node whose python kernel reads only its inputs'
shapes and dtypes (`fn.shape_only`: ones_like, zeros_like, shape) when those are static, up to
`_SHAPE_FOLD_BYTES` of output: the seed `ones_like(loss)` of every gradient graph is a constant,
not a step. A node
with the same op, inputs, attrs, type attrs, location and control inputs as an earlier one is
merged into it (common-subexpression elimination); small constants of equal value are merged
too. Readers are rewired to what stays (`Program.inputs`, `Program.controls`, `Program.fetched`);
a fed tensor keeps its readers, which read the fed value. Stateful nodes (variables, assigns,
randomness) are never folded or merged.

The pass numbers nothing: value slots belong to lowering (compile/plan.py), so later passes may
add and remove nodes.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

import numpy as np

from opsdk.runtime.compile.program import Program
from opsdk.runtime.devices import get_device
from opsdk.runtime.ir.context import in_context, node_label
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.primitives import PRIMITIVES
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.kernels.choice import bind_kernel

_SMALL_CONST = 4096  # bytes: constants up to this size are merged by value
# bytes: a shape-only node (ones_like, zeros_like) folds up to this much output. The plan holds
# a folded value for its life; past this size the fill costs little beside the node's own work.
_SHAPE_FOLD_BYTES = 1 << 16


class _Rewrite:
    """What the walk has decided so far: tensors replaced, nodes merged or folded away."""

    def __init__(self, program: Program):
        self.program = program
        self.tensor: dict[Tensor, Tensor] = {}  # replaced tensor -> the tensor read instead
        self.node: dict[Operation, Optional[Operation]] = {}  # merged -> kept; folded -> None
        self.seen: dict[Any, Operation] = {}
        self.kept: list[Operation] = []

    def rewire(self, op: Operation) -> None:
        """Point `op`'s inputs and control inputs at what stays."""
        p = self.program
        inputs = p.inputs_of(op)
        new = tuple(self.tensor.get(t, t) for t in inputs)
        if new != inputs:
            p.inputs[op] = new
        controls = p.controls_of(op)
        if any(c in self.node for c in controls):
            kept = (self.node.get(c, c) for c in controls)
            p.controls[op] = tuple(dict.fromkeys(c for c in kept if c is not None))

    def resolved(self, t: Tensor) -> Tensor:
        """The tensor read in `t`'s place once every decision so far is applied."""
        while t in self.tensor:
            t = self.tensor[t]
        return t

    def reads(self, op: Operation) -> tuple[Tensor, ...]:
        """What `op` reads, also for a node not visited yet (its inputs not yet rewired): a
        reader of a merged node's output reads the output of the node kept for it."""
        return tuple(self.resolved(t) for t in self.program.inputs_of(op))

    def fetched(self, t: Tensor) -> bool:
        return any(isinstance(e, Tensor) and self.resolved(e) is t for e in self.program.fetches)

    def replace(self, op: Operation, by: Optional[Operation], outputs: tuple[Tensor, ...]) -> None:
        for mine, theirs in zip(op.outputs, outputs):
            if mine not in self.program.feed_set:
                self.tensor[mine] = theirs
        self.node[op] = by


def fold_pass(program: Program) -> Program:
    """Fold and merge as the program's options say."""
    options = program.options
    fold_program(program, options.constant_folding, options.cse)
    program.note("fold_cse", f"folded: {', '.join(op.name for op in program.folded) or 'nothing'}")
    program.note("fold_cse", f"merged: {', '.join(op.name for op in program.merged) or 'nothing'}")
    if program.rewritten:
        program.note("fold_cse", "rewritten: " + ", ".join(
            f"{op.name} ({op.type}) -> {new.type}" for op, new in program.rewritten))
    return program


def fold_off(program: Program) -> Program:
    """The fold/CSE pass switched off: every node runs as written."""
    program.note("fold_cse", "off")
    return program


def fold_program(program: Program, fold: bool, cse: bool) -> None:
    """Walk the program's nodes once (see the module docstring); `program.ops` keeps what stays."""
    rw = _Rewrite(program)
    for op in program.ops:
        rw.rewire(op)
        if op.type == "const":
            _const(rw, op, cse)
            continue
        inputs = program.inputs_of(op)
        key = _cse_key(program, op, inputs) if cse and not op.stateful else None
        if key is not None and key in rw.seen:
            rw.replace(op, rw.seen[key], rw.seen[key].outputs)
            program.merged.append(op)
            continue
        if fold and _foldable(program, op, inputs):
            rw.replace(op, None, _fold(rw, op, inputs))
            program.folded.append(op)
            continue
        if fold and op.type in _REWRITES:
            rewrite = _REWRITES[op.type](rw, op, inputs)
            if rewrite is not None:
                new, stand_ins = rewrite
                rw.replace(op, new, stand_ins)
                program.rewritten.append((op, new))
                op = new
        rw.kept.append(op)
        if key is not None:
            rw.seen[key] = op
    for e in program.fetches:
        if isinstance(e, Tensor) and e in rw.tensor:
            program.fetched[e] = rw.tensor[e]
    program.ops = _without_dead_constants(program, rw.kept)


# pow(x, 2) and its gradient become square and square_grad, as TensorFlow's arithmetic
# optimizer rewrites Pow(x, 2) to Square: NumPy's power with a float exponent is a general pow per
# element, and square is an elementwise op the fuse pass joins with its neighbours (the TF1
# autoencoder's loss reduce_mean(pow(x - y, 2)) is then one kernel, its gradient another).
_SQUARES = {"pow": "square", "pow_grad": "square_grad"}

# A rewrite's result: the node standing for the one rewritten, and per output of that one the
# tensor its readers read instead (an unread output stays itself).
_Rewritten = tuple[Operation, tuple[Tensor, ...]]


def _as_square(rw: _Rewrite, op: Operation, inputs: tuple[Tensor, ...]) -> Optional[_Rewritten]:
    """The square (square_grad) node standing for `op`, a pow (pow_grad) whose exponent is a
    constant 2 of a single element that broadcasts to nothing larger than x (so the result has
    x's shape), where nobody reads pow_grad's gradient for the exponent; else None."""
    program = rw.program
    x, y = inputs[0], inputs[1]
    # A fed exponent is the fed value, whatever the constant holds.
    value = y.op.attrs.get("value") if y.op.type == "const" and y not in program.feed_set else None
    # A NumPy array or scalar, or a device's array (a constant folded on a GPU): duck-typed.
    if (value is None or x.shape is None or y.dtype != x.dtype or not hasattr(value, "shape")
            or value.size != 1 or value.ndim > len(x.shape) or float(value.reshape(())) != 2.0):
        return None
    if op.type == "pow_grad" and (len(op.outputs) != 2 or _read(rw, op.outputs[1])):
        return None
    args = (x,) if op.type == "pow" else (x, inputs[3])
    node = _standing_for(program, op, _SQUARES[op.type], args, {}, {}, op.outputs[:1])
    return node, node.outputs + op.outputs[1:]  # the exponent's gradient: unread


def _filter_only(rw: _Rewrite, op: Operation, inputs: tuple[Tensor, ...]) -> Optional[_Rewritten]:
    """The conv2d_grad_filter node standing for `op`, a conv2d_grad whose grad_x nobody reads
    (a first layer's: its input needs no gradient), as TensorFlow's graph holds
    Conv2DBackpropFilter alone there; else None. The input gradient is half the work."""
    if len(op.outputs) != 2 or _read(rw, op.outputs[0]):
        return None
    node = _standing_for(rw.program, op, "conv2d_grad_filter", inputs, dict(op.attrs),
                         dict(op.type_attrs), op.outputs[1:])
    return node, op.outputs[:1] + node.outputs  # grad_x: unread


# Nodes that may read the convolution's output and the biased sum that conv2d_bias replaces,
# by the input they read it as: add's and bias_add's gradients read their inputs' shapes alone,
# and relu_grad(x, grad_y) reads where x > 0, which is where relu(x) > 0.
_SHAPE_READERS = {"add_grad": (0, 1), "bias_add_grad": (0,)}
_SIGN_READERS = {"relu_grad": (0,)}


def _conv_bias_relu(rw: _Rewrite, op: Operation, inputs: tuple[Tensor, ...]) -> Optional[_Rewritten]:
    """The conv2d_bias node standing for `op`, a relu of conv2d(x, filter) + bias (add or
    bias_add, bias of shape [o]), as TensorFlow's grappler fuses Conv2D, BiasAdd and Relu; else
    None. Only where nothing else reads the convolution or the sum: their gradients' reads of
    shapes and signs then read the relu's output, equal in both. The conv2d and add nodes,
    visited already, leave the program."""
    program = rw.program
    (a,) = inputs
    add = a.op
    if add.type not in ("add", "bias_add") or add not in rw.kept or a in program.feed_set:
        return None
    pair = program.inputs_of(add)
    convs = [i for i, t in enumerate(pair) if t.op.type == "conv2d" and t.op in rw.kept]
    if len(convs) != 1 or (add.type == "bias_add" and convs[0] != 0):
        return None
    c, b = pair[convs[0]], pair[1 - convs[0]]
    conv = c.op
    if (c.shape is None or len(c.shape) != 4 or a.shape != c.shape or c.shape[3] is None
            or b.shape != (c.shape[3],) or not (c.dtype == b.dtype == a.dtype)
            or c in program.feed_set or len({program.device[n] for n in (conv, add, op)}) != 1
            or len({program.location[n] for n in (conv, add, op)}) != 1):
        return None
    if (not (_only_readers(rw, c, add, _SHAPE_READERS) and _only_readers(rw, a, op, _SIGN_READERS))
            or _waited_for(rw, (conv, add))):
        return None
    attrs = {k: conv.attrs[k] for k in ("stride_h", "stride_w", "same") if k in conv.attrs}
    node = _standing_for(program, op, "conv2d_bias", (program.inputs_of(conv)[0], program.inputs_of(conv)[1], b),
                         {**attrs, "relu": 1}, dict(conv.type_attrs), op.outputs)
    program.controls[node] = tuple(dict.fromkeys(
        program.controls_of(conv) + program.controls_of(add) + program.controls_of(op)))
    _absorb(rw, conv, node)
    _absorb(rw, add, node)
    return node, node.outputs


def _relu_into_pool(rw: _Rewrite, op: Operation, inputs: tuple[Tensor, ...]) -> Optional[_Rewritten]:
    """The max_pool_grad node (relu=1) standing for `op`, a relu_grad(r, max_pool_grad(r', y,
    grad_y)) where r' is r, or the relu of r: the gradient of max_pool(relu(.)) through both.
    A window's gradient lands where the window's maximum lies, so it survives relu_grad exactly
    when that maximum y is positive, which max_pool_grad checks per window, saving relu_grad's
    pass over grad_x; else None. Only where nothing else reads the pool's gradient."""
    program = rw.program
    r, g = inputs
    pool = g.op
    if pool.type != "max_pool_grad" or pool not in rw.kept or pool.attrs.get("relu", 0) or g in program.feed_set:
        return None
    x = program.inputs_of(pool)[0]
    if not (x is r or (x.op.type == "relu" and program.inputs_of(x.op)[0] is r)):
        return None
    if (not _only_readers(rw, g, op, {}) or program.device[pool] != program.device[op]
            or program.location[pool] != program.location[op] or _waited_for(rw, (pool,))):
        return None
    node = _standing_for(program, op, "max_pool_grad", program.inputs_of(pool), {**pool.attrs, "relu": 1},
                         dict(pool.type_attrs), op.outputs)
    program.controls[node] = tuple(dict.fromkeys(program.controls_of(pool) + program.controls_of(op)))
    _absorb(rw, pool, node)
    return node, node.outputs


def _bias_into_pool(rw: _Rewrite, op: Operation, inputs: tuple[Tensor, ...]) -> Optional[_Rewritten]:
    """The max_pool_grad_bias node standing for `op`, the gradient of a bias add (add_grad or
    bias_add_grad of an [n, h, w, c] value and a bias of [c]) whose grad_z is a max_pool_grad's
    result that nothing else reads: a conv layer's relu(conv2d(x, w) + b) before its max_pool.
    Its value's gradient is grad_z itself and the bias's is grad_z summed over n, h and w, which
    max_pool_grad_bias takes from each window's gradient as it writes it, saving the add
    gradient's pass over grad_z (0.2-0.5 ms a layer of the deep-MNIST CNN); else None."""
    program = rw.program
    g = inputs[2]
    pool = g.op
    if pool.type != "max_pool_grad" or pool not in rw.kept or g in program.feed_set:
        return None
    biases = [i for i in ((0, 1) if op.type == "add_grad" else (1,))
              if inputs[i].shape is not None and len(inputs[i].shape) == 1]
    if len(biases) != 1:
        return None
    b = biases[0]
    value, bias = inputs[1 - b], inputs[b]
    c = bias.shape[0]
    # The value's gradient is grad_z itself only where value + bias broadcasts to value's shape.
    if (not isinstance(c, int) or value.shape is None or len(value.shape) != 4
            or value.shape[3] != c or g.shape is None or len(g.shape) != 4 or g.shape[3] != c
            or not (value.dtype == bias.dtype == g.dtype) or not _read(rw, op.outputs[b])):
        return None
    if (not _only_readers(rw, g, op, {}) or program.device[pool] != program.device[op]
            or program.location[pool] != program.location[op] or _waited_for(rw, (pool,))):
        return None
    node = _standing_for(program, op, "max_pool_grad_bias", program.inputs_of(pool), dict(pool.attrs),
                         dict(pool.type_attrs), (g, op.outputs[b]))
    program.controls[node] = tuple(dict.fromkeys(program.controls_of(pool) + program.controls_of(op)))
    _absorb(rw, pool, node)
    grad_value, grad_bias = node.outputs
    return node, (grad_bias, grad_value) if b == 0 else (grad_value, grad_bias)


def _absorb(rw: _Rewrite, gone: Operation, node: Operation) -> None:
    """Take `gone`, a node of one output visited and kept already, out of the program: `node`
    (which computes what it fed on) stands for it, its output's readers read node's."""
    rw.kept.remove(gone)
    for key in [k for k, v in rw.seen.items() if v is gone]:
        del rw.seen[key]
    rw.replace(gone, node, (node.outputs[0],))
    rw.program.rewritten.append((gone, node))


def _only_readers(rw: _Rewrite, t: Tensor, reader: Operation, others: dict[str, tuple[int, ...]]) -> bool:
    """Whether nobody fetches `t` and every node reading it is `reader` or one of `others`'
    types reading it only as the inputs listed (a node not visited yet counts by what it will
    read: a merged twin's readers read `t` too)."""
    if rw.fetched(t):
        return False
    for op in rw.program.ops:
        if op is reader or op in rw.node:  # a node merged, folded or rewritten away reads nothing
            continue
        at = [i for i, u in enumerate(rw.reads(op)) if u is t]
        if at and not set(at) <= set(others.get(op.type, ())):
            return False
    return True


def _waited_for(rw: _Rewrite, nodes: tuple[Operation, ...]) -> bool:
    """Whether some node has a control input among `nodes` (or a node merged into one): a
    rewrite that removes them would leave it waiting for a node that is gone."""
    program = rw.program
    return any(rw.node.get(c, c) in nodes for op in program.ops if op not in rw.node
               for c in program.controls_of(op))


def _standing_for(program: Program, op: Operation, op_type: str, args: tuple[Tensor, ...],
                  attrs: dict, type_attrs: dict, like: tuple[Tensor, ...]) -> Operation:
    """A node of `op_type` in `op`'s place (its device, location, control inputs), reading
    `args`, with outputs shaped as the tensors `like`."""
    from opsdk.registry import load_registry
    from opsdk.runtime.kernels.choice import choose_kernel

    spec = load_registry(None).get(op_type)
    node = Operation(op.graph, spec.name, f"{op.name}/{spec.name}", args, attrs, type_attrs, (),
                     op.device, spec, op._id)
    node.outputs = tuple(Tensor(node, i, t.shape, t.dtype) for i, t in enumerate(like))
    program.inputs[node] = args
    program.controls[node] = program.controls_of(op)
    program.location[node] = program.location[op]
    program.device[node] = program.device[op]
    program.kernel[node] = choose_kernel(spec, program.device[op])
    return node


# The rewrites of the fold pass, by node type: each returns a _Rewritten, or None where it does
# not apply.
_REWRITES = {"pow": _as_square, "pow_grad": _as_square, "conv2d_grad": _filter_only,
             "relu": _conv_bias_relu, "relu_grad": _relu_into_pool, "add_grad": _bias_into_pool,
             "bias_add_grad": _bias_into_pool}


def _read(rw: _Rewrite, t: Tensor) -> bool:
    """Whether a node of the program reads `t` (or will, once rewired) or the caller fetches it."""
    return rw.fetched(t) or any(t in rw.reads(op) for op in rw.program.ops if op not in rw.node)


def _const(rw: _Rewrite, op: Operation, cse: bool) -> None:
    value = op.attrs["value"]
    key = None
    if cse and isinstance(value, np.ndarray) and value.nbytes <= _SMALL_CONST:
        key = ("const", value.dtype.str, value.shape, value.tobytes(),
               rw.program.location.get(op))
        if key in rw.seen:
            rw.replace(op, rw.seen[key], rw.seen[key].outputs)
            return
        rw.seen[key] = op
    rw.kept.append(op)


def _foldable(program: Program, op: Operation, inputs: tuple[Tensor, ...]) -> bool:
    if op.stateful or program.controls_of(op):
        return False
    if op.spec is None and not PRIMITIVES[op.type].foldable:
        return False
    fed = program.feed_set
    return (all(t.op.type == "const" and t not in fed for t in inputs)
            or _shape_only(program, op, inputs))


def _shape_only(program: Program, op: Operation, inputs: tuple[Tensor, ...]) -> bool:
    """Whether `op` runs a python kernel that reads only its inputs' shapes and dtypes (it
    carries `shape_only = True`), every input's static shape is fully known (a fed value,
    a variable's and a kernel's output are held to it) and its outputs are small."""
    choice = program.kernel.get(op) if op.spec is not None else None
    if (choice is None or choice.kind != "python" or not getattr(choice.fn, "shape_only", False)
            or op.absent):
        return False
    for t in (*inputs, *op.outputs):
        if t.shape is None or None in t.shape:
            return False
    return sum(math.prod(t.shape) * np.dtype(t.dtype).itemsize
               for t in op.outputs) <= _SHAPE_FOLD_BYTES


def _fold(rw: _Rewrite, op: Operation, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """Run `op` on its constant inputs now; its outputs become constant nodes of the program.
    A shape-only node's input that is not a constant is given as a stand-in of its static shape
    and dtype (zeros, broadcast from one element: no memory of the input's size)."""
    p = rw.program
    device = p.device[op]
    values = [device.copy_from(t.op.attrs["value"], p.device[t.op]) if t.op.type == "const"
              and t not in p.feed_set
              else device.from_host(np.broadcast_to(np.zeros((), np.dtype(t.dtype)), t.shape))
              for t in inputs]
    try:
        if op.spec is None:
            outputs = PRIMITIVES[op.type].run(None, op, values)
        else:
            outputs = bind_kernel(op.spec, p.kernel.get(op), op.attrs, op.type_attrs, op.absent)(values)
    except Exception as exc:  # the same error the step would raise when run
        raise in_context(node_label(op.type, op.name), exc) from exc
    consts = tuple(constant_node(p, op, t, value) for t, value in zip(op.outputs, outputs))
    rw.kept.extend(c.op for c in consts)
    return consts


def read_only(value: Any) -> Any:
    """A constant's value as steps share it: a host array read-only (a view: whatever else holds
    the array is left alone). Every step reads this one array and Session.run hands a read-only
    value out as a copy, so a fetched result changed by its caller leaves the next run's alone."""
    if isinstance(value, np.ndarray) and value.flags.writeable:
        value = value.view()
        value.flags.writeable = False
    return value


def constant_node(program: Program, like: Operation, t: Tensor, value: Any,
                  location: Optional[str] = None) -> Tensor:
    """A `const` node of this program only, holding `value` for tensor `t`, at `like`'s location
    (or `location`)."""
    array = read_only(value if hasattr(value, "shape") and hasattr(value, "dtype")
                      else np.asarray(value))
    name = f"{t.op.name}/const_{t.index}"
    node = Operation(like.graph, "const", name, (), {"value": array}, {}, (), like.device, None,
                     like._id)
    node.outputs = (Tensor(node, 0, t.shape, t.dtype),)
    where = location or program.location[like]
    program.location[node] = where
    program.device[node] = program.device[like] if location is None else get_device(where)
    return node.outputs[0]


def _without_dead_constants(program: Program, kept: list[Operation]) -> list[Operation]:
    """Drop constants nobody reads any more (their readers were folded or merged)."""
    read = {t for op in kept for t in program.inputs_of(op)}
    read.update(program.value_of(e) for e in program.fetches if isinstance(e, Tensor))
    return [op for op in kept if op.type != "const" or op.outputs[0] in read]


def _cse_key(program: Program, op: Operation, inputs: tuple[Tensor, ...]) -> Optional[tuple]:
    try:
        attrs = _freeze(op.attrs)
        type_attrs = _freeze(op.type_attrs)
    except TypeError:
        return None  # an attr value with no stable identity: leave the node alone
    controls = tuple(id(c) for c in program.controls_of(op))
    return (op.type, id(op.spec), tuple(id(t) for t in inputs), attrs, type_attrs,
            program.location.get(op), controls)


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    hash(value)  # raises TypeError for what cannot key a dict
    return value
