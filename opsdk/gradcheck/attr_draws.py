"""Which attr values the checker draws, and which of them the checked cases covered.

An attr listed under `gradcheck: {attrs: {name: [values]}}` is drawn from those values; otherwise
choices and bools are drawn, bounded numbers within their bounds, and the rest keeps its default
(a list attr such as `axes` or `perm` has no valid draw without knowing the op, which is why the
declaration may list values). Besides the random draws, `attr_grid` enumerates the combinations
checked one by one: every listed value, choice and bool, the two ends of each int or float range
and of each list input's length (0 included where `min: 0`), all of them up to
`gradcheck.max_combinations`, else a seeded sample of that many. `AttrCoverage` then says how
many of those combinations the checked cases covered, and which listed values no checked case used.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from math import prod
from typing import Any, Callable, Iterable, Optional

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
    # The values the combination cases take: every listed value, choice or bool, the ends of a range.
    grid: tuple = ()

    @property
    def drawn(self) -> bool:
        return self.strategy is not None


def plan_attr(a: AttrSpec, gc: GradCheckSpec) -> tuple[AttrPlan, Optional[str]]:
    """The plan for one attr, and why the op cannot be checked when no value can be chosen."""
    listed = gc.values_for(a.name)
    if listed:
        return AttrPlan(a.name, st.sampled_from(listed), options=len(listed), listed=listed, grid=listed), None
    if a.choices:
        return AttrPlan(a.name, st.sampled_from(list(a.choices)), options=len(a.choices), grid=a.choices), None
    if a.type == "bool":
        return AttrPlan(a.name, st.booleans(), options=2, grid=(False, True)), None
    if a.type == "int" and (a.min is not None or a.max is not None):
        lo = int(a.min) if a.min is not None else int(a.max) - INT_ATTR_SPAN
        hi = min(int(a.max) if a.max is not None else lo + INT_ATTR_SPAN, lo + INT_ATTR_SPAN)
        return AttrPlan(a.name, st.integers(lo, hi), options=hi - lo + 1, grid=_ends(lo, hi)), None
    if a.type == "float" and a.min is not None and a.max is not None:
        lo, hi = float(a.min), float(a.max)
        return AttrPlan(a.name, st.floats(lo, hi), options=None, grid=_ends(lo, hi)), None
    if not a.required:
        return AttrPlan(a.name, value=a.default), None
    if a.type == "int":
        return AttrPlan(a.name, st.integers(0, 3), options=4, grid=(0, 3)), None
    if a.type == "float":
        return AttrPlan(a.name, st.floats(-2.0, 2.0), options=None, grid=(-2.0, 2.0)), None
    return AttrPlan(a.name, value=None), (
        f"attr '{a.name}' ({a.type}) is required and has no bounds or choices to draw from; give it "
        f"a default, or list values to check under gradcheck: {{attrs: {{{a.name}: [...]}}}}")


def _ends(lo: Any, hi: Any) -> tuple:
    return (lo,) if lo == hi else (lo, hi)


@dataclass(frozen=True)
class AttrGrid:
    """The combinations checked one by one: `names` (attrs, then list-length attrs), the
    `combos` to check (value tuples in `names` order) and how many there are in all."""

    names: tuple[str, ...]
    values: tuple[tuple, ...]  # per name, its grid values
    combos: tuple[tuple, ...]
    total: int
    excluded: int = 0  # combinations of the grid the op's `requires:` refuses (not in `total`)

    @property
    def partial(self) -> bool:
        return len(self.combos) < self.total

    def key(self, attrs: dict[str, Any]) -> Optional[tuple]:
        """The grid combination a case's attrs (and list lengths) are, or None when it is none."""
        key = tuple(attrs.get(n) for n in self.names)
        return key if all(v in vs for v, vs in zip(key, self.values)) else None

    def describe(self) -> str:
        """`k 1,3 x padding 'valid','same'`: what the grid spans."""
        return " x ".join(f"{n} {','.join(shown_value(v) for v in vs)}" for n, vs in zip(self.names, self.values))


class Presence(str):
    """Whether a case gives an optional input: a grid value shown as the word itself."""


GIVEN, LEFT_OUT = Presence("given"), Presence("absent")


# Grids up to this many combinations are listed whole (and filtered by `requires:`).
_ENUMERATED = 1 << 16


