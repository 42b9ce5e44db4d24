"""The graph IR: Operations (nodes) joined by Tensors (edges), built TensorFlow-1 style.

One IR, several interpreters: the session's executor evaluates it, autodiff walks it backwards,
export and placement passes read it. So everything an interpreter needs sits on the node: its
op type, its `OpSpec` (None for runtime primitives, see `primitives.py`), normalised attrs, the
resolved type attrs, inputs, control inputs, device, outputs with static shapes, and consumers.

    g = Graph()
    with g.as_default():
        x = placeholder("float32", shape=[None, 3], name="x")
        y = x * 2.0 + 1.0
"""

from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Optional, Sequence

import numpy as np

from opsdk.registry.dtypes import DTYPE_NAMES
from opsdk.registry.errors import OpsdkError
from opsdk.registry.spec import OpSpec

from opsdk.runtime.ir.device_names import merge_device
from opsdk.runtime.ir.primitives import PRIMITIVES
from opsdk.runtime.ir.tensor import Shape, Tensor

__all__ = ["Graph", "Operation", "Tensor", "GraphKeys", "get_default_graph", "reset_default_graph",
           "placeholder", "constant", "name_scope", "control_dependencies", "device", "dtype_name"]

_NAME = re.compile(r"^[A-Za-z0-9_.\-/]+$")


class GraphKeys:
    """Well-known collection names."""

    GLOBAL_VARIABLES = "variables"
    TRAINABLE_VARIABLES = "trainable_variables"


class Operation:
    """A node. `spec` is the op's declaration, or None for a runtime primitive."""

    __slots__ = ("graph", "type", "name", "inputs", "attrs", "type_attrs", "control_inputs",
                 "device", "outputs", "spec", "absent", "_consumers", "_id", "colocated",
                 "gradient_override")

    def __init__(self, graph: "Graph", op_type: str, name: str, inputs: tuple[Tensor, ...],
                 attrs: Mapping[str, Any], type_attrs: Mapping[str, str],
                 control_inputs: tuple["Operation", ...], device: str, spec: Optional[OpSpec],
                 op_id: int):
        self.graph = graph
        self.type = op_type
        self.name = name
        self.inputs = inputs
        self.attrs = dict(attrs)
        self.type_attrs = dict(type_attrs)  # unbound type attrs the caller chose: {"DstT": "float32"}
        self.control_inputs = control_inputs
        self.device = device
        self.spec = spec
        # The optional inputs the caller left out (None): no edge stands for them, and the
        # kernel gets None in their place (kernels.choice.with_absent).
        self.absent: frozenset[str] = frozenset()
        self.outputs: tuple[Tensor, ...] = ()
        self._consumers: list[Operation] = []
        self._id = op_id  # creation order: a topological order of the whole graph
        # The node it was made to live with (Graph.colocate_with), for a scope that places
        # nodes after they are made (a replica device setter); None if none.
        self.colocated: Optional[Operation] = None
        # The name of the gradient registered with autodiff.gradients.register_gradient that
        # replaces this node's own (Graph.gradient_override_map); None: its own.
        self.gradient_override: Optional[str] = None

    @property
    def stateful(self) -> bool:
        """Whether the node has effects or randomness (never folded, merged or deduplicated)."""
        if self.spec is not None:
            return self.spec.stateful
        return PRIMITIVES[self.type].stateful

    @property
    def is_primitive(self) -> bool:
        return self.spec is None

    def consumers(self) -> list["Operation"]:
        """The nodes that take one of this node's outputs as a data input."""
        return list(self._consumers)

    def replace_input(self, index: int, tensor: Tensor) -> None:
        """Make data input `index` read `tensor` instead (autodiff rewires a gradient node to a
        value recorded in the forward pass). `tensor` must come from a node made before this
        one, so that creation order stays a topological order."""
        if tensor.graph is not self.graph or tensor.op._id >= self._id:
            raise OpsdkError(f"node '{self.name}': input {index} cannot read '{tensor.name}', "
                             "which is of another graph or made after the node")
        old = self.inputs[index]
        self.inputs = self.inputs[:index] + (tensor,) + self.inputs[index + 1:]
        if all(t.op is not old.op for t in self.inputs):
            old.op._consumers.remove(self)
        if self not in tensor.op._consumers:
            tensor.op._consumers.append(self)

    def add_control_input(self, op: "Operation") -> None:
        """Make this node wait for `op` too (graph import and control flow wire nodes late).
        Nothing checks for cycles here; Session.run reports one, naming its nodes."""
        if op.graph is not self.graph:
            raise OpsdkError(f"node '{self.name}': control input '{op.name}' is in another graph")
        if op not in self.control_inputs:
            self.control_inputs = self.control_inputs + (op,)

    def __repr__(self) -> str:
        return f"<Operation '{self.name}' type={self.type}>"


