"""Checking a selection of ops of a registry: which to check, on which devices, and the report."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Optional

from opsdk.registry.errors import OpsdkError
from opsdk.registry.spec import OpSpec

from .calls import devices_to_check
from .check import DeviceResult, check_device
from .gradient_call import GradientCall
from .strategies import nondegenerate, plan_op

# Checks are reproducible by default: the same seed every run unless `--seed` says otherwise.
DEFAULT_SEED = 0


@dataclass(frozen=True)
class OpOutcome:
    """One op's results, one per device, or the reason it was not checked."""

    op: str
    results: tuple[DeviceResult, ...] = ()
    skipped: Optional[str] = None
    qualified: str = ""  # `namespace::op`, what reports show

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)


@dataclass(frozen=True)
class GradCheckReport:
    """Every checked op's outcome and the seed that reproduces them."""

    seed: int
    outcomes: tuple[OpOutcome, ...]
    max_examples: Optional[int] = None  # --max-examples, when given: part of what reproduces a run

    @property
    def failures(self) -> tuple[DeviceResult, ...]:
        return tuple(r for o in self.outcomes for r in o.results if not r.ok)

    @property
    def ok(self) -> bool:
        return not self.failures


def select_ops(registry: Any, names: Iterable[str] = ()) -> list[OpSpec]:
    """The named ops (OpsdkError for an unknown name), or every op of the registry, by name."""
    wanted = list(names)
    if wanted:
        return [registry.get(n) for n in wanted]
    return [registry.get(n) for n in sorted(registry.names())]


def skip_reason(spec: OpSpec) -> Optional[str]:
    """Why an op is not gradient-checked at all, or None when it is."""
    if spec.stops_gradient:
        return "gradient: stop (passes no gradient)"
    if spec.gradient_op is None:
        return "not differentiable (gradient: null)"
    if not spec.gradcheck.enabled:
        return "gradcheck: {enabled: false} in the declaration"
    if spec.stateful:
        return "stateful (randomness or side effects): finite differences need a pure function"
    return None


def check_op(registry: Any, spec: OpSpec, seed_value: int = DEFAULT_SEED,
             max_examples: Optional[int] = None) -> OpOutcome:
    """Check one op on every kernel device it has here."""
    outcome = _check_op(registry, spec, seed_value, max_examples)
    return replace(outcome, qualified=spec.qualified_name)


def _check_op(registry: Any, spec: OpSpec, seed_value: int, max_examples: Optional[int]) -> OpOutcome:
    why = skip_reason(spec)
    if why:
        return OpOutcome(spec.name, skipped=why)
    plan = plan_op(spec)
    if plan.skip:
        return OpOutcome(spec.name, skipped=plan.skip)
    devices = devices_to_check(spec)
    if not devices:
        return OpOutcome(spec.name, skipped=f"no kernel that runs here (has {', '.join(spec.devices)})")
    try:
        GradientCall.for_op(registry, plan)
    except OpsdkError as exc:
        return OpOutcome(spec.name, results=tuple(
            DeviceResult(spec.name, d, "error", 0, 0.0, plan.precision, message=str(exc)) for d in devices))
    count = max_examples if max_examples is not None else spec.gradcheck.max_examples
    return OpOutcome(spec.name, results=tuple(
        _check_device(registry, plan, d, seed_value, count) for d in devices))


def _check_device(registry: Any, plan: Any, device: str, seed_value: int, count: int) -> DeviceResult:
    """The forward kernel against the reference first, on values off 0 and apart (a forward bug
    is reported as one, not as the gradient mismatch it causes), then the gradient."""
    refused: set = set()  # attr combinations the op takes in no case: searched for once
    if plan.spec.reference:
        forward = check_device(registry, nondegenerate(plan), device, seed_value, count,
                               gradients=False, refused=refused)
        if forward.status == "fail":
            return forward
    return check_device(registry, plan, device, seed_value, count, refused=refused)


def check_reference(registry: Any, spec: OpSpec, device: str = "cpu", seed_value: int = DEFAULT_SEED,
                    max_examples: Optional[int] = None) -> DeviceResult:
    """The forward kernel of `spec` on `device` against its `reference`, on the cases gradcheck
    draws from the declaration (differentiable or not). OpsdkError when it has no reference or no
    case can be drawn for it.

    >>> check_reference(load_registry(), load_registry().get("pairwise_manhattan")).ok  # doctest: +SKIP
    True
    """
    if not spec.reference:
        raise OpsdkError(f"op '{spec.name}' declares no reference to check its kernels against")
    plan = plan_op(spec)
    if plan.skip:
        raise OpsdkError(f"op '{spec.name}': no case can be drawn: {plan.skip}")
    count = max_examples if max_examples is not None else spec.gradcheck.max_examples
    return check_device(registry, nondegenerate(plan), device, seed_value, count, gradients=False)


def run_gradcheck(registry: Any, names: Iterable[str] = (), seed_value: int = DEFAULT_SEED,
                  max_examples: Optional[int] = None, progress=None) -> GradCheckReport:
    """Check the named ops (all when none) and return the report.

    `progress`, if given, is called with each op's name before it is checked.

    >>> from opsdk.registry import load_registry
    >>> run_gradcheck(load_registry(), ["pairwise_manhattan"], max_examples=3).ok
    True
    """
    outcomes = []
    for spec in select_ops(registry, names):
        if progress is not None:
            progress(spec.name)
        outcomes.append(check_op(registry, spec, seed_value, max_examples))
    return GradCheckReport(seed=seed_value, outcomes=tuple(outcomes), max_examples=max_examples)
