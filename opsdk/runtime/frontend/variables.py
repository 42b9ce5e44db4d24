"""Variables: graph nodes whose value lives in a Session (TensorFlow 1 semantics).

A Variable adds a `variable` node (its output is the current value, usable in any op), an
initializer (`assign` of the initial value) and goes into the graph's collections. The values
themselves are held by each Session's `VariableStore`, so two sessions over one graph train
independent copies.

    w = Variable(np.zeros(3, np.float32), name="w")
    step = w.assign_add(np.ones(3, np.float32))
    with Session() as sess:
        sess.run(global_variables_initializer())
        sess.run(step)            # -> array([1., 1., 1.], dtype=float32)
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence


from opsdk.registry.errors import OpError

from opsdk.runtime.ir.graph import Graph, GraphKeys, Operation, constant, get_default_graph
from opsdk.runtime.ir.tensor import Tensor


class Variable:
    """A trainable (or not) value kept across `Session.run` calls of one session.

    `collections`: the graph collections it joins (default: GLOBAL_VARIABLES alone, so a
    variable made for LOCAL_VARIABLES is not a global one); a trainable one joins
    TRAINABLE_VARIABLES too, as in TensorFlow."""

    def __init__(self, initial_value: Any, name: Optional[str] = None, trainable: bool = True,
                 dtype: Any = None, collections: Optional[Sequence[str]] = None):
        graph = initial_value.graph if isinstance(initial_value, Tensor) else get_default_graph()
        self.graph: Graph = graph
        self.trainable = trainable
        # control_dependencies(None): the variable's nodes wait for no step (TF's init_scope);
        # a variable made inside `with control_dependencies([train_op]):` (an optimizer's slots)
        # must still be initialised without running train_op.
        with graph.as_default(), graph.control_dependencies(None):
            full = graph.unique_name(name or "Variable")
            base = full.rsplit("/", 1)[-1]
            init = (initial_value if isinstance(initial_value, Tensor)
                    else constant(initial_value, dtype=dtype, name=f"{base}/initial_value"))
            out = [(init.shape, init.dtype)]
            self.op: Operation = graph.create_op(
                "variable", [], {"shape": init.shape, "dtype": init.dtype}, out, name=full,
                reserved_name=True)
            self.initializer: Operation = graph.create_op(
                "assign", [init], {"variable": full}, out, name=f"{base}/Assign")
        keys = list(collections) if collections is not None else [GraphKeys.GLOBAL_VARIABLES]
        if trainable:
            keys.append(GraphKeys.TRAINABLE_VARIABLES)
        for key in dict.fromkeys(keys):
            graph.add_to_collection(key, self)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def shape(self):
        return self.op.outputs[0].shape

    @property
    def device(self) -> str:
        """The device its node asked for (its scope's device string; '' if none)."""
        return self.op.device

    @property
    def dtype(self) -> str:
        return self.op.outputs[0].dtype

    def value(self) -> Tensor:
        """The tensor of the variable's current value (read when a step needs it)."""
        return self.op.outputs[0]

    def _as_graph_element(self) -> Tensor:
        return self.value()

    def read(self, name: Optional[str] = None) -> Tensor:
        """The value as read by a node made here: `value()` is one node for every reader, read
        when a step first needs it, so inside `control_dependencies(ops)` a `read_variable`
        node reads it after `ops` instead (gradients pass through it to the variable)."""
        # the node itself, not value(): a subclass may make value() a read (opsdk.v1 does)
        graph, current = get_default_graph(), self.op.outputs[0]
        if graph is not self.graph or not graph._control_inputs(()):
            return current
        node = graph.unique_name(name or f"{self.op.name.rsplit('/', 1)[-1]}/read")
        return graph.create_op("read_variable", [current], {"variable": self.op.name},
                               [(self.shape, self.dtype)], name=node,
                               reserved_name=True).outputs[0]

    def assign(self, value: Any, name: Optional[str] = None) -> Tensor:
        """A node that stores `value` and outputs it."""
        return self._update("assign", value, name)

    def assign_add(self, value: Any, name: Optional[str] = None) -> Tensor:
        """A node that adds `value` into the variable and outputs the new value."""
        return self._update("assign_add", value, name)

    def assign_sub(self, value: Any, name: Optional[str] = None) -> Tensor:
        """A node that subtracts `value` from the variable and outputs the new value."""
        return self._update("assign_sub", value, name)

    def _update(self, kind: str, value: Any, name: Optional[str]) -> Tensor:
        graph = _update_graph(self.graph)
        with graph.as_default():
            tensor = value if isinstance(value, Tensor) else constant(value, dtype=self.dtype)
            node = graph.unique_name(name or f"{self.op.name.rsplit('/', 1)[-1]}/{kind}")
            _check_fits(kind, node, self, tensor)
            op = graph.create_op(kind, [tensor], {"variable": self.op.name},
                                 [(self.shape, self.dtype)], name=node, reserved_name=True)
        return op.outputs[0]

    def __repr__(self) -> str:
        return f"<Variable '{self.name}' shape={self.shape} dtype={self.dtype}>"


def _update_graph(home: Graph) -> Graph:
    """Where an assign goes: the function being traced for control flow inside `home` (so the
    assign runs only when its branch or loop body does), else the variable's own graph."""
    current = get_default_graph()
    reaches = getattr(current, "reaches", None)  # func_graph.FuncGraph
    return current if reaches is not None and current is not home and reaches(home) else home


def _check_fits(kind: str, node: str, var: Variable, value: Tensor) -> None:
    """Graph-time check that an assigned value can fit the variable (known dims must agree)."""
    if value.dtype != var.dtype:
        raise OpError(f"{kind} (node '{node}'): value has dtype {value.dtype} but variable "
                      f"'{var.op.name}' is {var.dtype}")
    if var.shape is None or value.shape is None:
        return
    if len(value.shape) != len(var.shape) or any(
            a is not None and b is not None and a != b for a, b in zip(value.shape, var.shape)):
        raise OpError(f"{kind} (node '{node}'): value of shape {list(value.shape)} does not fit "
                      f"variable '{var.op.name}' of shape {list(var.shape)}")


def _delegate(method: str) -> Callable:
    def op(self: Variable, *args: Any) -> Any:
        return getattr(self.value(), method)(*args)
    op.__name__ = method
    return op


# A Variable reads as its value in expressions: `w * x + b`.
for _m in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
           "__rtruediv__", "__matmul__", "__rmatmul__", "__pow__", "__neg__", "__getitem__",
           "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(Variable, _m, _delegate(_m))


def global_variables_initializer(graph: Optional[Graph] = None) -> Operation:
    """One node that runs every variable's initializer (named 'init')."""
    graph = graph or get_default_graph()
    inits = [v.initializer for v in graph.get_collection(GraphKeys.GLOBAL_VARIABLES)]
    return graph.create_op("no_op", [], {}, [], name="init", control_inputs=inits)


def trainable_variables(graph: Optional[Graph] = None) -> list[Variable]:
    """The variables created with trainable=True, in creation order."""
    return (graph or get_default_graph()).get_collection(GraphKeys.TRAINABLE_VARIABLES)


def global_variables(graph: Optional[Graph] = None) -> list[Variable]:
    """All variables of the graph, in creation order."""
    return (graph or get_default_graph()).get_collection(GraphKeys.GLOBAL_VARIABLES)
