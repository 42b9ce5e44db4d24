"""The runtime's own node types: the few graph ops that are not YAML ops.

The op library (math, arrays, nn) is declared in YAML only. What remains here is what a runtime
needs to hold a graph together: feeding (`placeholder`), constants (`const`), grouping (`no_op`,
`identity`), and session state (`variable`, `read_variable`, `assign`, `assign_add`,
`assign_sub`) and Python callbacks (`py_func`). Control flow
adds its nodes to the same table with `register_primitive`.

A primitive's `run(ctx, op, inputs) -> tuple` gets a step context (`ctx.variables` is the
session's variable store) and returns one value per output of the node. Values may be arrays of
any device (NumPy, CuPy, the test device's): primitives use only what every array has (shape,
dtype, astype, operators). `prepare(op, device, options) -> run`, when a primitive has it, is
called once when a plan is compiled and gives the run function of that node (control flow
compiles its sub-graphs there).
"""

from __future__ import annotations

from dataclasses import dataclass
import operator
import os
from typing import Any, Callable, Optional

import numpy as np

from opsdk.registry.errors import OpError, OpsdkError

RunFn = Callable[[Any, Any, list], tuple]


@dataclass(frozen=True)
class Primitive:
    """One runtime node type. `stateful` nodes are never folded, merged or run at plan time."""

    name: str
    stateful: bool
    run: Optional[RunFn]  # None: the plan provides the value (placeholder feeds, const values)
    doc: str
    foldable: bool = False  # a pure function of its inputs that folding may run at plan time
    prepare: Optional[Callable[..., RunFn]] = None
    # check(attrs, outputs) -> what is inconsistent in a new node of this type, or None
    check: Optional[Callable[[dict, list], Optional[str]]] = None


PRIMITIVES: dict[str, Primitive] = {}


def register_primitive(primitive: Primitive) -> Primitive:
    """Add a node type to the table (control flow and distribution add theirs this way)."""
    if primitive.name in PRIMITIVES:
        raise OpsdkError(f"runtime primitive '{primitive.name}' is already registered")
    PRIMITIVES[primitive.name] = primitive
    return primitive


def _not_prepared(ctx, op, inputs) -> tuple:
    raise OpsdkError(f"{op.type} (node '{op.name}') runs only inside a compiled plan")


def _no_op(ctx, op, inputs) -> tuple:
    return ()


def _identity(ctx, op, inputs) -> tuple:
    return (inputs[0],)


def _read_variable(ctx, op, inputs) -> tuple:
    return (ctx.variables.read(op.name),)


def _prepare_read(op, device, options) -> RunFn:
    """A variable read on the device the node was placed on: a value stored on another device
    (restored from a checkpoint, assigned elsewhere) is copied over."""
    return lambda ctx, op, inputs: (ctx.variables.read(op.name, device),)


def _reread(ctx, op, inputs) -> tuple:
    """A `read_variable` node: the value of the variable its attr names, read when the node
    runs (its input, the variable node's value, only gives autodiff a path to the variable)."""
    return (ctx.variables.read(op.attrs["variable"]),)


def _prepare_reread(op, device, options) -> RunFn:
    return lambda ctx, op, inputs: (ctx.variables.read(op.attrs["variable"], device),)


# Assign nodes name their variable in attrs rather than taking its value as an input: an input
# edge would make the initializer read the variable before it holds anything.
def _assign(ctx, op, inputs) -> tuple:
    return (ctx.variables.assign(op.attrs["variable"], _checked(op, inputs[0])),)


def assign_fresh(ctx, op, inputs) -> tuple:
    """`assign` of a value that only this step holds (compile/plan.py decides): stored as is."""
    return (ctx.variables.assign(op.attrs["variable"], _checked(op, inputs[0]), fresh=True),)


def _assign_add(ctx, op, inputs) -> tuple:
    return (ctx.variables.update(op.attrs["variable"], _checked(op, inputs[0]), operator.add),)


def _assign_sub(ctx, op, inputs) -> tuple:
    return (ctx.variables.update(op.attrs["variable"], _checked(op, inputs[0]), operator.sub),)


def _checked(op, value) -> Any:
    """The value an assign node stores: the variable's dtype, a shape its static shape allows."""
    shape, dtype = op.outputs[0].shape, op.outputs[0].dtype
    if not hasattr(value, "astype"):
        value = np.asarray(value)
    if shape is not None and (value.ndim != len(shape) or any(
            d is not None and d != s for d, s in zip(shape, value.shape))):
        raise OpError(f"{op.type} (node '{op.name}'): value of shape {list(value.shape)} does not "
                      f"fit variable '{op.attrs['variable']}' of shape {list(shape)}")
    return value.astype(dtype, copy=False)


# py_func: the functions of this process's py_func nodes by key (opsdk/runtime/frontend/
# py_func.py adds them; a node holds the key, so a graph stays exportable).
PY_FUNC = "py_func"
PY_FUNCTIONS: dict[str, Callable[..., Any]] = {}


