"""`py_func`: a node that calls a Python function on its inputs' values when the step runs.

    y = py_func(lambda a, b: np.sort(a) + b, [x, z], "float32")

The function gets NumPy arrays (copied from a device when the node runs on one) and returns one
array-like per declared output dtype, converted to it as TensorFlow's `py_func` converts them
(`np.asarray(value, dtype)`). The node holds a key, not the function: the function stays in a
process-wide table of the process that built the graph (the node's graph keeps it alive), so a
graph exported with the project's graph format, or a partition run by another process, names
the key and fails clearly there. Output shapes are unknown until the node runs (`set_shape` or
`reshape` declare them); a py_func passes no gradient. Every py_func node is stateful: it runs
once per step that needs it, and is never folded or merged with another.

A function with the attribute `takes_step_context = True` (set by `takes_step`) is called
with the running step's context first (`func(ctx, *values)`): `ctx.session` is the session running the step, and
`ctx.token` its cancellation token, which a function that waits (for a queue's next element)
checks with `ctx.token.check(where)` or `ctx.token.cancelled`, so that `Session.close()`,
Ctrl-C and `Session.run(..., timeout=)` stop the wait.
"""

from __future__ import annotations

import itertools
import os
import weakref
from typing import Any, Callable, Optional, Sequence

import numpy as np

from opsdk.registry.dtypes import DTYPE_NAMES
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.operators import lift
from opsdk.runtime.ir.func_graph import building_graph
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.ir.primitives import PY_FUNC, PY_FUNCTIONS

__all__ = ["py_func", "py_func_node"]

_keys = itertools.count()


def py_func(func: Callable[..., Any], inp: Sequence[Any], Tout: Any, stateful: bool = True,
            name: Optional[str] = None) -> Any:
    """A node calling `func(*values of inp)` when it runs. `Tout`: one dtype (the node has one
    output, returned alone) or a list of dtypes (a list of outputs, one per dtype).
    `stateful=False` is accepted; the node is treated as stateful all the same (never merged
    with a like node, as TensorFlow may merge stateless ones)."""
    single = not isinstance(Tout, (list, tuple))
    op = py_func_node(func, inp, [Tout] if single else Tout, name=name)
    return op.outputs[0] if single else list(op.outputs)


def takes_step(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark `fn` to be called with the running step's context first (the module docstring)."""
    fn.takes_step_context = True  # type: ignore[attr-defined]
    return fn


def py_func_node(func: Callable[..., Any], inp: Sequence[Any], Tout: Sequence[Any],
                 name: Optional[str] = None) -> Operation:
    """The py_func node itself, one output per dtype of `Tout` (none: a node run for its effect,
    as TF1's tf.print makes)."""
    if not callable(func):
        raise OpsdkError(f"py_func: func must be callable, not {type(func).__name__}")
    if not isinstance(inp, (list, tuple)):
        inp = [inp]
    dtypes = [_dtype(t) for t in Tout]
    anchor = next((t for t in inp if isinstance(t, Tensor)), None)
    graph = building_graph(anchor)
    with graph.as_default():
        inputs = [lift(v) for v in inp]
    inputs = [graph.capture(t) if t.graph is not graph else t for t in inputs]
    key = f"{os.getpid()}:{next(_keys)}:{getattr(func, '__qualname__', type(func).__name__)}"
    PY_FUNCTIONS[key] = func
    weakref.finalize(graph, PY_FUNCTIONS.pop, key, None)  # lives as long as its graph
    return graph.create_op(PY_FUNC, inputs, {"function": key}, [(None, d) for d in dtypes],
                           name=name or "PyFunc")


def _dtype(t: Any) -> str:
    """A dtype name from a name, a NumPy dtype or an object with a `name` (TF1's dtypes)."""
    try:
        name = np.dtype(getattr(t, "name", t)).name
    except TypeError:
        name = None
    if name not in DTYPE_NAMES:
        raise OpsdkError(f"py_func: Tout holds {t!r}, which is not one of the dtypes "
                         f"{', '.join(DTYPE_NAMES)}")
    return name
