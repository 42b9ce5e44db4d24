"""Hypothesis strategies derived from an op's declaration: dims, list lengths, attrs and inputs.

`plan_op` reads the declaration once (dtypes, precision, value rule, which attrs to draw);
`case_strategy(plan)` then draws `Case`s: sizes for the symbolic dims within
`gradcheck.dims`, 0-2 leading dims for `...`, list lengths, attrs (the values the declaration
lists under `gradcheck: {attrs: ...}`, else within their bounds or choices: `attr_draws.py`), and
input values in the declared domain. Invalid combinations that the declaration
cannot rule out (an attr that does not fit a drawn rank) are left to the op's own validation,
which the checker turns into a rejected example.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from opsdk.registry.attrs import unmet_requirement
from opsdk.registry.dtypes import FLOAT_DTYPES, INT_DTYPES
from opsdk.registry.shapes import ConstDim, EllipsisDim, ExprDim, SymDim, eval_expr
from opsdk.registry.spec import AttrSpec, OpSpec, TensorSpec

from .attr_draws import GIVEN, LEFT_OUT, AttrPlan, plan_attr, shown_value
from .precision import Precision, precision_for
from .values import ValueRule, bool_array, index_array, spread_floats

MAX_LEADING_DIMS = 2  # how many dims `...` may stand for in a drawn case
MAX_FREE_RANK = 3  # rank of inputs whose shape only a shape function knows
MAX_LIST_LEN = 3
# A stress case keeps every input within this many elements (the other dims shrink to fit):
# finite differences cost two calls of the op per element.
MAX_STRESS_ELEMENTS = 1024
# The least distance between two values of a forward-only case (nondegenerate): small enough for
# the stress cases' elements to fit the domain's slots, large enough to tell values apart.
NONDEGENERATE_GAP = 1e-4


@dataclass(frozen=True)
class OpPlan:
    """Everything needed to draw cases for one op, worked out once from its declaration."""

    spec: OpSpec
    dtypes: tuple[tuple[str, str], ...]  # input name -> dtype name used in the check
    type_values: tuple[tuple[str, str], ...]  # unbound type attr -> dtype name passed as an attr
    precision: Precision
    rule: ValueRule
    attrs: tuple[AttrPlan, ...]
    list_lens: tuple[tuple[str, int, int], ...]  # list attr name, min, max
    skip: Optional[str] = None  # why this op cannot be checked, when it cannot
    optional: tuple[str, ...] = ()  # optional inputs: each case gives them or leaves them out

    def dtype_of(self, name: str) -> str:
        return dict(self.dtypes)[name]


@dataclass(frozen=True, eq=False)
class Case:
    """One drawn example: dim sizes, attrs and input arrays (a tuple of arrays for list inputs)."""

    dims: tuple[tuple[str, int], ...]
    leading: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...]
    inputs: tuple[tuple[str, Any], ...]
    extra: dict = field(default_factory=dict, compare=False)
    lens: tuple[tuple[str, int], ...] = ()  # the length attr of each list input, drawn
    presence: tuple[tuple[str, Any], ...] = ()  # per optional input, GIVEN or LEFT_OUT (None)

    def grid_dict(self) -> dict[str, Any]:
        """The attrs and list lengths: what an attr combination (`AttrGrid.key`) is made of."""
        return {**dict(self.attrs), **dict(self.lens), **dict(self.presence)}

    def input_dict(self) -> dict[str, Any]:
        return dict(self.inputs)

    def attr_dict(self) -> dict[str, Any]:
        return dict(self.attrs)

    def describe(self) -> str:
        """`dims n=2 p=3; ...=(1,); attrs k=1; x float64[2, 3], y float64[4, 3]`, for reports."""
        parts = []
        if self.dims:
            parts.append("dims " + " ".join(f"{k}={v}" for k, v in self.dims))
        if self.leading:
            parts.append(f"...={tuple(self.leading)}")
        if self.lens:
            parts.append("lists " + " ".join(f"{k}={v}" for k, v in self.lens))
        if self.attrs:
            parts.append("attrs " + " ".join(f"{k}={shown_value(v)}" for k, v in self.attrs))
        parts.append(", ".join(f"{k} {_array_text(v)}" for k, v in self.inputs))
        return "; ".join(parts)


ARRAY_PRINT_LIMIT = 36  # counterexamples print their arrays up to this many elements in all


def arrays_text(named: dict[str, Any]) -> str:
    """`    x = [[0.5, -1.25]]` lines for small arrays; '' when they are too big to read."""
    flat: list[tuple[str, Any]] = []
    for name, value in named.items():
        if isinstance(value, (list, tuple)):
            flat.extend((f"{name}[{i}]", v) for i, v in enumerate(value))
        else:
            flat.append((name, value))
    if sum(np.size(v) for _, v in flat) > ARRAY_PRINT_LIMIT:
        return ""
    return "\n".join(f"    {name} = " + np.array2string(np.asarray(v), precision=17, separator=", ",
                                                        max_line_width=10_000) for name, v in flat)


def _array_text(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_array_text(v) for v in value) + "]"
    return f"{value.dtype}{list(value.shape)}"


def choose_dtype(allowed: tuple[str, ...]) -> str:
    """float64 when allowed (finite differences need it), else the widest float, else int64 or
    the widest int, else the first allowed dtype."""
    for name in ("float64", "float32", "float16", "int64", "int32", "int16", "int8"):
        if name in allowed:
            return name
    return allowed[0]


def plan_op(spec: OpSpec) -> OpPlan:
    """Work out dtypes, precision, value rule and attr strategies for an op's declaration."""
    gc = spec.gradcheck
    type_choice = {ta.name: choose_dtype(ta.allowed) for ta in spec.type_attrs}
    dtypes = tuple((t.name, type_choice.get(t.dtype, t.dtype)) for t in spec.inputs)
    floats = [d for _, d in dtypes if d in FLOAT_DTYPES]
    precision = precision_for(min(floats, key=_float_bits) if floats else "float64", gc)
    rule = ValueRule(low=gc.domain[0], high=gc.domain[1], avoid=tuple(gc.avoid),
                     margin=max(gc.min_gap, 10 * precision.eps, 1e-3), min_gap=gc.min_gap)
    list_attrs = {t.list_len for t in spec.inputs if t.is_list}
    plans, skip = [], None
    for a in spec.attrs:
        if a.name in list_attrs:
            continue
        plan, why = plan_attr(a, gc)
        plans.append(plan)
        skip = skip or why
    unbound = tuple((ta.name, type_choice[ta.name]) for ta in spec.unbound_type_attrs)
    skip = skip or _input_skip(spec, dict(dtypes))
    return OpPlan(spec=spec, dtypes=dtypes, type_values=unbound, precision=precision, rule=rule,
                  attrs=tuple(plans), list_lens=tuple(_list_len(spec.attr(n)) for n in sorted(list_attrs)),
                  optional=tuple(t.name for t in spec.inputs if t.optional),
                  skip=skip)


