"""The step and tolerances of a check, widened when an op cannot run in float64."""

from __future__ import annotations

from dataclasses import dataclass

from opsdk.registry.spec import GradCheckSpec

# Central differences lose about two thirds of the mantissa (error ~ eps_machine / step + step^2),
# so a narrower float needs a larger step and looser tolerances than the declaration's float64 ones.
_NARROW = {
    "float32": (1e-3, 1e-2, 1e-3),  # step, rtol, atol at least
    "float16": (3e-2, 1e-1, 5e-2),
}


@dataclass(frozen=True)
class Precision:
    """The dtype a check runs in, its finite-difference step and tolerances."""

    dtype: str
    eps: float
    rtol: float
    atol: float
    widened: bool  # True when the tolerances are wider than declared (no float64 kernel)

    def describe(self) -> str:
        note = " (widened: no float64)" if self.widened else ""
        return f"{self.dtype} eps={self.eps:g} rtol={self.rtol:g} atol={self.atol:g}{note}"


def precision_for(dtype: str, gc: GradCheckSpec) -> Precision:
    """The declaration's settings for float64; for float32/float16 a larger step and looser
    tolerances (never tighter than declared)."""
    if dtype not in _NARROW:
        return Precision(dtype, gc.eps, gc.rtol, gc.atol, widened=False)
    step, rtol, atol = _NARROW[dtype]
    return Precision(dtype, max(gc.eps, step), max(gc.rtol, rtol), max(gc.atol, atol), widened=True)
