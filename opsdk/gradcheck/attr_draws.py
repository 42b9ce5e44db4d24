"""Which attr values the checker draws, and which of them the checked cases covered.

An attr listed under `gradcheck: {attrs: {name: [values]}}` is drawn from those values; otherwise
choices and bools are drawn, bounded numbers within their bounds, and the rest keeps its default
(a list attr such as `axes` or `perm` has no valid draw without knowing the op, which is why the
declaration may list values). `AttrCoverage` then says how many distinct combinations were
checked, out of how many could be drawn, and which listed values no checked case used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any, Iterable, Optional

from hypothesis import strategies as st

from opsdk.registry.spec import AttrSpec, GradCheckSpec

INT_ATTR_SPAN = 4  # an int attr bounded on one side is drawn within this many steps of its bound


@dataclass(frozen=True)
class AttrPlan:
    """How one attr is chosen: drawn from `strategy`, or fixed to `value` (kept default).

    `options` is how many distinct values the strategy can give (None: too many to count, a float
    range); `listed` holds the values the declaration listed for it, if it did."""

    name: str
    strategy: Optional[st.SearchStrategy] = None
    value: Any = None
    options: Optional[int] = 1
    listed: tuple = ()

    @property
    def drawn(self) -> bool:
        return self.strategy is not None


def plan_attr(a: AttrSpec, gc: GradCheckSpec) -> tuple[AttrPlan, Optional[str]]:
    """The plan for one attr, and why the op cannot be checked when no value can be chosen."""
    listed = gc.values_for(a.name)
    if listed:
        return AttrPlan(a.name, st.sampled_from(listed), options=len(listed), listed=listed), None
    if a.choices:
        return AttrPlan(a.name, st.sampled_from(list(a.choices)), options=len(a.choices)), None
    if a.type == "bool":
        return AttrPlan(a.name, st.booleans(), options=2), None
    if a.type == "int" and (a.min is not None or a.max is not None):
        lo = int(a.min) if a.min is not None else int(a.max) - INT_ATTR_SPAN
        hi = min(int(a.max) if a.max is not None else lo + INT_ATTR_SPAN, lo + INT_ATTR_SPAN)
        return AttrPlan(a.name, st.integers(lo, hi), options=hi - lo + 1), None
    if a.type == "float" and a.min is not None and a.max is not None:
        return AttrPlan(a.name, st.floats(float(a.min), float(a.max)), options=None), None
    if not a.required:
        return AttrPlan(a.name, value=a.default), None
    if a.type == "int":
        return AttrPlan(a.name, st.integers(0, 3), options=4), None
    if a.type == "float":
        return AttrPlan(a.name, st.floats(-2.0, 2.0), options=None), None
    return AttrPlan(a.name, value=None), (
        f"attr '{a.name}' ({a.type}) is required and has no bounds or choices to draw from; give it "
        f"a default, or list values to check under gradcheck: {{attrs: {{{a.name}: [...]}}}}")


def attr_space(plans: Iterable[AttrPlan]) -> Optional[int]:
    """How many attr combinations can be drawn: the product of each drawn attr's options (None
    when one of them is a float range)."""
    options = [p.options for p in plans if p.drawn]
    return None if None in options else prod(options)


@dataclass(frozen=True)
class AttrCoverage:
    """The drawn attrs' combinations the checked cases used, out of `possible` (None: uncounted),
    and the listed values no checked case used (`name=value`), in declaration order."""

    checked: int
    possible: Optional[int]
    unchecked: tuple[str, ...] = ()

    def text(self) -> str:
        """`5/8`, or `5` when the combinations cannot be counted."""
        return f"{self.checked}/{self.possible}" if self.possible is not None else str(self.checked)


@dataclass
class CoverageTally:
    """The drawn attr combinations of the cases checked so far (mutable: hypothesis runs the
    test body many times)."""

    plans: tuple[AttrPlan, ...]
    seen: set = field(default_factory=set)

    def add(self, attrs: dict[str, Any]) -> None:
        """Record the attrs of a case whose gradient was checked."""
        self.seen.add(tuple(attrs[p.name] for p in self.plans if p.drawn))

    def coverage(self) -> Optional[AttrCoverage]:
        """None when the op draws no attrs (nothing to cover)."""
        drawn = [p for p in self.plans if p.drawn]
        if not drawn:
            return None
        missing = []
        for i, p in enumerate(drawn):
            used = {combo[i] for combo in self.seen}
            missing.extend(f"{p.name}={shown_value(v)}" for v in p.listed if v not in used)
        return AttrCoverage(len(self.seen), attr_space(self.plans), tuple(missing))


def shown_value(value: Any) -> str:
    """An attr value as a declaration writes it: `[0, 1]`, `true`, `'sum'`, `3`."""
    if isinstance(value, tuple):
        return "[" + ", ".join(shown_value(v) for v in value) + "]"
    return "true" if value is True else "false" if value is False else repr(value)