def _float_bits(name: str) -> int:
    return np.dtype(name).itemsize


def _list_len(a: AttrSpec) -> tuple[str, int, int]:
    # `min: 0` is drawn empty too (a gradient may be wrong only for the empty list).
    lo = max(0, int(a.min) if a.min is not None else 1)
    hi = min(MAX_LIST_LEN, int(a.max) if a.max is not None else MAX_LIST_LEN)
    return a.name, lo, max(lo, hi)


def _input_skip(spec: OpSpec, dtypes: dict[str, str]) -> Optional[str]:
    """An integer input needs a dim to be a valid index into; without float inputs it has none."""
    ints = [n for n, d in dtypes.items() if d in INT_DTYPES]
    if ints and not any(d in FLOAT_DTYPES for d in dtypes.values()):
        return f"integer input '{ints[0]}' has no float input whose dims bound its values"
    return None


def stress_schedule(spec: OpSpec) -> tuple[tuple[str, int], ...]:
    """(dim, size) of each stress case: every stress size once, the stress dims taken in turn.

    >>> stress_schedule(spec)   # doctest: +SKIP   (dims n, m, p; stress_dims: [p])
    (('p', 15), ('p', 16), ('p', 17), ('p', 31), ('p', 32), ('p', 33), ('p', 64), ('p', 65))
    """
    gc = spec.gradcheck
    dims = spec.dim_names if gc.stress_dims is None else gc.stress_dims
    if not dims:
        return ()
    return tuple((dims[i % len(dims)], size) for i, size in enumerate(gc.stress_sizes))


