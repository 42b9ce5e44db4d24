"""The optimizers' update node: what one `apply_gradients` changes, as one transaction.

An `apply_updates` node holds a list of updates, each a declared update op (opdefs/builtin/
optim.yaml) with the variables it owns (the variable and its slots: read, and overwritten with
the op's outputs in order) and the variables it only reads (Adam's beta powers), followed by
scalings (`var *= factor`, Adam's beta powers once per step). Its inputs are the rest of each
update op's inputs (hyperparameters and gradient), update after update.

Running it locks every variable it names (`VariableStore.transaction`), reads their current
values, calls each update kernel, stores the results and releases the locks. Reading the
variable inside the lock, not from an earlier `variable` node, is what makes concurrent steps
lose no update: two threads' updates of `w` run one after the other, each on the value the
other left (docs/internals.md, Variables and threads). The gradients themselves may have been
computed from an older value, as in TensorFlow's asynchronous training.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence


from opsdk.registry import infer_outputs, normalize_attrs
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.devices import Device
from opsdk.runtime.exec.variable_store import VariableStore
from opsdk.runtime.frontend.registries import builtin_registry
from opsdk.runtime.ir.graph import Graph, Operation
from opsdk.runtime.ir.primitives import Primitive, register_primitive
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.kernels.choice import bind_kernel, choose_kernel, given_output_call

OP_TYPE = "apply_updates"



def _names(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(n, str) for n in value)


# attr name -> (what each item must be, a check of one item)
_LISTS = {
    "ops": ("an update op name", lambda v: isinstance(v, str)),
    "variables": ("a list of variable names", lambda v: _names(v) and len(v) > 0),
    "reads": ("a list of variable names", _names),
    "arity": ("an input count", lambda v: type(v) is int and v >= 0),
    "op_attrs": ("a list of [name, value] pairs", lambda v: isinstance(v, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], str) for p in v)),
}


class Update:
    """One update of an apply_updates node (what the optimizer asks for)."""

    def __init__(self, op: str, owned: Sequence[str], reads: Sequence[str],
                 inputs: Sequence[Tensor], attrs: Optional[dict] = None):
        self.op, self.owned, self.reads = op, list(owned), list(reads)
        self.inputs, self.attrs = list(inputs), dict(attrs or {})


def add_updates(graph: Graph, updates: Sequence[Update], scalings: Sequence[tuple[str, float]],
                name: str) -> Operation:
    """The apply_updates node of `updates` then `scalings` ((variable, factor) pairs). Shapes
    and dtypes are checked against each update op's declaration here, so a mismatch is an error
    naming the op and the variable before anything runs."""
    registry = builtin_registry()
    attrs: dict[str, Any] = {k: [] for k in _LISTS}
    for u in updates:
        spec = registry.get(u.op)
        normal = normalize_attrs(spec, u.attrs)
        owned = [graph.get_operation(n).outputs[0] for n in u.owned]
        reads = [graph.get_operation(n).outputs[0] for n in u.reads]
        args = [*owned, *reads, *u.inputs]
        outs = infer_outputs(spec, [t.shape for t in args], [t.dtype for t in args], normal)
        for var, (shape, dtype) in zip(owned, outs):
            if dtype != var.dtype or (shape is not None and var.shape is not None
                                      and tuple(shape) != tuple(var.shape)):
                raise OpsdkError(f"{u.op}: output for variable '{var.op.name}' would be {dtype} "
                                 f"{list(shape or [])}, the variable is {var.dtype} "
                                 f"{list(var.shape or [])}")
        for key, value in (("ops", u.op), ("variables", u.owned), ("reads", u.reads),
                           ("arity", len(u.inputs)),
                           ("op_attrs", [[k, v] for k, v in normal.items()])):
            attrs[key].append(value)
    attrs["scale_variables"] = [v for v, _ in scalings]
    attrs["scale_factors"] = [float(f) for _, f in scalings]
    inputs = [t for u in updates for t in u.inputs]
    return graph.create_op(OP_TYPE, inputs, attrs, [], name=name)


def _check(attrs: dict, outputs: list) -> Optional[str]:
    """The node's attrs must describe updates the runtime can run (a graph file is data)."""
    if outputs:
        return f"it has {len(outputs)} outputs; an {OP_TYPE} node has none"
    sizes = set()
    for key, (what, ok) in _LISTS.items():
        value = attrs.get(key)
        if not isinstance(value, (list, tuple)) or not all(ok(v) for v in value):
            return f"attr '{key}' must be a list, each item {what}"
        sizes.add(len(value))
    if len(sizes) != 1:
        return f"attrs {', '.join(_LISTS)} must be lists of one length (one item per update)"
    names, factors = attrs.get("scale_variables"), attrs.get("scale_factors")
    if not _names(names) or not isinstance(factors, (list, tuple)) or len(names) != len(
            factors) or not all(type(f) is float for f in factors):
        return "attrs scale_variables and scale_factors must be lists of names and floats of " \
               "one length"
    unknown = set(attrs) - {*_LISTS, "scale_variables", "scale_factors"}
    if unknown:
        return f"unknown attr(s) {', '.join(sorted(unknown))}"
    return None


