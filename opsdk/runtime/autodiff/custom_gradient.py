"""`custom_gradient`: a function whose gradient is given by the author, not derived from its ops
(TensorFlow's `tf.custom_gradient`).

    @opsdk.custom_gradient
    def clip_gradient(x):
        def grad(dy):
            return opsdk.ops.clip_by_value(dy, clip_value_min=-1.0, clip_value_max=1.0)
        return opsdk.ops.identity(x), grad

The decorated function runs as written; its results pass through one `_custom_gradient` node
whose inputs are those results and then the function's tensor arguments. The node forwards the
results; its gradient rule calls `grad` (while the gradient graph is built, in this process) with
one gradient per result and hands what it returns to the arguments; the function's own ops get
no gradient through the results. `grad` returns one tensor (or None) per tensor argument, a
single one for a single argument.

`grad` lives in this process: a graph exported with the node runs (the node forwards its
values), but differentiating it in another process is an error naming the node. A function that
reads variables gets no gradient for them here (TensorFlow's `grad_fn(..., variables=...)`);
such a `grad` is refused when it is called.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import os
import weakref
from typing import Any, Callable, Optional

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.autodiff.gradients import filled_grads, register_gradient_rule
from opsdk.runtime.ir.graph import Operation, get_default_graph
from opsdk.runtime.ir.primitives import Primitive, register_primitive
from opsdk.runtime.ir.tensor import Tensor

CUSTOM_GRADIENT = "_custom_gradient"
# key -> the author's gradient function, as long as the graph holding its node lives
_FUNCTIONS: dict[str, Callable[..., Any]] = {}
_keys = itertools.count()


def custom_gradient(f: Callable[..., Any]) -> Callable[..., Any]:
    """`f(*args)` returns `(y, grad)`: y a tensor or a list/tuple of tensors, `grad(*dys)` the
    gradients for f's tensor arguments (see the module docstring)."""
    @functools.wraps(f)
    def decorated(*args: Any, **kwargs: Any) -> Any:
        result = f(*args, **kwargs)
        if not (isinstance(result, tuple) and len(result) == 2 and callable(result[1])):
            raise OpsdkError(f"custom_gradient: {_name(f)} must return (result, grad_fn), "
                             f"got {type(result).__name__}")
        y, grad = result
        if "variables" in inspect.signature(grad).parameters:
            raise OpsdkError(f"custom_gradient: {_name(f)}'s grad_fn takes `variables`; "
                             "gradients for variables read inside the function are not "
                             "supported (pass them as arguments instead)")
        ys = list(y) if isinstance(y, (list, tuple)) else [y]
        if not ys or not all(isinstance(t, Tensor) for t in ys):
            raise OpsdkError(f"custom_gradient: {_name(f)}'s result must be a tensor or a "
                             "list of tensors")
        xs = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        graph = ys[0].graph
        xs = [graph.capture(x) if x.graph is not graph else x for x in xs]
        key = f"{os.getpid()}:{next(_keys)}:{_name(f)}"
        _FUNCTIONS[key] = grad
        weakref.finalize(graph, _FUNCTIONS.pop, key, None)
        node = graph.create_op(CUSTOM_GRADIENT, [*ys, *xs],
                               {"function": key, "results": len(ys)},
                               [(t.shape, t.dtype) for t in ys],
                               name=f"{getattr(f, '__name__', 'custom')}_custom_gradient")
        outs = list(node.outputs)
        return type(y)(outs) if isinstance(y, (list, tuple)) else outs[0]
    return decorated


def _name(f: Any) -> str:
    return getattr(f, "__qualname__", type(f).__name__)


def _forward(ctx: Any, op: Operation, inputs: list) -> tuple:
    return tuple(inputs[:op.attrs["results"]])


def _gradient(op: Operation, out_grads: list, differentiate: Any) -> list[Optional[Tensor]]:
    key, k = op.attrs["function"], op.attrs["results"]
    grad = _FUNCTIONS.get(key)
    if grad is None:
        raise OpsdkError(f"{CUSTOM_GRADIENT} (node '{op.name}'): its gradient function "
                         f"'{key.split(':', 2)[-1]}' is not in this process (a graph made "
                         "elsewhere runs here, but differentiating it needs the function)")
    xs = op.inputs[k:]
    dys = filled_grads(op, out_grads)
    with get_default_graph().as_default():
        got = grad(*dys)
    grads = list(got) if isinstance(got, (list, tuple)) else [got]
    if len(grads) != len(xs):
        raise OpsdkError(f"{CUSTOM_GRADIENT} (node '{op.name}'): its gradient function "
                         f"returned {len(grads)} gradient(s) for {len(xs)} tensor argument(s)")
    for g, x in zip(grads, xs):
        if g is not None and (not isinstance(g, Tensor) or g.dtype != x.dtype):
            raise OpsdkError(f"{CUSTOM_GRADIENT} (node '{op.name}'): a gradient for argument "
                             f"'{x.name}' must be a {x.dtype} tensor or None, got "
                             f"{getattr(g, 'dtype', type(g).__name__)}")
    return [None] * k + grads


def _check(attrs: dict, outputs: list) -> Optional[str]:
    if not isinstance(attrs.get("function"), str):
        return "attr function must be a string key"
    k = attrs.get("results")
    if not isinstance(k, int) or isinstance(k, bool) or k != len(outputs) or k < 1:
        return f"attr results must be its number of outputs, {len(outputs)}"
    return None


register_primitive(Primitive(CUSTOM_GRADIENT, False, _forward,
                             "forwards its first `results` inputs; its gradient is a Python "
                             "function's (custom_gradient)", check=_check))
register_gradient_rule(CUSTOM_GRADIENT, _gradient)
