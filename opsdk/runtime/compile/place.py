"""The place pass: a location, a device (and a kernel) for every node.

A location is a task and a device (`/job:worker/replica:0/task:1/device:CPU:0`): the task comes
from the node's device scope, its unset fields from the session's default task; the device is
chosen as follows.

An explicit `device(...)` scope wins when that device is available and the op has a kernel for
it. Otherwise, with soft placement (on by default) the node falls back to a device that can run
it, and the fallback is logged once per node; with soft placement off it is an error naming the
node, the op, the device and the devices it has kernels for. A node with no scope goes to the
first available device of the preference (accelerators first, then the host) whose kernels it
has. Runtime primitives follow their data: constants on the host, a variable and the assigns of
it on one device (the device of the ops that update it), control flow like a kernel-less op.

An optimizer's `apply_updates` node runs where its variables live. When they live at more than
one location (variables on two ps tasks, or on a CPU and a GPU) it becomes one node per location,
each updating the variables there (`split_updates`), as TensorFlow's optimizers make one apply op
per variable beside it. A variable an update only reads (Adam's beta powers) at another task
reaches it as an input read at the step's start; the node that scales those variables waits for
that read and for the other nodes that read them, so every update sees the step's values before
the scaling, as in one node.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Optional

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.compile.program import PlanOptions, Program
from opsdk.runtime.devices import DEVICE_TYPES, Device, get_device, host
from opsdk.runtime.ir.device_names import DeviceSpec, location, task_of
from opsdk.runtime.ir.graph import Graph, Operation
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.kernels.choice import choose_kernel, devices_text, kernel_kinds, runnable_somewhere

log = logging.getLogger("opsdk.placement")
# Per graph, the op names already warned about; weak, so a freed graph's id (which CPython
# reuses) never silences a new graph's warnings.
_logged: "weakref.WeakKeyDictionary[Graph, set[str]]" = weakref.WeakKeyDictionary()
_logged_lock = threading.Lock()

# Primitives whose device is that of their (first) input's producer.
_FOLLOW_INPUT = frozenset({"identity"})
_VARIABLE_OPS = frozenset({"variable", "read_variable", "assign", "assign_add", "assign_sub"})
_UPDATES = "apply_updates"  # an optimizer's updates (train/update.py), done where its variables live


def _updated(op: Operation) -> list[str]:
    """The variables an apply_updates node writes, in order (its scaled ones last)."""
    return [*(name for owned in op.attrs["variables"] for name in owned),
            *op.attrs["scale_variables"]]


def place_pass(program: Program) -> Program:
    """Give every node of the program a device, and every declared op its kernel there."""
    variables = _VariableHomes(program.options)
    split_updates(program, variables)
    for op in program.ops:
        device = _place(program, op, variables)
        program.device[op] = device
        program.location[op] = _location(program, op, device)
        if op.spec is not None:
            program.kernel[op] = choose_kernel(op.spec, device)
        kind = f" ({program.kernel[op].kind} kernel)" if op in program.kernel else ""
        program.note("place", f"{op.name} -> {program.location[op]}{kind}")
    return program


def _location(program: Program, op: Operation, device: Device) -> str:
    """The node's task (its scope's, else the default) and the device chosen for it; a forwarding
    node stays with its input, an assign with its variable."""
    if op.type in _FOLLOW_INPUT and op.inputs:
        return program.location_of(program.inputs_of(op)[0])
    requested = op.device
    if (op.type in _VARIABLE_OPS and op.type != "variable") or op.type == _UPDATES:
        name = _updated(op)[0] if op.type == _UPDATES else op.attrs["variable"]
        var = _variable_node(op.graph, name)
        requested = var.device if var is not None else requested
    return location(requested, program.options.default_task, device.name)


def _variable_node(graph: Graph, name: str) -> Optional[Operation]:
    try:
        return graph.get_operation(name)
    except OpsdkError:
        return None


def host_only(program: Program) -> Program:
    """The place pass switched off: every node on the host with its default kernel."""
    for op in program.ops:
        program.device[op] = host()
        program.location[op] = program.location_on(host())
        if op.spec is not None:
            program.kernel[op] = _on_host(op)
    program.note("place", f"off: all {len(program.ops)} node(s) on the host")
    return program


def _on_host(op: Operation):
    try:
        return choose_kernel(op.spec, host())
    except OpsdkError as exc:
        raise OpsdkError(f"{op.type} (node '{op.name}'): {_detail(op, exc)}") from None


def _detail(op: Operation, exc: Exception) -> str:
    text = str(exc)
    prefix = f"op '{op.type}': "
    return text[len(prefix):] if text.startswith(prefix) else text


def _place(program: Program, op: Operation, variables: "_VariableHomes") -> Device:
    if op.spec is not None:
        return place_declared(op, program.options)
    if op.type in ("const", "no_op", "placeholder"):
        return host()
    if op.type in _FOLLOW_INPUT and op.inputs:
        return program.device_of(program.inputs_of(op)[0])
    if op.type in _VARIABLE_OPS:
        return variables.home(op)
    if op.type == _UPDATES:  # where the variables it updates live
        return variables.home_of(op.graph, _updated(op)[0])
    explicit = _explicit(op)
    if explicit is not None and explicit.unavailable() is None:
        return explicit
    return auto_devices(program.options)[0]


def place_declared(op: Operation, options: PlanOptions) -> Device:
    """The device of a declared op's node (see the module docstring)."""
    explicit = _explicit(op)
    if explicit is not None:
        why = explicit.unavailable()
        if why is None and kernel_kinds(op.spec, explicit):
            return explicit
        problem = (f"that device {why}" if why else f"op '{op.type}' has no kernel for it")
        if not options.soft_placement:
            raise OpsdkError(
                f"{op.type} (node '{op.name}'): placed on '{op.device}', but {problem}; "
                f"'{op.type}' has kernels for {_kernel_devices(op)} ("
                + ("turn soft placement on, or change the device scope)"
                   if runnable_somewhere(op.spec, auto_devices(options)) else
                   f"no usable device runs it: {devices_text(op.spec)})"))
        chosen = _auto(op, options)
        _log_once(op, f"{op.type} (node '{op.name}'): placed on '{op.device}', but {problem}; "
                      f"running it on {chosen.name}")
        return chosen
    return _auto(op, options)