class _ThreadStacks(threading.local):
    """Scope stacks are per thread: two threads building one graph do not see each other's scopes."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.control: list[list[Operation]] = []
        self.devices: list[str] = []
        self.colocations: list[Operation] = []
        self.overrides: list[dict[str, str]] = []


class GraphFinalizedError(OpsdkError, RuntimeError):
    """A node or collection entry added to a finalized graph (a RuntimeError, as TensorFlow's)."""


class Graph:
    """A dataflow graph. Building is thread-safe; names are unique (`add`, `add_1`, ...)."""

    def __init__(self) -> None:
        self._ops: list[Operation] = []
        self._by_name: dict[str, Operation] = {}
        self._used_names: set[str] = set()
        self._name_counts: dict[str, int] = {}  # the next suffix to try per base name
        self._collections: dict[str, list] = {}
        self._lock = threading.RLock()
        self._stacks = _ThreadStacks()
        self._finalized = False

    # ----------------------------------------------------------------- finalizing
    def finalize(self) -> None:
        """Refuse any new node or collection entry from now on (TensorFlow's `finalize`: a
        training loop that adds nodes at every step, a leak, then fails at once)."""
        self._finalized = True

    @property
    def finalized(self) -> bool:
        return self._finalized

    def _check_not_finalized(self, what: str) -> None:
        if self._finalized:
            raise GraphFinalizedError(f"the graph is finalized and cannot be modified ({what}); "
                                      "build every node before the training loop, or before "
                                      "the monitored session or Supervisor that finalizes it")

    # ----------------------------------------------------------------- contexts
    @contextmanager
    def as_default(self) -> Iterator["Graph"]:
        """Make this the graph that ops and `placeholder`/`constant` add to in this thread."""
        _default.stack.append(self)
        try:
            yield self
        finally:
            _default.stack.pop()

    @contextmanager
    def name_scope(self, name: str) -> Iterator[str]:
        """Prefix the names of ops created inside with `name/` (nested scopes join with `/`)."""
        if not name or not _NAME.match(name):
            raise OpsdkError(f"name scope '{name}': use letters, digits, '_', '.', '-' and '/'")
        self._stacks.names.append(name.strip("/"))
        try:
            yield "/".join(self._stacks.names) + "/"
        finally:
            self._stacks.names.pop()

    @contextmanager
    def control_dependencies(self, deps: Optional[Sequence[Any]]) -> Iterator[None]:
        """Ops created inside run only after `deps` (ops or tensors); None clears outer ones."""
        ops = None if deps is None else [self._as_op(d) for d in deps]
        self._stacks.control.append(ops)
        try:
            yield
        finally:
            self._stacks.control.pop()

    @contextmanager
    def device(self, name: Optional[str]) -> Iterator[None]:
        """Record `name` (e.g. '/cpu:0', '/job:ps/task:0') on ops created inside."""
        outer = self._stacks.devices[-1] if self._stacks.devices else ""
        self._stacks.devices.append(merge_device(outer, name) if name else "")
        try:
            yield
        finally:
            self._stacks.devices.pop()

    @contextmanager
    def colocate_with(self, item: Any) -> Iterator[None]:
        """Ops created inside live with `item` (an op or a tensor): they take its device string
        alone (outer device scopes do not apply), and a replica device setter, which places
        nodes on leaving its scope, puts them where it puts `item`."""
        target = self._as_op(item)
        self._stacks.colocations.append(target)
        self._stacks.devices.append(target.device)
        try:
            yield
        finally:
            self._stacks.devices.pop()
            self._stacks.colocations.pop()

    @contextmanager
    def gradient_override_map(self, op_type_map: Mapping[str, str]) -> Iterator[None]:
        """Nodes of the types `op_type_map` names, made inside, take the gradient registered
        under the name it gives them (autodiff.gradients.register_gradient) in place of their
        own; an inner map adds to and overrides the outer (TensorFlow's)."""
        if not isinstance(op_type_map, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in op_type_map.items()):
            raise OpsdkError("gradient_override_map: give a dict of op type -> registered "
                             "gradient name, both strings")
        outer = self._stacks.overrides[-1] if self._stacks.overrides else {}
        self._stacks.overrides.append({**outer, **op_type_map})
        try:
            yield
        finally:
            self._stacks.overrides.pop()

    def _current_overrides(self) -> Mapping[str, str]:
        """The innermost gradient_override_map of this thread (a traced body's graph adds its
        outer graphs': func_graph.FuncGraph)."""
        return self._stacks.overrides[-1] if self._stacks.overrides else {}

    def current_device(self) -> str:
        """The device string of the innermost `device(...)` scope of this thread ('' if none)."""
        return self._stacks.devices[-1] if self._stacks.devices else ""

    # ----------------------------------------------------------------- building
    def create_op(self, op_type: str, inputs: Sequence[Tensor], attrs: Mapping[str, Any],
                  outputs: Sequence[tuple[Shape, str]], *, spec: Optional[OpSpec] = None,
                  name: Optional[str] = None, type_attrs: Optional[Mapping[str, str]] = None,
                  control_inputs: Sequence[Any] = (), reserved_name: bool = False,
                  absent: Sequence[str] = ()) -> Operation:
        """Add a node whose output (shape, dtype) pairs the caller already inferred.

        `reserved_name`: `name` came from `unique_name` already (callers that must name the node
        in an error before creating it reserve the name first). `absent`: the optional inputs of
        `spec` left out; `inputs` holds the others only."""
        if absent and (spec is None or any(not _optional_input(spec, a) for a in absent)):
            raise OpsdkError(f"{op_type} (node '{name or op_type}'): only optional inputs may be "
                             f"absent; {sorted(absent)} are not all optional inputs of the op")
        if spec is None and op_type not in PRIMITIVES:
            raise OpsdkError(f"'{op_type}' is neither a declared op nor a runtime primitive")
        check = PRIMITIVES[op_type].check if spec is None else None
        problem = check(dict(attrs), list(outputs)) if check is not None else None
        if problem is not None:
            raise OpsdkError(f"{op_type} (node '{name or op_type}'): {problem}")
        for t in inputs:
            if not isinstance(t, Tensor):
                raise OpsdkError(f"{op_type}: an input is {type(t).__name__}, not a graph Tensor")
            if t.graph is not self:
                raise OpsdkError(f"{op_type}: input '{t.name}' belongs to another graph; "
                                 "build all ops of a step in one graph")
        with self._lock:
            self._check_not_finalized(f"a {op_type} node")
            full = name if reserved_name and name else self.unique_name(name or op_type)
            op = Operation(self, op_type, full, tuple(inputs), attrs,
                           type_attrs or {}, self._control_inputs(control_inputs),
                           self.current_device(), spec,
                           len(self._ops))
            op.absent = frozenset(absent)
            if self._stacks.colocations:
                op.colocated = self._stacks.colocations[-1]
            overrides = self._current_overrides()
            if overrides:
                op.gradient_override = overrides.get(op_type)
            op.outputs = tuple(Tensor(op, i, None if s is None else tuple(s), dtype_name(d))
                               for i, (s, d) in enumerate(outputs))
            for producer in {t.op for t in op.inputs}:
                producer._consumers.append(op)
            self._ops.append(op)
            self._by_name[op.name] = op
        return op

    def add_outputs(self, op: Operation, outputs: Sequence[tuple[Shape, str]]
                    ) -> tuple[Tensor, ...]:
        """Append outputs to an existing node and return the new Tensors. A node only ever gains
        outputs: tensors already handed out keep their index, shape and meaning (a while_loop
        starts recording its iterations when its gradient is first asked for)."""
        with self._lock:
            start = len(op.outputs)
            new = tuple(Tensor(op, start + i, None if s is None else tuple(s), dtype_name(d))
                        for i, (s, d) in enumerate(outputs))
            op.outputs = op.outputs + new
        return new

    def unique_name(self, name: str) -> str:
        """Reserve `name` inside the current name scopes, made unique with `_1`, `_2`, ..."""
        if not _NAME.match(name):
            raise OpsdkError(f"node name '{name}': use letters, digits, '_', '.', '-' and '/'")
        full = "/".join([*self._stacks.names, name])
        with self._lock:
            candidate = full
            if full in self._used_names:
                count = self._name_counts.get(full, 1)
                while f"{full}_{count}" in self._used_names:
                    count += 1
                self._name_counts[full] = count + 1
                candidate = f"{full}_{count}"
            self._used_names.add(candidate)
            return candidate

    def _control_inputs(self, extra: Sequence[Any]) -> tuple[Operation, ...]:
        deps: list[Operation] = []
        for frame in self._stacks.control:
            if frame is None:
                deps = []
            else:
                deps.extend(frame)
        deps.extend(self._as_op(d) for d in extra)
        return tuple(dict.fromkeys(deps))  # ordered, without repeats

    def _as_op(self, item: Any) -> Operation:
        element = self.as_graph_element(item)
        return element.op if isinstance(element, Tensor) else element

    # ----------------------------------------------------------------- lookup
    @property
    def operations(self) -> tuple[Operation, ...]:
        """All nodes, in creation order (a topological order)."""
        with self._lock:
            return tuple(self._ops)

    def get_operations(self) -> list[Operation]:
        """All nodes, in creation order (TensorFlow's spelling of `operations`)."""
        return list(self.operations)

    def get_operation(self, name: str) -> Operation:
        """The node called `name`; the error lists near names."""
        op = self._by_name.get(name)
        if op is None:
            near = [n for n in self._by_name if n.split("/")[-1] == name.split("/")[-1]][:3]
            hint = f" (did you mean {', '.join(repr(n) for n in near)}?)" if near else ""
            raise OpsdkError(f"no node named '{name}' in this graph{hint}")
        return op

    def get_tensor(self, name: str) -> Tensor:
        """The tensor `op:index`, e.g. 'dist:0'."""
        op_name, _, index = name.rpartition(":")
        if not op_name or not index.isdigit():
            raise OpsdkError(f"tensor name '{name}' must be 'node:index', e.g. '{name}:0'")
        op = self.get_operation(op_name)
        if int(index) >= len(op.outputs):
            raise OpsdkError(f"node '{op_name}' has {len(op.outputs)} output(s); no '{name}'")
        return op.outputs[int(index)]

    def as_graph_element(self, item: Any) -> Tensor | Operation:
        """A Tensor, Operation, 'op' / 'op:0' name, or an object with `_as_graph_element()`."""
        if hasattr(item, "_as_graph_element"):
            item = item._as_graph_element()
        if isinstance(item, str):
            return self.get_tensor(item) if ":" in item else self.get_operation(item)
        if isinstance(item, (Tensor, Operation)):
            if item.graph is not self:
                raise OpsdkError(f"'{item.name}' belongs to another graph than the one asked")
            return item
        raise OpsdkError(f"cannot use a {type(item).__name__} as a graph element "
                         "(give a Tensor, an Operation or a name)")

    # ----------------------------------------------------------------- collections
    def add_to_collection(self, key: str, value: Any) -> None:
        """Append `value` to the collection `key` (e.g. GraphKeys.TRAINABLE_VARIABLES)."""
        with self._lock:
            self._check_not_finalized(f"an entry of collection '{key}'")
            self._collections.setdefault(key, []).append(value)

    def get_collection(self, key: str) -> list:
        """A copy of the collection `key` (empty when nothing was added)."""
        with self._lock:
            return list(self._collections.get(key, ()))

    def get_collection_ref(self, key: str) -> list:
        """The collection `key` itself, for a caller that changes it in place (made empty when
        nothing was added)."""
        with self._lock:
            self._check_not_finalized(f"collection '{key}'")
            return self._collections.setdefault(key, [])

    def get_all_collection_keys(self) -> list[str]:
        """The names of the collections that hold something."""
        with self._lock:
            return [k for k, v in self._collections.items() if v]

    def clear_collection(self, key: str) -> None:
        """Empty the collection `key`."""
        with self._lock:
            self._check_not_finalized(f"collection '{key}'")
            self._collections.pop(key, None)


def _optional_input(spec: OpSpec, name: str) -> bool:
    return any(t.name == name and t.optional for t in spec.inputs)


class _DefaultStack(threading.local):
    def __init__(self) -> None:
        self.stack: list[Graph] = []


_default = _DefaultStack()
_global_graph = Graph()


def get_default_graph() -> Graph:
    """The innermost `as_default()` graph of this thread, else the process-wide default graph."""
    return _default.stack[-1] if _default.stack else _global_graph


def in_graph_context() -> bool:
    """Whether this thread is inside a `with g.as_default():` block (ops then add nodes)."""
    return bool(_default.stack)


def reset_default_graph() -> Graph:
    """Replace the process-wide default graph with an empty one and return it."""
    global _global_graph
    if _default.stack:
        raise OpsdkError("reset_default_graph() inside a `with graph.as_default():` block")
    _global_graph = Graph()
    return _global_graph


def dtype_name(dtype: Any) -> str:
    """The registry's name of a dtype given as a name, NumPy dtype or type."""
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise OpsdkError(f"'{dtype}' is not a dtype (use e.g. 'float32')") from None
    if name not in DTYPE_NAMES:
        raise OpsdkError(f"dtype '{name}' is not supported (supported: {', '.join(DTYPE_NAMES)})")
    return name


def placeholder(dtype: Any, shape: Optional[Sequence[Optional[int]]] = None,
                name: Optional[str] = None) -> Tensor:
    """A value fed at run time. `shape=None`: any rank; `None` entries: unknown dims.

    >>> x = placeholder("float32", shape=[None, 3], name="x")
    """
    dims = None if shape is None else tuple(None if d is None else int(d) for d in shape)
    graph = get_default_graph()
    op = graph.create_op("placeholder", [], {"shape": dims, "dtype": dtype_name(dtype)},
                         [(dims, dtype)], name=name or "placeholder")
    return op.outputs[0]


def constant(value: Any, dtype: Any = None, name: Optional[str] = None) -> Tensor:
    """A constant node holding `np.asarray(value, dtype)`.

    >>> c = constant([1.0, 2.0], dtype="float32", name="c")
    """
    array = np.array(value, dtype=None if dtype is None else np.dtype(dtype_name(dtype)))
    array.setflags(write=False)  # shared by every step: a kernel must not change it in place
    graph = get_default_graph()
    op = graph.create_op("const", [], {"value": array}, [(array.shape, array.dtype)],
                         name=name or "Const")
    return op.outputs[0]


def name_scope(name: str):
    """`get_default_graph().name_scope(name)`."""
    return get_default_graph().name_scope(name)


def control_dependencies(deps: Optional[Sequence[Any]]):
    """`get_default_graph().control_dependencies(deps)`."""
    return get_default_graph().control_dependencies(deps)


def device(name: Optional[str]):
    """`get_default_graph().device(name)`."""
    return get_default_graph().device(name)