class PyFuncError(OpError):
    """A py_func's function raised; `raised` is what it raised (`__cause__` too), so a caller
    can tell an exhausted source (StopIteration) from a failure."""

    def __init__(self, message: str, raised: BaseException):
        super().__init__(message)
        self.raised = raised


def _prepare_py_func(op, device, options) -> RunFn:
    def run(ctx, op, inputs) -> tuple:
        who = f"py_func (node '{op.name}')"
        func = PY_FUNCTIONS.get(op.attrs["function"])
        if func is None:
            raise OpError(f"{who}: its Python function '{op.attrs['function']}' is not in this "
                          f"process (pid {os.getpid()}); a py_func runs only in the process "
                          "that built its graph")
        args = [value if device.is_host else device.to_host(value) for value in inputs]
        if getattr(func, "takes_step_context", False):  # a function that may block: it gets
            args.insert(0, ctx)  # the step (its cancellation token, its session) first
        try:
            result = func(*args)
        except Exception as exc:
            raise PyFuncError(f"{who}: its function raised {type(exc).__name__}: {exc}",
                              exc) from exc
        wanted = [t.dtype for t in op.outputs]
        # as TensorFlow's: a list or tuple holds one value per output, anything else is one
        values = list(result) if isinstance(result, (list, tuple)) else (
            [] if result is None and not wanted else [result])
        if len(values) != len(wanted):
            raise OpError(f"{who}: its function returned {len(values)} values for "
                          f"{len(wanted)} outputs ({', '.join(wanted)})")
        out = []
        for k, (value, dtype) in enumerate(zip(values, wanted)):
            try:
                array = np.asarray(value, dtype=dtype)
            except (TypeError, ValueError) as exc:
                raise OpError(f"{who}: result {k} ({type(value).__name__}) is not convertible "
                              f"to its declared {dtype}: {exc}") from None
            shape = op.outputs[k].shape  # unknown, or declared by the caller (set_shape)
            if shape is not None and (array.ndim != len(shape) or any(
                    d is not None and d != n for d, n in zip(shape, array.shape))):
                raise OpError(f"{who}: result {k} has shape {list(array.shape)}, but its "
                              f"tensor was declared {list(shape)}")
            out.append(array if device.is_host else device.from_host(array))
        return tuple(out)
    return run


def _check_py_func(attrs: dict, outputs: list) -> Optional[str]:
    if not isinstance(attrs.get("function"), str):
        return "attr function (the key of its Python function) must be a string"
    return None


def _check_const(attrs: dict, outputs: list) -> Optional[str]:
    """A constant's value must be what its output says: a graph file or a caller cannot
    declare float32 and hold float64."""
    value = attrs.get("value")
    if not isinstance(value, np.ndarray):
        return f"its value is a {type(value).__name__}, not an array"
    if len(outputs) != 1:
        return f"it has {len(outputs)} outputs; a constant has one"
    shape, dtype = outputs[0]
    if np.dtype(dtype) != value.dtype:
        return f"its output is declared {np.dtype(dtype).name} but its value is {value.dtype.name}"
    if shape is None or tuple(shape) != value.shape:
        return f"its output is declared with shape {shape} but its value has {list(value.shape)}"
    return None


def _check_declared(attrs: dict, outputs: list) -> Optional[str]:
    """A placeholder's or variable's attrs (dtype, shape) must be its output's."""
    if len(outputs) != 1:
        return f"it has {len(outputs)} outputs, not one"
    shape, dtype = outputs[0]
    if "dtype" in attrs and np.dtype(attrs["dtype"]) != np.dtype(dtype):
        return f"attr dtype {attrs['dtype']} but its output is {np.dtype(dtype).name}"
    declared = attrs.get("shape")
    if (declared is None) != (shape is None) or (
            declared is not None and tuple(declared) != tuple(shape)):
        return f"attr shape {declared} but its output has shape {shape}"
    return None


for _prim in (
    Primitive("placeholder", False, None, "a value the caller feeds at run time",
              check=_check_declared),
    Primitive("const", False, None, "a constant held in attrs['value']", check=_check_const),
    Primitive("no_op", False, _no_op, "groups control dependencies; no outputs"),
    Primitive("identity", False, _identity, "forwards its input (a named alias)", foldable=True),
    # The variable node's output is the variable's current value in the running session.
    Primitive("variable", True, _read_variable, "reads a variable's value in this session",
              prepare=_prepare_read, check=_check_declared),
    # A read ordered after control dependencies: the variable node is one read for every reader.
    Primitive("read_variable", True, _reread,
              "reads a variable's value when it runs (after its control inputs)",
              prepare=_prepare_reread),
    Primitive("assign", True, _assign, "stores a new value into a variable; outputs it"),
    Primitive("assign_add", True, _assign_add, "adds into a variable; outputs the new value"),
    Primitive("assign_sub", True, _assign_sub, "subtracts from a variable; outputs the new value"),
    Primitive(PY_FUNC, True, _not_prepared, "calls a Python function of this process on its "
              "inputs' values", prepare=_prepare_py_func, check=_check_py_func),
):
    register_primitive(_prim)