def _prepare(op: Operation, device: Device, options: Any):
    """The run function: each update's kernel chosen for `device` once, when the plan is built."""
    a = op.attrs
    if sum(a["arity"]) != len(op.inputs):
        raise OpsdkError(f"{OP_TYPE} (node '{op.name}'): its updates take {sum(a['arity'])} "
                         f"inputs, the node has {len(op.inputs)}")
    registry = builtin_registry()
    calls, at = [], 0
    for name, owned, reads, n, pairs in zip(a["ops"], a["variables"], a["reads"], a["arity"],
                                            a["op_attrs"]):
        spec = registry.get(name)
        choice = choose_kernel(spec, device)
        attrs = normalize_attrs(spec, dict(pairs))
        call = bind_kernel(spec, choice, attrs, {})
        # Updates in place only where every output may be its own input's array (optim.yaml's
        # `inplace`) and the kernel takes given outputs (a built one).
        in_place = len(spec.outputs) == len(owned) and choice.kind != "python" and all(
            o.inplace == (i.name,) for o, i in zip(spec.outputs, spec.inputs))
        given = given_output_call(spec, choice, attrs, {}) if in_place else None
        calls.append((call, given, tuple(owned), tuple(reads), at, at + n,
                      choice.kind != "python"))
        at += n
    scalings = tuple(zip(a["scale_variables"], a["scale_factors"]))
    xp = device.xp
    names = [v for _, _, owned, reads, *_ in calls for v in (*owned, *reads)]
    names = VariableStore.ordered([*names, *(v for v, _ in scalings)])

    def run(ctx: Any, op: Operation, inputs: list) -> tuple:
        with ctx.variables.transaction(names) as tx:
            for call, given, owned, reads, start, stop, fresh in calls:
                outs = _taken(tx, owned) if given is not None else None
                current = [tx.read(v, device) for v in (*owned, *reads)]
                args = [*current, *inputs[start:stop]]
                results = call(args) if outs is None else _in_place(given, args, outs)
                for var, new in zip(owned, results):
                    tx.write(var, new, fresh)
            for var, factor in scalings:
                value = tx.read(var, device)
                tx.write(var, xp.asarray(value * xp.asarray(factor, value.dtype)), fresh=True)
        return ()
    return run


def _taken(tx: Any, owned: Sequence[str]) -> Optional[tuple]:
    """The owned variables' arrays, when the store alone holds every one of them."""
    outs = []
    for name in owned:
        array = tx.take(name)
        if array is None:
            _refreeze(outs)  # this update writes fresh arrays instead
            return None
        outs.append(array)
    return tuple(outs)


def _in_place(given: Any, args: list, outs: tuple) -> tuple:
    try:
        given(args, outs)
    except BaseException:
        _refreeze(outs)
        raise
    return outs


def _refreeze(arrays: Sequence[Any]) -> None:
    """Taken arrays that stay the store's as they were: read-only again."""
    for array in arrays:
        array.flags.writeable = False


def _not_prepared(ctx: Any, op: Operation, inputs: list) -> tuple:
    raise OpsdkError(f"{OP_TYPE} (node '{op.name}') runs only inside a compiled plan")


register_primitive(Primitive(OP_TYPE, True, _not_prepared,
                             "an optimizer's updates of variables and slots, as one transaction",
                             prepare=_prepare, check=_check))
