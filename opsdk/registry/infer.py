"""Shape and dtype inference from a declaration: the graph-time shape function of every op.

Symbolic dims bind across inputs (the first known size wins, later ones must agree), constant
dims and ranks are checked, `...` must agree between the tensors that have it, and output shapes
are evaluated from dims and int attrs. Unknown sizes (None) and unknown ranks (None) propagate
and never raise. Messages start with `<op>: ` so the runtime can name the node after the op.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional, Sequence

from .attrs import dtype_name
from .callables import load_callable
from .errors import OpError, OpsdkError
from .shapes import ConstDim, EllipsisDim, ExprDim, SymDim, eval_expr, format_shape
from .spec import ABSENT, OpSpec, TensorSpec

ShapeT = Optional[tuple]  # tuple of int|None, or None for an unknown rank


def axis_word(axis: int, rank: int) -> str:
    """How an axis is named in messages: 'rows', 'columns', or 'size in axis k'."""
    if rank == 2:
        return "rows" if axis == 0 else "columns"
    return f"size in axis {axis}"


def axis_phrase(size: Any, axis: int, rank: int) -> str:
    """`4 columns` / `size 4 in axis 2`: a size on an axis, as messages say it (size may be a
    placeholder text, for glue that fills it in at run time)."""
    if rank == 2:
        return f"{size} {axis_word(axis, rank)}"
    return f"size {size} in axis {axis}"


def dtype_list_text(allowed: Sequence[str]) -> str:
    """`float32`, `float32 or float64`, `one of float16, float32, float64`."""
    if len(allowed) <= 2:
        return " or ".join(allowed)
    return "one of " + ", ".join(allowed)


def _per_input(spec: OpSpec, values: Any, what: str) -> list:
    if isinstance(values, Mapping):
        return [values.get(t.name) for t in spec.inputs]
    values = list(values)
    if len(values) != len(spec.inputs):
        names = ", ".join(t.name for t in spec.inputs)
        raise OpError(f"{spec.name}: takes {len(spec.inputs)} inputs ({names}), got {len(values)} {what}")
    return values


def resolve_type_attrs(spec: OpSpec, input_dtypes: Any, attrs: Mapping[str, Any]) -> dict[str, Optional[str]]:
    """The dtype name of every type attr: from the inputs that carry it (checked: allowed, and
    shared), else from attrs by its name, else its default. None when only unknown dtypes carry it."""
    options = {t.name: t.allowed for t in spec.type_attrs}
    bound: dict[str, tuple[str, str]] = {}
    for tensor, given in zip(spec.inputs, _per_input(spec, input_dtypes, "dtypes")):
        if given is ABSENT:
            continue
        items = given if tensor.is_list and isinstance(given, (list, tuple)) else [given]
        for index, item in enumerate(items):
            label = f"{tensor.name}[{index}]" if tensor.is_list and len(items) > 1 else tensor.name
            _bind_dtype(spec, tensor, label, None if item is None else dtype_name(item), options, bound)
    result: dict[str, Optional[str]] = {}
    for ta in spec.type_attrs:
        if ta.name in bound:
            result[ta.name] = bound[ta.name][1]
        elif any(t.dtype == ta.name for t in spec.inputs):
            result[ta.name] = None  # carried by inputs whose dtype is not known yet
        else:
            result[ta.name] = _unbound_dtype(spec, ta, attrs)
    return result


def _bind_dtype(spec: OpSpec, tensor: TensorSpec, label: str, dtype: Optional[str],
                options: dict, bound: dict) -> None:
    if dtype is None:
        return
    if tensor.dtype not in options:
        if dtype != tensor.dtype:
            raise OpError(f"{spec.name}: input '{label}' has dtype {dtype}; expected {tensor.dtype}")
        return
    allowed = options[tensor.dtype]
    if dtype not in allowed:
        raise OpError(f"{spec.name}: input '{label}' has dtype {dtype}; expected {dtype_list_text(allowed)} "
                      f"(type attr {tensor.dtype})")
    first = bound.setdefault(tensor.dtype, (label, dtype))
    if first[1] != dtype:
        raise OpError(f"{spec.name}: inputs '{first[0]}' and '{label}' share type attr {tensor.dtype} "
                      f"but have {first[1]} and {dtype}")


def _unbound_dtype(spec: OpSpec, ta, attrs: Mapping[str, Any]) -> str:
    value = attrs.get(ta.name)
    if value is None:
        if ta.default is None:
            raise OpError(f"{spec.name}: type attr '{ta.name}' is not set; pass {ta.name}= "
                          f"{dtype_list_text(ta.allowed)}")
        return ta.default
    name = dtype_name(value)
    if name not in ta.allowed:
        raise OpError(f"{spec.name}: type attr '{ta.name}' must be {dtype_list_text(ta.allowed)}, got {value!r}")
    return name


def infer_outputs(spec: OpSpec, input_shapes: Any, input_dtypes: Any,
                  attrs: Mapping[str, Any]) -> list[tuple[Any, Optional[str]]]:
    """(shape, dtype) per output, checking the inputs against the declaration (OpError).

    `input_shapes`: per input (in order, or a mapping by name) a tuple of int|None, None for an
    unknown rank, and for a list input a list of those. A list output's shape is a list of N
    shapes. `attrs` are the call's (normalised) attrs; missing ones take their defaults.

    >>> infer_outputs(pm, [(4, 3), (None, 3)], ["float32", "float32"], {})  # doctest: +SKIP
    [((4, None), 'float32')]
    """
    return infer_call(spec, input_shapes, input_dtypes, attrs).outputs


class Inferred(NamedTuple):
    """What inference learns of one call: (shape, dtype) per output, the sizes dim expressions
    read (every bound dim and int attr), and the dtype of every type attr."""
    outputs: list[tuple[Any, Optional[str]]]
    sizes: dict[str, Optional[int]]
    types: dict[str, Optional[str]]


def infer_call(spec: OpSpec, input_shapes: Any, input_dtypes: Any,
               attrs: Mapping[str, Any]) -> Inferred:
    """`infer_outputs`, with the sizes and type attrs it bound on the way."""
    dtypes = resolve_type_attrs(spec, input_dtypes, attrs)
    shapes = _per_input(spec, input_shapes, "shapes")
    check_presence(spec, shapes)
    binder = _Binder(spec)
    for tensor, shape in binding_order(spec, shapes):
        binder.bind_input(tensor, shape)
    env = dim_env(spec, binder.dims, attrs)
    binder.check_computed(env)
    if spec.shape_fn is not None:
        out_shapes = _call_shape_fn(spec, shapes, attrs)
    else:
        out_shapes = [binder.output_shape(t, env, attrs) for t in spec.outputs]
    return Inferred([(shape, dtypes.get(t.dtype, t.dtype)) for t, shape in zip(spec.outputs, out_shapes)],
                    env, dtypes)


def check_presence(spec: OpSpec, values: Sequence[Any]) -> None:
    """Only an optional input may be absent (ABSENT, the caller's None)."""
    for tensor, value in zip(spec.inputs, values):
        if value is ABSENT and not tensor.optional:
            raise OpError(f"{spec.name}: input '{tensor.name}' is required; got None")


def binding_order(spec: OpSpec, values: Sequence[Any]) -> list[tuple[TensorSpec, Any]]:
    """(input, value) pairs in the order dims bind: the required inputs, then the optional ones
    that are present, each group in declaration order. So a dim that a required input binds never
    depends on whether an optional input was given (the generated glue binds in the same order)."""
    pairs = list(zip(spec.inputs, values))
    return ([p for p in pairs if not p[0].optional]
            + [p for p in pairs if p[0].optional and p[1] is not ABSENT])


_ENV_ATTR_TYPES = ("int", "bool", "str")  # what dim expressions read (bool and str in conditions)


def dim_env(spec: OpSpec, bound: Mapping[str, Optional[int]], attrs: Mapping[str, Any]) -> dict[str, Any]:
    """What dim expressions read: the bound dims, the int, bool and str attrs (a missing one takes
    its default; None when required), then each named dim (`dims:`) computed in order. Raises
    OpError naming the dim when one is negative or divides by zero."""
    env: dict[str, Any] = dict(bound)
    for attr in spec.attrs:
        if attr.type in _ENV_ATTR_TYPES:
            env[attr.name] = attrs.get(attr.name, None if attr.required else attr.default)
    for dim in spec.derived_dims:
        try:
            size = eval_expr(dim.expr, env)
        except ZeroDivisionError:
            raise OpError(f"{spec.name}: dim '{dim.name}': division by zero in '{dim.text}'") from None
        if size is not None and size < 0:
            raise OpError(f"{spec.name}: dim '{dim.name}' ({dim.text}) would be {size}; check the inputs and attrs")
        env[dim.name] = size
    return env


def _call_shape_fn(spec: OpSpec, shapes: list, attrs: Mapping[str, Any]) -> list:
    from .shape_fns import SHAPE_FNS  # the named table is filled by the builtin library

    fn = SHAPE_FNS.get(spec.shape_fn) or load_callable(spec, spec.shape_fn, "shape_fn")
    named = {t.name: _normalized(t, s) for t, s in zip(spec.inputs, shapes) if s is not ABSENT}
    try:
        result = list(fn(named, dict(attrs)))
    except ValueError as exc:
        raise OpError(f"{spec.name}: {exc}") from None
    if len(result) != len(spec.outputs):
        raise OpsdkError(f"op '{spec.name}': shape_fn '{spec.shape_fn}' gave {len(result)} shapes "
                         f"for {len(spec.outputs)} outputs")
    return [_normalized(t, s) for t, s in zip(spec.outputs, result)]


def _normalized(tensor: TensorSpec, shape: Any) -> Any:
    if shape is None:
        return None
    if tensor.is_list:
        return [_tuple(s) for s in shape]
    return _tuple(shape)


def _tuple(shape: Any) -> ShapeT:
    return None if shape is None else tuple(None if d is None else int(d) for d in shape)


class _Binder:
    """Sizes of symbolic dims and of the `...` dims, each remembering which input gave it."""

    def __init__(self, spec: OpSpec):
        self.spec = spec
        self.dims: dict[str, Optional[int]] = {}
        self.dim_source: dict[str, str] = {}
        self.ellipsis: Optional[tuple] = None
        self.ellipsis_source = ""
        # Input dims given by expressions, checked once every dim is bound: (label, dim, size, axis, rank).
        self.computed: list[tuple[str, ExprDim, int, int, int]] = []

    def bind_input(self, tensor: TensorSpec, shape: Any) -> None:
        if tensor.shape is None or shape is None:
            return
        if tensor.is_list:
            if not isinstance(shape, (list, tuple)) or any(isinstance(s, int) for s in shape):
                raise OpError(f"{self.spec.name}: input '{tensor.name}' is a list of tensors; got one shape")
            for index, item in enumerate(shape):
                if item is not None:
                    self.bind(tensor, f"{tensor.name}[{index}]", _tuple(item))
        else:
            self.bind(tensor, tensor.name, _tuple(shape))

    def bind(self, tensor: TensorSpec, label: str, shape: tuple) -> None:
        declared = tensor.shape
        core = declared[1:] if tensor.has_ellipsis else declared
        rank = len(shape)
        if tensor.has_ellipsis:
            if rank < len(core):
                raise OpError(f"{self.spec.name}: input '{label}' must have rank >= {len(core)} "
                              f"({format_shape(declared)}), got rank {rank}")
            self._bind_ellipsis(label, shape[:rank - len(core)])
        elif rank != len(core):
            raise OpError(f"{self.spec.name}: input '{label}' must have rank {len(core)} "
                          f"({format_shape(declared)}), got rank {rank}")
        offset = rank - len(core)
        for position, dim in enumerate(core):
            self._bind_dim(label, dim, shape[offset + position], offset + position, rank)

    def _bind_dim(self, label: str, dim, size: Optional[int], axis: int, rank: int) -> None:
        if size is None:
            return
        if isinstance(dim, ExprDim):
            self.computed.append((label, dim, size, axis, rank))
            return
        if isinstance(dim, ConstDim):
            if size != dim.size:
                raise OpError(f"{self.spec.name}: input '{label}' must have {axis_phrase(dim.size, axis, rank)}, "
                              f"got {size}")
            return
        known = self.dims.get(dim.name)
        if known is None:
            self.dims[dim.name], self.dim_source[dim.name] = size, label
        elif known != size:
            raise OpError(f"{self.spec.name}: input '{label}' has {axis_phrase(size, axis, rank)} but "
                          f"{self.dim_source[dim.name]} has {known} (dim {dim.name})")

    def check_computed(self, env: dict) -> None:
        """Each input dim declared by an expression (`grad_y: [num_segments, d]`) has its value,
        where the dims and attrs it reads are known."""
        for label, dim, size, axis, rank in self.computed:
            try:
                want = eval_expr(dim.expr, env)
            except ZeroDivisionError:
                raise OpError(f"{self.spec.name}: input '{label}': division by zero in '{dim.text}'") from None
            if want is not None and want != size:
                raise OpError(f"{self.spec.name}: input '{label}' must have {axis_phrase(want, axis, rank)} "
                              f"({dim.text}), got {size}")

    def _bind_ellipsis(self, label: str, prefix: tuple) -> None:
        if self.ellipsis is None:
            self.ellipsis, self.ellipsis_source = prefix, label
            return
        known = self.ellipsis
        agree = len(known) == len(prefix) and all(a is None or b is None or a == b for a, b in zip(known, prefix))
        if not agree:
            raise OpError(f"{self.spec.name}: input '{label}' has leading dims {_dims_text(prefix)} but "
                          f"{self.ellipsis_source} has {_dims_text(known)} (the '...' dims)")
        self.ellipsis = tuple(a if a is not None else b for a, b in zip(known, prefix))

    def output_shape(self, tensor: TensorSpec, env: dict, attrs: Mapping[str, Any]) -> Any:
        if tensor.has_ellipsis and self.ellipsis is None:
            shape = None  # the leading dims come from an input of unknown rank
        else:
            shape = tuple(self._output_dims(tensor, env))
        if tensor.is_list:
            n = attrs.get(tensor.list_len)
            return None if n is None else [shape] * int(n)
        return shape

    def _output_dims(self, tensor: TensorSpec, env: dict):
        # The real axis of a declared dim: `...` stands for len(self.ellipsis) axes.
        shift = len(self.ellipsis) - 1 if tensor.has_ellipsis else 0
        for index, dim in enumerate(tensor.shape):
            axis = index + shift if index else index
            if isinstance(dim, EllipsisDim):
                yield from self.ellipsis
            elif isinstance(dim, ConstDim):
                yield dim.size
            elif isinstance(dim, SymDim):
                yield env.get(dim.name)
            else:
                yield self._evaluate(tensor, dim, env, axis)

    def _evaluate(self, tensor: TensorSpec, dim: ExprDim, env: dict, axis: int) -> Optional[int]:
        try:
            size = eval_expr(dim.expr, env)
        except ZeroDivisionError:
            raise OpError(f"{self.spec.name}: output '{tensor.name}': division by zero in '{dim.text}'") from None
        if size is not None and size < 0:
            raise OpError(f"{self.spec.name}: output '{tensor.name}' would have size {size} in axis {axis} "
                          f"({dim.text}); check the inputs and attrs")
        return size


def _dims_text(dims: tuple) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in dims) + (",)" if len(dims) == 1 else ")")
