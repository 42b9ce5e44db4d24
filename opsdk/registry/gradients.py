"""The signature rule that ties an op to its gradient op, checked when a registry is loaded.

A gradient op of `f(x, y) -> z` takes `(x, y, grad_z)` or `(x, y, z, grad_z)` (the forward inputs
in order, optionally the forward outputs, then `grad_<output>` per output) and returns
`grad_<input>` for each differentiable input of f, each with the dtype and shape of that input.
Autodiff relies on exactly this, so a mismatch is a declaration error, not a run-time surprise.
"""

from __future__ import annotations

from dataclasses import replace

from .dtypes import is_differentiable_dtype
from .shapes import ConstDim, EllipsisDim, ExprDim, FreeDim, Name, SymDim, expr_names, format_shape
from .spec import OpSpec, TensorSpec


def inherit_named_dims(forward: OpSpec, grad: OpSpec) -> OpSpec:
    """`grad` with the forward op's named dims (`dims:`). A name of one in the gradient op's
    shapes becomes that dim (checked against its expression in inputs, computed in outputs)
    instead of a size bound from the gradient op's inputs; the gradient kernel gets every one
    the gradient op can compute (its dims and attrs suffice) as `dims.<name>`. `gradient_problems`
    says when a dim its shapes use reads a dim or attr the gradient op lacks."""
    own = set(grad.derived_dim_names)
    inherited = {d.name: d for d in forward.derived_dims if d.name not in own}
    used = {dim.name for t in grad.inputs + grad.outputs for dim in t.shape or ()
            if type(dim) is SymDim and dim.name in inherited}
    if not inherited:
        return grad
    readable = set(grad.dim_names) - used | own | {a.name for a in grad.attrs}
    taken = []
    for dim in inherited.values():  # in order: a named dim may read the ones before it
        if dim.name in used or expr_names(dim.expr) <= readable:
            taken.append(dim)
            readable.add(dim.name)

    def convert(t: TensorSpec) -> TensorSpec:
        if t.shape is None:
            return t
        return replace(t, shape=tuple(ExprDim(Name(d.name), d.name) if type(d) is SymDim and d.name in used else d
                                      for d in t.shape))
    return replace(grad, inputs=tuple(convert(t) for t in grad.inputs),
                   outputs=tuple(convert(t) for t in grad.outputs), derived_dims=grad.derived_dims + tuple(taken))


def _named_dim_problems(forward: OpSpec, grad: OpSpec, who: str) -> list[str]:
    """Each named dim the gradient op took from the forward op reads only what it has."""
    own = {a.name for a in grad.attrs if a.type in ("int", "bool", "str")}
    known = set(grad.dim_names) | set(grad.derived_dim_names) | own
    problems = []
    for dim in grad.derived_dims:
        if dim not in forward.derived_dims:
            continue
        for name in sorted(expr_names(dim.expr) - known):
            what = (f"attr '{name}'; declare it under attrs (autodiff passes it)" if forward.attrs
                    and name in {a.name for a in forward.attrs} else f"dim '{name}'; bind it in an input")
            problems.append(f"{who} uses dim '{dim.name}' of '{forward.name}' ({dim.text}), which reads "
                            f"{what}")
    return problems


def gradient_problems(forward: OpSpec, grad: OpSpec) -> list[str]:
    """What is wrong with `grad` as the gradient op of `forward` (empty when it fits)."""
    who = f"gradient op '{grad.name}' ({grad.location})"
    problems = _input_problems(forward, grad, who) + _output_problems(forward, grad, who)
    problems += _undeclared_attr_dims(forward, grad, who)
    problems += _attr_problems(forward, grad, who) + _type_attr_problems(forward, grad, who)
    return problems + _named_dim_problems(forward, grad, who)


def expected_gradient_inputs(forward: OpSpec, with_outputs: bool) -> list[str]:
    """The input names a gradient op of `forward` takes, in order."""
    outputs = [t.name for t in forward.outputs]
    middle = outputs if with_outputs else []
    return [t.name for t in forward.inputs] + middle + [f"grad_{o}" for o in outputs]


def _input_problems(forward: OpSpec, grad: OpSpec, who: str) -> list[str]:
    got = [t.name for t in grad.inputs]
    short, long = expected_gradient_inputs(forward, False), expected_gradient_inputs(forward, True)
    if got not in (short, long):
        return [f"{who} must take inputs ({', '.join(short)}) or ({', '.join(long)}); "
                f"it takes ({', '.join(got)})"]
    by_name = {t.name: (t, f"input '{t.name}'") for t in forward.inputs}
    by_name.update({t.name: (t, f"output '{t.name}'") for t in forward.outputs})
    by_name.update({f"grad_{t.name}": (t, f"output '{t.name}'") for t in forward.outputs})
    problems = []
    for tensor in grad.inputs:
        model, role = by_name[tensor.name]
        problems += _tensor_problems(tensor, model, f"{who}: input '{tensor.name}'", f"{role} of '{forward.name}'",
                                     _INPUT_FIX)
        if model.optional and not tensor.optional and tensor.name == model.name:
            problems.append(f"{who}: input '{tensor.name}' must be optional (optional: true), like "
                            f"{role} of '{forward.name}': autodiff passes None where it is absent")
    return problems


# What to write instead, after a shape mismatch (inputs may be looser than the forward's dims).
_INPUT_FIX = "; write the forward op's dims (a name or '_' may stand for a computed one)"
_OUTPUT_FIX = "; write the dims of that input"


