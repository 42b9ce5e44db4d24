"""Finite differences, the reference expression, and the error measure of a check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

# A slot is one array the op reads: (input name, position in a list input or None).
Slot = tuple[str, Optional[int]]


def slot_label(slot: Slot) -> str:
    name, k = slot
    return name if k is None else f"{name}[{k}]"


def slots_of(inputs: dict[str, Any], names: list[str]) -> dict[Slot, np.ndarray]:
    """The arrays of the named inputs, one slot per array (a list input gives one per element)."""
    out: dict[Slot, np.ndarray] = {}
    for name in names:
        value = inputs[name]
        if value is None:  # an absent optional input: nothing to differentiate
            continue
        if isinstance(value, (list, tuple)):
            out.update({(name, k): v for k, v in enumerate(value)})
        else:
            out[(name, None)] = value
    return out


def with_slot(inputs: dict[str, Any], slot: Slot, array: np.ndarray) -> dict[str, Any]:
    """A copy of the inputs with one slot replaced."""
    name, k = slot
    out = dict(inputs)
    if k is None:
        out[name] = array
    else:
        parts = list(inputs[name])
        parts[k] = array
        out[name] = tuple(parts)
    return out


def central_difference(objective: Callable[[dict[str, Any]], float], inputs: dict[str, Any],
                       slot: Slot, eps: float) -> np.ndarray:
    """d objective / d slot, element by element: (f(x + eps) - f(x - eps)) / 2 eps.

    The step actually taken is measured after rounding to the input's dtype, so a float32 input
    is divided by the step it really moved.
    """
    base = inputs[slot[0]] if slot[1] is None else inputs[slot[0]][slot[1]]
    grad = np.zeros(base.shape, dtype=np.float64)
    for index in np.ndindex(base.shape):
        plus, minus = base.copy(), base.copy()
        plus[index] = base[index] + eps
        minus[index] = base[index] - eps
        step = float(plus[index]) - float(minus[index])
        f_plus = objective(with_slot(inputs, slot, plus))
        f_minus = objective(with_slot(inputs, slot, minus))
        grad[index] = (f_plus - f_minus) / step
    return grad


def contract(outputs: tuple[Any, ...], cotangents: tuple[Any, ...]) -> float:
    """Σ cotangent · output over every float output (each piece of a list output), in float64."""
    total = 0.0
    for out, cot in zip(outputs, cotangents):
        if isinstance(cot, list):  # a list output: one cotangent per piece
            total += contract(tuple(out), tuple(cot))
        elif cot is not None:
            total += float(np.sum(np.asarray(out, dtype=np.float64) * cot.astype(np.float64)))
    return total


@dataclass(frozen=True)
class Worst:
    """The element of one array that is furthest outside tolerance."""

    index: tuple[int, ...]
    actual: float
    expected: float
    ratio: float  # |actual - expected| / (atol + rtol |expected|); above 1 fails


def worst_element(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> Optional[Worst]:
    """The worst element by error relative to tolerance, or None for empty arrays."""
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if e.size == 0:
        return None
    a, e = np.broadcast_arrays(a, e)
    ratio = np.abs(a - e) / (atol + rtol * np.abs(e))
    # A NaN or inf anywhere is the worst possible element.
    ratio = np.where(np.isfinite(ratio), ratio, np.inf)
    index = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    return Worst(tuple(int(i) for i in index), float(a[index]), float(e[index]), float(ratio[index]))


def eval_reference(expression: str, inputs: dict[str, Any], attrs: dict[str, Any]) -> tuple:
    """Evaluate a declaration's `reference` with np, the inputs and the attrs by name.

    The reference is the op author's Python, run as it is, with Python's builtins: it is no
    sandbox, and nothing here limits what it does (a workspace is code: docs/trust.md). Inputs are
    given in float64 so the reference is the more accurate side of the comparison.

    >>> eval_reference("np.abs(x).sum(-1) * k", {"x": np.ones((2, 3))}, {"k": 2})[0]
    array([6., 6.])
    """
    scope: dict[str, Any] = {"np": np}
    scope.update(attrs)
    scope.update({k: _widen(v) for k, v in inputs.items()})
    value = eval(expression, scope)  # noqa: S307 - the op author's code, trusted like the workspace
    return tuple(value) if isinstance(value, tuple) else (value,)


def _widen(value: Any) -> Any:
    if value is None:  # an absent optional input: the reference sees None
        return None
    if isinstance(value, (list, tuple)):
        return [_widen(v) for v in value]
    if np.issubdtype(value.dtype, np.floating):
        return value.astype(np.float64)
    return value
