"""The gradcheck report as text: one row per (op, device), then every failure's counterexample
and the listed attr values that no checked case used."""

from __future__ import annotations

from .check import DeviceResult
from .runner import GradCheckReport

TABLE_HEADERS = ("op", "device", "cases", "attrs", "sizes checked", "worst err/tol", "tolerance", "status")


def table_title(report: GradCheckReport) -> str:
    return f"opsdk gradcheck (seed {report.seed})"


def table_rows(report: GradCheckReport) -> list[tuple[str, ...]]:
    """One row per (op, device): cases checked, distinct attr combinations they used (out of
    those that can be drawn; '-' when the op draws no attrs), the sizes each dim took in the checked
    cases (stress sizes included), worst error / tolerance, the
    tolerance itself (dtype, rtol, atol: an error counts as |analytic - numeric| over
    atol + rtol * |numeric|), status; skipped ops get one row with the reason. Ops are shown by
    their qualified name (`opsdk::add`, `myws::foo`): a workspace op may share a builtin's name."""
    rows: list[tuple[str, ...]] = []
    for outcome in report.outcomes:
        shown = qualified(outcome)
        if outcome.skipped:
            rows.append((shown, "-", "-", "-", "-", "-", "-", f"skipped: {outcome.skipped}"))
            continue
        for r in outcome.results:
            worst = f"{r.worst:.3g}" if r.cases else "-"
            attrs = r.coverage.text() if r.coverage is not None else "-"
            tol = (f"{r.precision.dtype} rtol={r.precision.rtol:g} atol={r.precision.atol:g}"
                   if r.precision is not None else "-")
            rows.append((shown, r.device, str(r.cases), attrs, r.sizes_text(), worst, tol, r.status))
    return rows


def qualified(outcome) -> str:
    """`namespace::op` of an outcome (its bare name where the runner gave none)."""
    return outcome.qualified or outcome.op


def render_failure(result: DeviceResult, seed_value: int) -> str:
    """A failure's counterexample (or error) and the command that reproduces it."""
    head = f"{result.op} on {result.device}: "
    if result.counterexample is None:
        return head + result.message  # could not run (e.g. not built): no case to reproduce
    return (head + result.counterexample.render()
            + f"\n    reproduce: opsdk gradcheck {result.op} --seed {seed_value}")


def summary_lines(report: GradCheckReport) -> list[str]:
    """After the table: 'all gradients agree', or the failing ops and each counterexample."""
    failures = report.failures
    if not failures:
        return [f"all gradients agree (seed {report.seed})"] + coverage_notes(report)
    names = ", ".join(sorted({f"{qualified(o)} ({r.device})" for o in report.outcomes
                              for r in o.results if not r.ok}))
    return ([f"{len(failures)} failing: {names}"] + [render_failure(r, report.seed) for r in failures]
            + coverage_notes(report))


def coverage_notes(report: GradCheckReport) -> list[str]:
    """One line per passing (op, device) where a value listed under `gradcheck: {attrs: ...}` was
    used by no checked case: drawn too rarely, or refused by the op every time it was drawn."""
    notes = []
    for outcome in report.outcomes:
        for r in outcome.results:
            if r.ok and r.coverage is not None and r.coverage.unchecked:
                notes.append(f"note: {r.op} on {r.device}: no checked case used "
                             f"{', '.join(r.coverage.unchecked)} (the op refused it, or it was drawn too "
                             f"rarely: raise gradcheck.max_examples)")
    return notes