def nondegenerate(plan: OpPlan) -> OpPlan:
    """The plan with values kept off 0 and pairwise apart: a forward kernel checked against its
    reference on all-zero or all-equal inputs could be wrong unseen (an off-by-one reads a value
    equal to the right one)."""
    rule = plan.rule
    avoid = rule.avoid if 0.0 in rule.avoid or not rule.low < 0.0 < rule.high else rule.avoid + (0.0,)
    return replace(plan, rule=replace(rule, avoid=avoid, min_gap=max(rule.min_gap, NONDEGENERATE_GAP)))


@st.composite
def case_strategy(draw, plan: OpPlan, stress: Optional[tuple[str, int]] = None,
                  fixed: Optional[dict[str, Any]] = None) -> Case:
    """Draw one `Case` for the planned op; `stress` = (dim, size) fixes one dim's size; `fixed`
    fixes attrs and list lengths (an attr combination: its dims are then not empty)."""
    spec = plan.spec
    fixed = fixed or {}
    has_ints = any(d in INT_DTYPES for _, d in plan.dtypes)
    # Indices need something to index: with integer inputs every dim has at least one element.
    lo, hi = spec.gradcheck.dim_range
    # A stress case must differentiate something: its other dims are not empty either, nor are
    # those of an attr combination's case (an empty case would leave the combination unchecked).
    nonempty = has_ints or stress is not None or bool(fixed)
    dim = st.integers(max(lo, 1) if nonempty else lo, max(hi, 1) if nonempty else hi)
    if stress is not None:
        # A stress case is one draw, and hypothesis draws the simplest first: counting down from
        # the top of the range makes that the largest other dims (register tiles and their
        # remainders), not 1s.
        top = max(hi, 1)
        dim = st.integers(0, top - max(lo, 1)).map(lambda below: top - below)
    dims = {name: draw(dim) for name in spec.dim_names}
    if stress is not None:
        dims[stress[0]] = stress[1]
        _fit_budget(spec, dims, stress[0])
    # A stress case is already as large as a case should get: `...` stands for no dims there.
    leading = tuple(draw(st.lists(dim, max_size=MAX_LEADING_DIMS))) if _has_ellipsis(spec) and not stress else ()
    free = tuple(draw(st.lists(dim, max_size=MAX_FREE_RANK))) if _has_free_shape(spec) else ()
    lens = {name: fixed[name] if name in fixed else draw(st.integers(a, b)) for name, a, b in plan.list_lens}
    attrs = {p.name: fixed[p.name] if p.name in fixed else (draw(p.strategy) if p.strategy is not None else p.value)
             for p in plan.attrs}
    attrs.update(dict(plan.type_values))
    assume(unmet_requirement(spec, attrs) is None)  # the declaration's `requires:` refuses them
    anchor = _anchor_input(plan)
    sizes = _sizes(spec, dims, attrs)  # an input dim may be an expression of dims and attrs
    shapes = {t.name: _input_shape(draw, t, sizes, leading, free, t.name == anchor) for t in spec.inputs}
    inputs = _draw_values(draw, plan, shapes, lens)
    presence = {name: fixed[name] if name in fixed else draw(st.sampled_from((GIVEN, LEFT_OUT)))
                for name in plan.optional}
    inputs.update({name: None for name, given in presence.items() if given == LEFT_OUT})
    return Case(dims=tuple(dims.items()), leading=leading, attrs=tuple(attrs.items()),
                inputs=tuple(inputs.items()), lens=tuple(lens.items()),
                presence=tuple(presence.items()))


def _fit_budget(spec: OpSpec, dims: dict[str, int], stressed: str) -> None:
    """Shrink the other dims (largest first) until every input fits MAX_STRESS_ELEMENTS."""
    def largest() -> int:
        sizes = [int(np.prod([dims[d.name] if isinstance(d, SymDim) else getattr(d, "size", 1)
                              for d in t.shape or ()], dtype=np.int64)) for t in spec.inputs]
        return max(sizes, default=0)

    while largest() > MAX_STRESS_ELEMENTS:
        others = [name for name in dims if name != stressed and dims[name] > 1]
        if not others:
            return
        dims[max(others, key=lambda name: dims[name])] -= 1