def attr_grid(plans: Iterable[AttrPlan], list_lens: Iterable[tuple[str, int, int]], budget: int,
              seed_value: int, optional: Iterable[str] = (),
              allowed: Callable[[dict[str, Any]], bool] = lambda attrs: True) -> Optional[AttrGrid]:
    """Every combination of the plans' grid values, the list lengths' ends and each optional
    input given or absent that `allowed` takes (the op's `requires:`), or a seeded sample of
    `budget` of them when there are more (None when nothing is drawn or the budget is 0)."""
    plans = tuple(plans)
    axes = [(p.name, tuple(p.grid)) for p in plans if p.drawn and p.grid]
    axes += [(name, _ends(lo, hi)) for name, lo, hi in list_lens]
    axes += [(name, (GIVEN, LEFT_OUT)) for name in optional]
    if not axes or budget <= 0:
        return None
    names, values = tuple(n for n, _ in axes), tuple(v for _, v in axes)
    fixed = {p.name: p.value for p in plans if not p.drawn}
    total = prod(len(v) for v in values)
    if total > _ENUMERATED:  # too many to list: a seeded sample, the ones `allowed` takes
        picks = sorted(random.Random(seed_value).sample(range(total), min(total, 4 * budget)))
        every = [c for c in (_combo_at(values, i) for i in picks) if allowed({**fixed, **dict(zip(names, c))})]
        return AttrGrid(names, values, tuple(every[:budget]), total)
    every = [c for c in itertools.product(*values) if allowed({**fixed, **dict(zip(names, c))})]
    combos = every if len(every) <= budget else [
        every[i] for i in sorted(random.Random(seed_value).sample(range(len(every)), budget))]
    return AttrGrid(names, values, tuple(combos), len(every), total - len(every))


def _combo_at(values: tuple[tuple, ...], index: int) -> tuple:
    """The index-th combination of itertools.product(*values), without listing them all."""
    out = []
    for vs in reversed(values):
        index, r = divmod(index, len(vs))
        out.append(vs[r])
    return tuple(reversed(out))


def attr_space(plans: Iterable[AttrPlan]) -> Optional[int]:
    """How many attr combinations can be drawn: the product of each drawn attr's options (None
    when one of them is a float range)."""
    options = [p.options for p in plans if p.drawn]
    return None if None in options else prod(options)


@dataclass(frozen=True)
class AttrCoverage:
    """The grid combinations (`attr_grid`) the checked cases covered, out of `possible` (all of
    the grid, sampled or not; None: uncounted, where no grid applies), the listed values no
    checked case used (`name=value`), and the grid combinations checked cases left out."""

    checked: int
    possible: Optional[int]
    unchecked: tuple[str, ...] = ()
    grid: Optional[AttrGrid] = None
    missing: tuple[str, ...] = ()  # `k=3 padding='same'` per sampled combination no case covered

    def text(self) -> str:
        """`5/8`, or `5` when the combinations cannot be counted."""
        return f"{self.checked}/{self.possible}" if self.possible is not None else str(self.checked)


@dataclass
class CoverageTally:
    """The drawn attr combinations of the cases checked so far (mutable: hypothesis runs the
    test body many times)."""

    plans: tuple[AttrPlan, ...]
    grid: Optional[AttrGrid] = None
    seen: set = field(default_factory=set)
    covered: set = field(default_factory=set)  # grid keys of checked cases

    def add(self, attrs: dict[str, Any]) -> None:
        """Record the attrs (and list lengths) of a case whose gradient was checked."""
        self.seen.add(tuple(attrs[p.name] for p in self.plans if p.drawn))
        key = self.grid.key(attrs) if self.grid is not None else None
        if key is not None:
            self.covered.add(key)

    def coverage(self) -> Optional[AttrCoverage]:
        """None when the op draws no attrs (nothing to cover)."""
        drawn = [p for p in self.plans if p.drawn]
        if not drawn and self.grid is None:
            return None
        missing = []
        for i, p in enumerate(drawn):
            used = {combo[i] for combo in self.seen}
            missing.extend(f"{p.name}={shown_value(v)}" for v in p.listed if v not in used)
        if self.grid is None:
            return AttrCoverage(len(self.seen), attr_space(self.plans), tuple(missing))
        left = tuple(" ".join(f"{n}={shown_value(v)}" for n, v in zip(self.grid.names, combo))
                     for combo in self.grid.combos if combo not in self.covered)
        return AttrCoverage(len(self.covered), self.grid.total, tuple(missing), self.grid, left)


def shown_value(value: Any) -> str:
    """An attr value as a declaration writes it: `[0, 1]`, `true`, `'sum'`, `3` (an optional
    input's presence: `given` or `absent`)."""
    if isinstance(value, Presence):
        return str(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(shown_value(v) for v in value) + "]"
    return "true" if value is True else "false" if value is False else repr(value)
