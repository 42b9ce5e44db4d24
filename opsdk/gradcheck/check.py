"""Checking one op on one device: forward against its reference, gradient op against finite
differences, over cases that hypothesis draws from the declaration and shrinks on failure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
from hypothesis import HealthCheck, Verbosity, given, reject, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from opsdk.registry.dtypes import FLOAT_DTYPES
from opsdk.registry.attrs import unmet_requirement
from opsdk.registry.errors import KernelNotBuiltError, OpError, OpsdkError
from opsdk.registry.spec import OpSpec

from .attr_draws import AttrCoverage, CoverageTally, attr_grid
from .calls import call_op
from .gradient_call import GradientCall
from .numeric import (Slot, Worst, central_difference, contract, eval_reference, slot_label,
                      slots_of, worst_element)
from .precision import Precision
from .strategies import Case, OpPlan, arrays_text, case_strategy, stress_schedule
from .values import cotangent, lift


@dataclass(frozen=True)
class Counterexample:
    """The smallest failing case hypothesis found, and what went wrong in it."""

    case: str  # Case.describe()
    kind: str  # "gradient", "forward" or "error"
    detail: str  # one line: where, and the two values
    arrays: str = ""  # the arrays themselves, when small enough to read

    def render(self) -> str:
        title = "error" if self.kind == "error" else f"{self.kind} mismatch"
        text = f"{title}\n    case: {self.case}\n    {self.detail}"
        return text + ("\n" + self.arrays if self.arrays else "")


@dataclass(frozen=True)
class DeviceResult:
    """The outcome of checking one op on one kernel device."""

    op: str
    device: str
    status: str  # "pass", "fail" or "error" (nothing could be checked: e.g. kernel not built)
    cases: int
    worst: float  # worst error / tolerance over the cases that ran (above 1 fails)
    precision: Optional[Precision]
    counterexample: Optional[Counterexample] = None
    message: str = ""
    # The drawn attrs' combinations the checked cases used; None when the op draws no attrs.
    coverage: Optional[AttrCoverage] = None
    # Per dim, the sizes the checked cases gave it (stress sizes included), for the report.
    sizes: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def sizes_text(self) -> str:
        """`n 0-5; p 0-5,15-17,31-33,64,65`: the sizes checked, runs of consecutive ones joined."""
        return "; ".join(f"{name} {_runs(values)}" for name, values in self.sizes) or "-"

    @property
    def ok(self) -> bool:
        return self.status == "pass"


class CaseFailed(Exception):
    """Raised inside a hypothesis example so that hypothesis shrinks it."""

    def __init__(self, counterexample: Counterexample):
        super().__init__(counterexample.render())
        self.counterexample = counterexample


@dataclass
class _Tally:
    """What the examples that ran saw; mutable because hypothesis calls the test many times."""

    attrs: CoverageTally
    sizes: dict = field(default_factory=dict)  # dim -> set of sizes checked
    cases: int = 0
    worst: float = 0.0
    last_rejection: str = ""
    rejected: int = 0
    failed: bool = False


def check_device(registry: Any, plan: OpPlan, device: str, seed_value: int,
                 max_examples: int, gradients: bool = True,
                 refused: Optional[set] = None) -> DeviceResult:
    """Check `plan.spec` on `device` with hypothesis seeded by `seed_value`: `max_examples` cases
    drawn within the declared dims, then one case per entry of the stress schedule. With
    gradients=False only the forward kernel is checked against the reference. `refused` collects
    the attr combinations the op refused in every case, and a later pass over the same op skips
    them (the search for a case an op will never take is the slow part)."""
    spec = plan.spec
    grid = attr_grid(plan.attrs, plan.list_lens, spec.gradcheck.max_combinations, seed_value,
                     plan.optional, lambda attrs: unmet_requirement(spec, attrs) is None)
    tally = _Tally(CoverageTally(plan.attrs, grid))
    grad = GradientCall.for_op(registry, plan) if gradients else None

    def run(stress: Optional[tuple[str, int]], count: int, fixed: Optional[dict] = None) -> None:
        @settings(max_examples=count, deadline=None, database=None, derandomize=False,
                  report_multiple_bugs=False, verbosity=Verbosity.quiet, print_blob=False,
                  suppress_health_check=list(HealthCheck))
        @seed(seed_value)
        @given(st.data())
        def example(data: st.DataObject) -> None:
            case = data.draw(case_strategy(plan, stress, fixed), label="case")
            try:
                _run_case(registry, plan, grad, device, case, data, tally)
            except CaseFailed:
                # Cases run while shrinking are not counted: `cases` is what ran up to the failure.
                tally.failed = True
                raise

        example()

    def result(status: str, cases: int, worst: float, **extra: Any) -> DeviceResult:
        sizes = tuple((name, tuple(sorted(tally.sizes[name]))) for name in spec.dim_names if name in tally.sizes)
        return DeviceResult(op=spec.name, device=device, status=status, cases=cases, worst=worst,
                            precision=plan.precision, coverage=tally.attrs.coverage(), sizes=sizes, **extra)

    try:
        run(None, max_examples)
        for stress in stress_schedule(spec):
            _run_stress(run, stress)
        refused = refused if refused is not None else set()
        for combo in grid.combos if grid is not None else ():
            if combo not in tally.attrs.covered and combo not in refused:
                if not _run_combination(run, dict(zip(grid.names, combo))):
                    refused.add(combo)
    except CaseFailed as failure:
        return result("fail", tally.cases + 1, max(tally.worst, 1.0),
                      counterexample=failure.counterexample)
    except KernelNotBuiltError as exc:
        return result("error", 0, 0.0, message=str(exc))
    except Unsatisfiable:
        # Nothing was checked: an error, not a pass, so that a declaration no case fits is seen.
        why = f"; the op refused them: {tally.last_rejection}" if tally.last_rejection else ""
        return result("error", tally.cases, tally.worst, message=f"no valid case could be drawn{why}")
    if tally.cases == 0:
        return result("error", 0, 0.0, message=(
            "every case drawn was empty (nothing to differentiate); raise the lower bound of "
            "gradcheck.dims"))
    return result("pass", tally.cases, tally.worst)


def _run_stress(run, stress: tuple[str, int]) -> None:
    """One stress case; a size the op refuses in every drawn case (a dim tied to an attr's
    bounds) is not checked and not reported as checked."""
    try:
        run(stress, 1)
    except Unsatisfiable:
        pass


# Cases per attr combination the random draws left unchecked (the first is hypothesis's simplest:
# the smallest non-empty dims; the others are drawn).
COMBINATION_EXAMPLES = 3


def _run_combination(run, fixed: dict) -> bool:
    """Cases with one attr combination fixed; one the op refuses in every case is left out (the
    report names it as not covered) and False is returned."""
    try:
        run(None, COMBINATION_EXAMPLES, fixed)
    except Unsatisfiable:
        return False
    return True


def _runs(values: tuple[int, ...]) -> str:
    """`0-5,15-17,64` from (0, 1, 2, 3, 4, 5, 15, 16, 17, 64)."""
    parts, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            parts.append(str(v) if v == start else f"{start}-{v}" if v > start + 1 else f"{start},{v}")
            start = None
    return ",".join(parts)


def _run_case(registry: Any, plan: OpPlan, grad: Optional[GradientCall], device: str, case: Case,
              data: st.DataObject, tally: _Tally) -> None:
    spec, precision = plan.spec, plan.precision
    inputs, attrs = case.input_dict(), case.attr_dict()
    outputs = _forward(registry, spec, inputs, attrs, device, case, tally)
    if spec.reference:
        _check_reference(spec, inputs, attrs, outputs, precision, case)
    if grad is None:  # the forward alone: every case that ran counts
        _count(tally, case)
        return
    cots = tuple(_cotangent(data, t, o) for t, o in zip(spec.outputs, outputs))
    analytic = _guarded(case, lambda: grad.run(inputs, attrs, outputs, cots, device))

    def objective(values: dict[str, Any]) -> float:
        return contract(_forward(registry, spec, values, attrs, device, case, tally), cots)

    worst: Optional[tuple[Slot, Worst]] = None
    for slot, array in slots_of(inputs, list(grad.targets)).items():
        got = analytic.get(slot)
        if got is None or got.shape != array.shape:
            shape = "no gradient" if got is None else f"a gradient of shape {list(got.shape)}"
            _fail(case, "gradient", f"{spec.gradient_op} gives {slot_label(slot)} {shape}, but "
                                    f"the input has shape {list(array.shape)}",
                  tuple(zip(spec.outputs, cots)))
        numeric = central_difference(objective, inputs, slot, precision.eps)
        w = worst_element(got, numeric, precision.rtol, precision.atol)
        if w is not None and (worst is None or w.ratio > worst[1].ratio):
            worst = (slot, w)
    if worst is None:
        return  # nothing to differentiate (an empty input): not counted as a checked case
    _count(tally, case)
    tally.worst = max(tally.worst, worst[1].ratio)
    if worst[1].ratio > 1.0:
        slot, w = worst
        _fail(case, "gradient", f"d/d{slot_label(slot)}{list(w.index)}: analytic {w.actual:.9g}, "
                                f"numeric {w.expected:.9g} (error/tolerance {w.ratio:.3g}, "
                                f"{precision.describe()})", tuple(zip(spec.outputs, cots)))


def _cotangent(data: st.DataObject, t: Any, out: Any) -> Any:
    """A drawn cotangent for output `t` (one per piece of a list output), None for a value that
    is not a float."""
    if t.is_list:
        pieces = [_cotangent_piece(data, f"grad_{t.name}[{k}]", o) for k, o in enumerate(out)]
        return None if any(p is None for p in pieces) else pieces
    return _cotangent_piece(data, f"grad_{t.name}", out)


def _cotangent_piece(data: st.DataObject, label: str, out: Any) -> Optional[np.ndarray]:
    if str(out.dtype) not in FLOAT_DTYPES:
        return None
    return lift(data.draw(cotangent(out.shape, str(out.dtype)), label=label))


def _count(tally: _Tally, case: Case) -> None:
    if not tally.failed:
        tally.cases += 1
        tally.attrs.add(case.grid_dict())
        for name, size in case.dims:
            tally.sizes.setdefault(name, set()).add(size)


def _forward(registry: Any, spec: OpSpec, inputs: dict, attrs: dict, device: str, case: Case,
             tally: _Tally) -> tuple:
    """The op's outputs. A case the op declares invalid is rejected (hypothesis draws another);
    a kernel that crashes on a case the op accepted is a failure."""
    try:
        return call_op(registry, spec, inputs, attrs, device)
    except KernelNotBuiltError:
        raise
    except Exception as exc:  # noqa: BLE001 - sorted into "invalid case" and "kernel crashed"
        if not is_user_error(spec, exc):
            _fail(case, "error", f"{spec.name} on {device} raised {_describe(exc)}")
        tally.last_rejection = str(exc)
        tally.rejected += 1
        reject()
    raise AssertionError("unreachable")  # reject() and _fail() always raise


def is_user_error(spec: OpSpec, exc: BaseException) -> bool:
    """Whether the op refused the call on purpose: the registry's validation (an OpError of its
    own), a kernel raising an OpsdkError, or a built kernel's `OPSDK_REQUIRE` (a ValueError or
    TypeError beginning with "<op>: "). The runtime wraps kernel exceptions in an OpError whose
    cause is what the kernel raised, so the cause decides."""
    cause = exc.__cause__ if isinstance(exc, OpError) and exc.__cause__ is not None else None
    if isinstance(exc, OpError) and cause is None:
        return True
    inner = cause if cause is not None else exc
    if isinstance(inner, OpsdkError):
        return True
    return isinstance(inner, (ValueError, TypeError)) and str(inner).startswith(f"{spec.name}: ")


def _describe(exc: BaseException) -> str:
    inner = exc.__cause__ if isinstance(exc, OpError) and exc.__cause__ is not None else exc
    return f"{type(inner).__name__}: {inner}"


def _guarded(case: Case, thunk):
    try:
        return thunk()
    except (KernelNotBuiltError, CaseFailed):
        raise
    except OpsdkError as exc:
        _fail(case, "error", str(exc))
    except Exception as exc:  # noqa: BLE001 - a crashing gradient kernel is a finding too
        _fail(case, "error", f"gradient raised {type(exc).__name__}: {exc}")


def _check_reference(spec: OpSpec, inputs: dict, attrs: dict, outputs: tuple,
                     precision: Precision, case: Case) -> None:
    try:
        expected = eval_reference(spec.reference, inputs, attrs)
    except Exception as exc:  # noqa: BLE001 - the reference is the author's code
        _fail(case, "error", f"reference '{spec.reference}' raised {type(exc).__name__}: {exc}")
    pairs = []
    for t, got, want in zip(spec.outputs, outputs, expected):
        if t.is_list:
            if len(got) != len(want):
                _fail(case, "forward", f"output '{t.name}' has {len(got)} pieces, the reference "
                                       f"gives {len(want)}")
            pairs += [(f"{t.name}[{k}]", g, w) for k, (g, w) in enumerate(zip(got, want))]
        else:
            pairs.append((t.name, got, want))
    for label, got, want in pairs:
        want = np.asarray(want)
        if np.shape(got) != want.shape:
            _fail(case, "forward", f"output '{label}' has shape {list(np.shape(got))}, the "
                                   f"reference gives {list(want.shape)}")
        w = worst_element(got, want, precision.rtol, precision.atol)
        if w is not None and w.ratio > 1.0:
            _fail(case, "forward", f"{label}{list(w.index)}: kernel {w.actual:.9g}, reference "
                                   f"{w.expected:.9g} (error/tolerance {w.ratio:.3g})")


def _fail(case: Case, kind: str, detail: str, cotangents: tuple = ()) -> None:
    named = dict(case.inputs)
    for t, c in cotangents:
        if isinstance(c, list):
            named.update({f"grad_{t.name}[{k}]": piece for k, piece in enumerate(c)})
        elif c is not None:
            named[f"grad_{t.name}"] = c
    raise CaseFailed(Counterexample(case=case.describe(), kind=kind, detail=detail,
                                    arrays=arrays_text(named)))