def _has_ellipsis(spec: OpSpec) -> bool:
    return any(t.has_ellipsis for t in spec.inputs)


def _has_free_shape(spec: OpSpec) -> bool:
    return any(t.shape is None for t in spec.inputs)


def _anchor_input(plan: OpPlan) -> Optional[str]:
    """The input without a declared shape that takes the drawn shape itself (the first float one):
    the others may broadcast to it, but the output should not shrink below it."""
    free = [t.name for t in plan.spec.inputs if t.shape is None and not t.is_list]
    floats = [n for n in free if plan.dtype_of(n) in FLOAT_DTYPES]
    return (floats or free or [None])[0]


def _input_shape(draw, t: TensorSpec, dims: dict, leading: tuple, free: tuple,
                 anchor: bool) -> tuple[int, ...]:
    if t.shape is None:
        return free if t.is_list or anchor else _broadcast_variant(draw, free)
    out: list[int] = []
    for d in t.shape:
        if isinstance(d, EllipsisDim):
            out.extend(leading)
        elif isinstance(d, SymDim):
            out.append(dims[d.name])
        elif isinstance(d, ConstDim):
            out.append(d.size)
        elif isinstance(d, ExprDim):
            out.append(max(eval_expr(d.expr, dims), 0))
    return tuple(out)


def _sizes(spec: OpSpec, dims: dict, attrs: dict) -> dict:
    """What input dim expressions read: the drawn dims and attrs, then the named dims (`dims:`)
    computed from them as the registry's inference does; one the op would refuse (negative, or a
    division by zero) is left to the op's own check."""
    sizes = {**attrs, **dims}
    for derived in spec.derived_dims:
        try:
            sizes[derived.name] = eval_expr(derived.expr, sizes)
        except ZeroDivisionError:
            sizes[derived.name] = 0
    return sizes


def _broadcast_variant(draw, base: tuple[int, ...]) -> tuple[int, ...]:
    """The base shape, or one that broadcasts to it (fewer leading dims, some dims 1): shape
    functions such as `broadcast` accept it, and the gradient must then reduce correctly."""
    drop = draw(st.integers(0, len(base)))
    kept = base[drop:]
    # A dim becomes 1 one time in four: broadcasting is exercised, most elements stay distinct.
    ones = draw(st.lists(st.integers(0, 3).map(lambda v: v == 0), min_size=len(kept),
                         max_size=len(kept)))
    return tuple(1 if one else size for size, one in zip(kept, ones))


def _draw_values(draw, plan: OpPlan, shapes: dict, lens: dict) -> dict[str, Any]:
    """Float inputs share one spread of values (so the pairwise gap holds across inputs);
    integer inputs are indices below the smallest float dim; bool inputs are masks."""
    spec = plan.spec
    counts = {t.name: lens[t.list_len] if t.is_list else None for t in spec.inputs}
    float_names = [t.name for t in spec.inputs if plan.dtype_of(t.name) in FLOAT_DTYPES]
    sizes = [int(np.prod(shapes[n], dtype=np.int64)) * (1 if counts[n] is None else counts[n]) for n in float_names]
    pool = draw(spread_floats(sum(sizes), plan.rule))
    float_dims = [s for n in float_names for s in shapes[n]]
    bound = min(float_dims) if float_dims else 1
    out: dict[str, Any] = {}
    offset = 0
    for t in spec.inputs:
        dtype, shape, n = plan.dtype_of(t.name), shapes[t.name], counts[t.name]
        parts = []
        for _ in range(1 if n is None else n):
            if dtype in FLOAT_DTYPES:
                size = int(np.prod(shape, dtype=np.int64))
                parts.append(pool[offset:offset + size].reshape(shape).astype(dtype))
                offset += size
            elif dtype in INT_DTYPES:
                parts.append(draw(index_array(shape, bound, dtype)))
            else:
                parts.append(draw(bool_array(shape)))
        out[t.name] = tuple(parts) if t.is_list else parts[0]
    return out