def _auto(op: Operation, options: PlanOptions) -> Device:
    for device in auto_devices(options):
        if kernel_kinds(op.spec, device):
            return device
    raise OpsdkError(f"{op.type} (node '{op.name}'): no kernel for any available device "
                     f"(it has kernels for {_kernel_devices(op)}; {devices_text(op.spec)})")


def auto_devices(options: PlanOptions) -> list[Device]:
    """Available devices for nodes with no scope, most preferred first; the host is last."""
    if options.device_preference is not None:
        names = list(options.device_preference)
    else:
        names = [n for n, t in DEVICE_TYPES.items() if t.auto and not t.is_host]
    found = [get_device(f"/device:{n}:0") for n in names]
    devices = [d for d in found if d.unavailable() is None]
    return devices + ([host()] if host() not in devices else [])


def _explicit(op: Operation) -> Optional[Device]:
    spec = DeviceSpec.parse(op.device)
    return get_device(spec) if spec.device_type else None


def _kernel_devices(op: Operation) -> str:
    """The device types that can run one of the op's kernels."""
    kinds = set(op.spec.devices)
    names = [n for n, t in DEVICE_TYPES.items() if kinds & set(t.kernel_kinds)]
    return ", ".join(names) or "no device"


def _log_once(op: Operation, message: str) -> None:
    with _logged_lock:
        names = _logged.setdefault(op.graph, set())
        if op.name in names:
            return
        names.add(op.name)
    log.warning(message)


def split_updates(program: Program, variables: "_VariableHomes") -> None:
    """One apply_updates node per location of the variables it updates (module docstring)."""
    for op in [o for o in program.ops if o.type == _UPDATES]:
        homes = {name: _home(program, op.graph, name, variables) for name in _updated(op)}
        a = op.attrs
        for owned in a["variables"]:
            tasks = {task_of(homes[n]) for n in owned}
            if len(tasks) > 1:
                where = ", ".join(f"{n} on {task_of(homes[n])}" for n in owned)
                raise OpsdkError(
                    f"{_UPDATES} (node '{op.name}'): the update of '{owned[0]}' writes variables "
                    f"on {len(tasks)} tasks ({where}); an optimizer's slots must live on their "
                    "variable's task (create them inside its device scope)")
        groups: dict[str, list[int]] = {}
        for i, owned in enumerate(a["variables"]):
            groups.setdefault(homes[owned[0]], []).append(i)
        for name in a["scale_variables"]:
            groups.setdefault(homes[name], [])
        if len(groups) > 1:
            _split(program, op, groups, homes)