def _output_problems(forward: OpSpec, grad: OpSpec, who: str) -> list[str]:
    expected = [f"grad_{name}" for name in forward.differentiable]
    got = [t.name for t in grad.outputs]
    if got != expected:
        shown = ", ".join(expected) or "nothing"
        return [f"{who} must return ({shown}), one per differentiable input of '{forward.name}'; "
                f"it returns ({', '.join(got)})"]
    problems = []
    for tensor in grad.outputs:
        model = forward.input(tensor.name[len("grad_"):])
        problems += _tensor_problems(tensor, model, f"{who}: output '{tensor.name}'",
                                     f"input '{model.name}' of '{forward.name}'", _OUTPUT_FIX)
    return problems


def _tensor_problems(tensor: TensorSpec, model: TensorSpec, what: str, role: str, fix: str) -> list[str]:
    problems = []
    if tensor.dtype != model.dtype:
        problems.append(f"{what} has dtype {tensor.dtype}; expected {model.dtype} (the dtype of {role})")
    if tensor.is_list != model.is_list:
        kind = "a list" if model.is_list else "a single tensor"
        problems.append(f"{what} must be {kind}, like {role}")
    if tensor.shape is not None and model.shape is not None and not _shapes_fit(tensor.shape, model.shape):
        problems.append(f"{what} has shape {format_shape(tensor.shape)}; expected "
                        f"{format_shape(model.shape)} (the shape of {role})"
                        f"{_same_text(tensor.shape, model.shape)}{fix}")
    return problems


_DIM_KINDS = {SymDim: "a dim bound from an input", ExprDim: "computed from int attrs and dims",
              ConstDim: "a fixed size", FreeDim: "a free dim"}


def _same_text(shape: tuple, model: tuple) -> str:
    """When both shapes print alike, which dim differs in kind (else the message would read
    'has shape [k]; expected [k]')."""
    if format_shape(shape) != format_shape(model):
        return ""
    for a, b in zip(shape, model):
        if a != b:
            shown = format_shape((a,))[1:-1]
            return (f": '{shown}' is {_DIM_KINDS.get(type(a), 'another kind of dim')} here but "
                    f"{_DIM_KINDS.get(type(b), 'another kind of dim')} there")
    return ""


def _shapes_fit(shape: tuple, model: tuple) -> bool:
    """Equal dim by dim, up to what _dim_fits allows."""
    return len(shape) == len(model) and all(_dim_fits(a, b) for a, b in zip(shape, model))


def _dim_fits(dim, model) -> bool:
    """`dim` (the gradient op's) may stand for `model` (the forward op's) when they are equal; when
    both are expressions that compute alike (the gradient op declares the attrs they read: the
    glue checks the size); when `dim` is a name or `_` for a computed dim (the gradient kernel
    checks that size itself, or need not know it); when `dim` is `_` for any dim; and when a free
    forward dim is matched by a name or `_`."""
    if dim == model:
        return True
    if isinstance(dim, EllipsisDim) or isinstance(model, EllipsisDim):
        return False
    if isinstance(dim, ExprDim) and isinstance(model, ExprDim):
        return dim.expr == model.expr
    if isinstance(dim, FreeDim):
        return True
    return isinstance(dim, SymDim) and isinstance(model, (ExprDim, FreeDim))


def _undeclared_attr_dims(forward: OpSpec, grad: OpSpec, who: str) -> list[str]:
    """A gradient op's dim named like an int attr of the forward op that it does not declare binds
    a size instead of checking it against the attr: almost surely the attr was forgotten."""
    int_attrs = {a.name for a in forward.attrs if a.type == "int"} - {a.name for a in grad.attrs}
    return [f"{who}: input '{t.name}' has dim '{d.name}', the name of an int attr of '{forward.name}' "
            f"that '{grad.name}' does not declare; declare it under attrs (the glue then checks that "
            f"size) or rename the dim"
            for t in grad.inputs for d in dict.fromkeys(t.shape or ())
            if isinstance(d, SymDim) and not isinstance(d, FreeDim) and d.name in int_attrs]


def _attr_problems(forward: OpSpec, grad: OpSpec, who: str) -> list[str]:
    """Autodiff passes the forward op's attrs, so the gradient op may require only those."""
    problems = []
    forward_attrs = {a.name: a for a in forward.attrs}
    for attr in grad.attrs:
        same = forward_attrs.get(attr.name)
        if same is None and attr.required:
            problems.append(f"{who} requires attr '{attr.name}', which '{forward.name}' does not have; "
                            f"give it a default or remove it")
        elif same is not None and same.type != attr.type:
            problems.append(f"{who}: attr '{attr.name}' is {attr.type} but {same.type} in '{forward.name}'")
    return problems


def _type_attr_problems(forward: OpSpec, grad: OpSpec, who: str) -> list[str]:
    """Every differentiable dtype the forward op accepts must reach a gradient kernel."""
    problems = []
    grad_allowed = {t.name: set(t.allowed) for t in grad.type_attrs}
    for ta in forward.type_attrs:
        if ta.name not in grad_allowed:
            continue
        missing = [x for x in ta.allowed if is_differentiable_dtype(x) and x not in grad_allowed[ta.name]]
        if missing:
            problems.append(f"{who}: type attr {ta.name} does not allow {', '.join(missing)}, "
                            f"which '{forward.name}' allows")
    return problems
