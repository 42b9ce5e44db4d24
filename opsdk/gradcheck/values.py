"""Hypothesis strategies for the numbers inside one case: floats kept off kinks, valid indices.

Finite differences are only meaningful where the function is smooth within `eps` of the point,
so values are kept away from the declared kink points (`avoid`) and, when `min_gap` is set, every
pair of float values of one case is kept `min_gap` apart: `|x - y|`, `max`, `sort` and friends
have kinks wherever two values meet, whichever inputs or positions they come from.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


@dataclass(frozen=True)
class ValueRule:
    """Where float values may lie: the domain, points to stay `margin` away from, a pairwise gap."""

    low: float
    high: float
    avoid: tuple[float, ...]
    margin: float
    min_gap: float

    def allows(self, values: np.ndarray) -> bool:
        """Whether every value is in the domain and at least `margin` from each avoided point."""
        if values.size == 0:
            return True
        inside = bool(np.all((values >= self.low) & (values <= self.high)))
        return inside and all(bool(np.all(np.abs(values - a) >= self.margin)) for a in self.avoid)


def _push_off_kinks(values: np.ndarray, rule: ValueRule) -> np.ndarray:
    """Move each value closer than `margin` to an avoided point to the nearer side at `margin`.

    A repair rather than a filter, so hypothesis never has to reject a draw for landing on a kink,
    and shrinking towards 0 still finds small values (0 itself moves to +margin).
    """
    out = values.copy()
    for a in rule.avoid:
        near = np.abs(out - a) < rule.margin
        if not np.any(near):
            continue
        up = np.where(out[near] >= a, a + rule.margin, a - rule.margin)
        # Mirror to the other side of the point when the push leaves the domain.
        mirrored = np.where(up > rule.high, a - rule.margin, np.where(up < rule.low, a + rule.margin, up))
        out[near] = mirrored
    return out


@st.composite
def spread_floats(draw, count: int, rule: ValueRule) -> np.ndarray:
    """`count` float64 values in the domain, off the avoided points, pairwise `min_gap` apart.

    With a gap, the domain is cut into slots at least twice the gap wide; each value takes a slot
    of its own and lies in that slot's middle half, so any two values differ by at least the gap.
    Slots that reach within `margin` of an avoided point are not used.
    """
    if count == 0:
        return np.zeros(0)
    if rule.min_gap <= 0:
        raw = draw(hnp.arrays(np.float64, count, elements=st.floats(rule.low, rule.high)))
        values = _push_off_kinks(raw, rule)
        assume(rule.allows(values))
        return values
    starts, slot_w, usable = _slots(rule)
    # Too many values for the domain at this gap: let hypothesis draw smaller dims instead.
    assume(count <= len(usable))
    picks = draw(st.lists(st.sampled_from(usable), min_size=count, max_size=count, unique=True))
    offsets = draw(hnp.arrays(np.float64, count, elements=st.floats(0.0, 1.0)))
    return starts[np.asarray(picks)] + offsets * 0.5 * slot_w


@functools.lru_cache(maxsize=64)
def _slots(rule: ValueRule) -> tuple[np.ndarray, float, tuple[int, ...]]:
    """The slots of `spread_floats` for `rule`: their starts, their width, and the indices of those
    whose middle half stays `margin` clear of every avoided point. Computed once per rule (a
    domain of width 20 at a gap of 5e-4 has 20,000 slots: per draw, in Python, that was most of a
    gradcheck's time)."""
    width = rule.high - rule.low
    n_slots = int(width // (2 * rule.min_gap))
    slot_w = width / max(n_slots, 1)
    starts = rule.low + (np.arange(n_slots) + 0.25) * slot_w
    lo, hi = starts, starts + 0.5 * slot_w
    clear = np.ones(n_slots, dtype=bool)
    for a in rule.avoid:
        clear &= np.maximum(np.maximum(lo - a, a - hi), 0.0) >= rule.margin
    return starts, slot_w, tuple(int(i) for i in np.flatnonzero(clear))


def index_array(shape: tuple[int, ...], bound: int, dtype: str) -> st.SearchStrategy:
    """Integers in [0, bound): valid indices into any dim of at least `bound` elements."""
    return hnp.arrays(np.dtype(dtype), shape, elements=st.integers(0, max(bound - 1, 0)))


def bool_array(shape: tuple[int, ...]) -> st.SearchStrategy:
    """Boolean masks (e.g. the condition of `where`)."""
    return hnp.arrays(np.bool_, shape, elements=st.booleans())


def cotangent(shape: tuple[int, ...], dtype: str) -> st.SearchStrategy:
    """What a cotangent is drawn from: values in [-1, 1], in the output's dtype (see `lift`)."""
    return hnp.arrays(np.dtype(dtype), shape, elements=st.floats(-1.0, 1.0, width=_width(dtype)))


def lift(drawn: np.ndarray) -> np.ndarray:
    """The cotangent used for a drawn one: a fixed pattern of distinct values of both signs
    (magnitudes 0.5 to 1), each moved by a quarter of the drawn value, so never 0.

    A zero cotangent makes every gradient, right or wrong, zero, and hypothesis tries the simplest
    draw (all zeros) first; a stress case is that one draw. Distinct values catch a gradient that
    reads the cotangent at the wrong position. (Applied after the draw, not inside the strategy,
    so hypothesis draws the same cases as before.)
    """
    index = np.arange(drawn.size)
    pattern = np.where(index % 2 == 0, 1.0, -1.0) * (0.5 + 0.5 * ((index * 0.6180339887) % 1.0))
    return (pattern.reshape(drawn.shape) + 0.25 * drawn.astype(np.float64)).astype(drawn.dtype)


def _width(dtype: str) -> int:
    return {"float16": 16, "float32": 32}.get(dtype, 64)