def _split(program: Program, op: Operation, groups: dict[str, list[int]],
           homes: dict[str, str]) -> None:
    a, given = op.attrs, program.inputs_of(op)
    starts = [sum(a["arity"][:i]) for i in range(len(a["arity"]))]
    var_nodes: dict[str, Operation] = {}
    made: list[tuple[Operation, str, set[str]]] = []  # (node, location, variables read in it)
    for k, (where, members) in enumerate(groups.items()):
        attrs: dict = {"ops": [], "variables": [], "reads": [], "arity": [], "op_attrs": []}
        inputs: list[Tensor] = []
        store_reads: set[str] = set()
        for i in members:
            reads = list(a["reads"][i])
            remote = [n for n in reads if task_of(homes[n]) != task_of(where)]
            moved = [_var_node(op.graph, n, var_nodes).outputs[0] for n in reads] if remote else []
            own = given[starts[i]:starts[i] + a["arity"][i]]
            inputs += [*moved, *own]
            for key, value in (("ops", a["ops"][i]), ("variables", a["variables"][i]),
                               ("reads", [] if remote else reads),
                               ("arity", len(moved) + len(own)), ("op_attrs", a["op_attrs"][i])):
                attrs[key].append(value)
            store_reads.update([] if remote else reads)
        scaled = [(v, f) for v, f in zip(a["scale_variables"], a["scale_factors"])
                  if homes[v] == where]
        attrs["scale_variables"] = [v for v, _ in scaled]
        attrs["scale_factors"] = [f for _, f in scaled]
        node = Operation(op.graph, _UPDATES, f"{op.name}/at_{k}", tuple(inputs), attrs, {},
                         program.controls_of(op), op.device, None, op._id)
        made.append((node, where, store_reads))
    # The node scaling a variable waits for every other node that reads it from the store and,
    # where one reads it as an input, for that read.
    as_input = {n for n in var_nodes}
    for node, _, _ in made:
        scaled = set(node.attrs["scale_variables"])
        if not scaled:
            continue
        waits = [other for other, _, reads in made if other is not node and reads & scaled]
        waits += [var_nodes[n] for n in scaled & as_input]
        program.controls[node] = (*program.controls_of(op), *waits)
    nodes = [node for node, _, _ in made]
    present = set(program.ops)
    _replace(program, op, nodes, [n for n in var_nodes.values() if n not in present])
    program.note("place", f"{op.name}: its variables live at {len(nodes)} locations; split into "
                          f"{', '.join(n.name for n in nodes)}")


def _var_node(graph: Graph, name: str, found: dict[str, Operation]) -> Operation:
    if name not in found:
        found[name] = graph.get_operation(name)
    return found[name]


def _replace(program: Program, op: Operation, nodes: list[Operation],
             added: list[Operation]) -> None:
    """`nodes` in `op`'s place: run where it ran, waited for where it was (`added`: variable
    nodes read, placed before them)."""
    at = next(i for i, o in enumerate(program.ops) if o is op)
    program.ops[at:at + 1] = [*added, *nodes]
    for other in program.ops:
        controls = program.controls_of(other)
        if any(c is op for c in controls):
            program.controls[other] = tuple(n for c in controls
                                            for n in (nodes if c is op else (c,)))
    if any(r is op for r in program.roots):
        program.roots = tuple(n for r in program.roots for n in (nodes if r is op else (r,)))
    if any(e is op for e in program.fetches):
        program.fetches = tuple(nodes[0] if e is op else e for e in program.fetches)
        program.roots = (*program.roots, *nodes[1:])


def _home(program: Program, graph: Graph, name: str, variables: "_VariableHomes") -> str:
    """The location of variable `name`."""
    var = _variable_node(graph, name)
    return location(var.device if var is not None else "", program.options.default_task,
                    variables.home_of(graph, name).name)


class _VariableHomes:
    """Where each variable lives: its own device scope, else the device of the declared ops that
    compute its updates (the node feeding one of its assigns), else the host. Decided over the
    whole graph, not one plan's part of it, so every plan agrees."""

    def __init__(self, options: PlanOptions):
        self.options = options
        self._homes: dict[tuple[int, str], Device] = {}

    def home(self, op: Operation) -> Device:
        name = op.name if op.type == "variable" else op.attrs["variable"]
        return self.home_of(op.graph, name)

    def home_of(self, graph: Graph, name: str) -> Device:
        key = (id(graph), name)
        if key not in self._homes:
            self._homes[key] = self._decide(graph, name)
        return self._homes[key]

    def _decide(self, graph: Graph, name: str) -> Device:
        var = _variable_node(graph, name)
        explicit = _explicit(var) if var is not None else None
        if explicit is not None and explicit.unavailable() is None:
            return explicit
        for op in graph.operations:
            if op.type in _VARIABLE_OPS and op.attrs.get("variable") == name and op.inputs:
                producer = op.inputs[0].op
                if producer.spec is not None:
                    return place_declared(producer, self.options)
            if op.type == _UPDATES and any(name in owned for owned in op.attrs["variables"]):
                return self._update_device(op, name)
        return host()

    def _update_device(self, op: Operation, name: str) -> Device:
        """The first device of the preference with a kernel for the update op that writes
        variable `name` (an optimizer's apply op: the variable lives where it is updated)."""
        from opsdk.runtime.frontend.registries import builtin_registry
        update = next(u for u, owned in zip(op.attrs["ops"], op.attrs["variables"])
                      if name in owned)
        spec = builtin_registry().get(update)
        for device in auto_devices(self.options):
            if kernel_kinds(spec, device):
                return device
        return host()
