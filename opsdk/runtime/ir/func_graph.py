"""Sub-graphs for control flow: tracing a Python function into its own graph, and running one.

A control-flow node (`cond`, `while_loop`) holds its branches as `SubGraph`s: a `FuncGraph` plus
the placeholders that stand for its inputs and the tensors that are its outputs. Tracing calls the
user's function with the FuncGraph as the default graph; every outer tensor the function touches is
*captured*: replaced by a placeholder of the sub-graph and recorded, so the node can take the outer
tensor as an explicit input (nothing crosses a graph boundary except through the node's inputs).

    sub, structure = trace(outer, lambda: x * 2.0, (), "cond/then")
    sub.captures  # ((x, <placeholder in sub>),)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Mapping, Optional, Sequence


from opsdk.registry.dtypes import is_differentiable_dtype
from opsdk.registry.errors import OpsdkError

from opsdk.runtime.ir.graph import Graph, Operation, constant, get_default_graph, in_graph_context, placeholder
from opsdk.runtime.ir.tensor import Tensor


class FuncGraph(Graph):
    """A graph traced from a function inside `outer_graph`; outer tensors it uses are captured."""

    def __init__(self, outer_graph: Graph, name: str):
        super().__init__()
        self.outer_graph = outer_graph
        # The function's ops inherit the device scope the cond/while_loop is built under.
        outer_device = outer_graph.current_device()
        if outer_device:
            self._stacks.devices.append(outer_device)
        self.name = name
        self._captures: dict[Tensor, Tensor] = {}  # outer tensor -> its placeholder here
        self._copies: dict[Tensor, Tensor] = {}  # outer constant -> its copy here

    @property
    def captures(self) -> tuple[tuple[Tensor, Tensor], ...]:
        """(outer tensor, placeholder in this graph) pairs, in the order they were captured."""
        return tuple(self._captures.items())

    def reaches(self, graph: Graph) -> bool:
        """Whether `graph` is this graph or one it nests in (its tensors can be captured)."""
        current: Optional[Graph] = self
        while current is not None:
            if current is graph:
                return True
            current = getattr(current, "outer_graph", None)
        return False

    def capture(self, tensor: Tensor) -> Tensor:
        """The tensor of this graph that stands for `tensor` (itself when it is already ours)."""
        if tensor.graph is self:
            return tensor
        if not self.reaches(tensor.graph):
            raise OpsdkError(f"'{self.name}': tensor '{tensor.name}' belongs to a graph this "
                             "function is not traced in; use tensors of the enclosing graph")
        if tensor.op.type == "const" and not is_differentiable_dtype(tensor.dtype):
            # An int or bool constant (a shape, an axis) is copied, not captured: no edge, and
            # folding still sees it. A float one is captured: a gradient may be asked for it,
            # and a copy would have no path back (its gradient through the node would be lost).
            if tensor not in self._copies:
                with self.as_default(), self.control_dependencies(None):
                    self._copies[tensor] = constant(tensor.op.attrs["value"],
                                                    name=tensor.op.name.split("/")[-1])
            return self._copies[tensor]
        outer = self.outer_graph
        if outer is not tensor.graph:
            tensor = outer.capture(tensor)  # through every graph in between
        inner = self._captures.get(tensor)
        if inner is None:
            with self.as_default(), self.control_dependencies(None):
                inner = placeholder(tensor.dtype, tensor.shape,
                                    name="capture_" + tensor.op.name.replace("/", "_"))
            self._captures[tensor] = inner
        return inner

    def create_op(self, op_type: str, inputs: Sequence[Tensor], *args: Any, **kwargs: Any
                  ) -> Operation:
        """As `Graph.create_op`, with outer inputs captured first."""
        inputs = [self.capture(t) if isinstance(t, Tensor) and t.graph is not self else t
                  for t in inputs]
        controls = kwargs.get("control_inputs") or ()
        if any(self._foreign(c) for c in controls):
            raise OpsdkError(f"'{self.name}': a control dependency on a node outside the "
                             "function; put the control dependency around the cond/while_loop")
        return super().create_op(op_type, inputs, *args, **kwargs)

    def _current_overrides(self) -> Mapping[str, str]:
        """The outer graphs' gradient_override_map under this graph's own: a map opened on the
        graph a loop or branch is built in applies to the nodes its body makes (TF1 made them
        in that very graph)."""
        outer = self.outer_graph._current_overrides()
        own = super()._current_overrides()
        return {**outer, **own} if outer else own

    def _foreign(self, item: Any) -> bool:
        graph = getattr(item, "graph", None)
        return graph is not None and graph is not self


def building_graph(anchor: Optional[Tensor]) -> Graph:
    """The graph a control-flow node goes into: the innermost graph being built when it can
    capture `anchor`'s graph (nested control flow), else `anchor`'s graph, else the default."""
    if in_graph_context():
        current = get_default_graph()
        if anchor is None or current is anchor.graph or (
                isinstance(current, FuncGraph) and current.reaches(anchor.graph)):
            return current
    return anchor.graph if anchor is not None else get_default_graph()


@dataclass(frozen=True, eq=False)
class SubGraph:
    """A traced function: `inputs` are placeholders of `graph` bound, in order, to the node's
    inputs (after any the node takes first, e.g. cond's predicate); `outputs` are its results."""

    graph: FuncGraph
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]

    @property
    def name(self) -> str:
        return self.graph.name

    @cached_property
    def stateful(self) -> bool:
        """Whether running it has effects (an assign, randomness) anywhere inside, nested too."""
        return any(has_effects(op) for op in self.graph.operations)

    def effect_ops(self) -> list[Operation]:
        """The nodes with effects: a traced function runs them all, whether or not its outputs
        use them (as Python ran the assigns it met)."""
        return [op for op in self.graph.operations if has_effects(op)]


def has_effects(op: Operation) -> bool:
    """Whether running `op` has effects (state, randomness), inside its sub-graphs too."""
    subs = [v for v in op.attrs.values() if isinstance(v, SubGraph)]
    if subs:
        return any(s.stateful for s in subs)
    return op.stateful


def trace(outer: Graph, fn: Callable, args: Sequence[tuple[str, Any]], name: str
          ) -> tuple[FuncGraph, list[Tensor], Any]:
    """Call `fn(*placeholders)` with a new FuncGraph as the default graph.

    `args`: (dtype, shape) per positional placeholder. Returns the graph, the placeholders and
    what `fn` returned (its tensors still to be flattened by the caller)."""
    graph = FuncGraph(outer, name)
    with graph.as_default():
        params = [placeholder(dtype, shape, name=f"arg{i}") for i, (dtype, shape) in
                  enumerate(args)]
        result = fn(*params)
    return graph, params, result
