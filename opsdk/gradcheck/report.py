"""The gradcheck report as text: one row per (op, device), then every failure's counterexample
and the listed attr values that no checked case used."""

from __future__ import annotations

import shlex
from typing import Optional

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


def reproduce_command(op: str, report: GradCheckReport, extra: tuple[str, ...] = ()) -> str:
    """The command that runs the same check again: the op, the seed, --max-examples when the run
    had it (a failure found among 1000 cases is not among the default 25) and `extra` (the
    command line's workspace). Each op's cases depend on these alone, not on the other ops."""
    parts = ["opsdk", "gradcheck", op, "--seed", str(report.seed)]
    if report.max_examples is not None:
        parts += ["--max-examples", str(report.max_examples)]
    return " ".join(parts + [shlex.quote(e) for e in extra])


def render_failure(result: DeviceResult, report: Optional[GradCheckReport] = None,
                   extra: tuple[str, ...] = (), seed_value: int = 0) -> str:
    """A failure's counterexample (or error) and the command that reproduces it: from the run's
    report, or, for a single check run without one (a scaffolded test), from `seed_value`."""
    head = f"{result.op} on {result.device}: "
    if result.counterexample is None:
        return head + result.message  # could not run (e.g. not built): no case to reproduce
    command = (reproduce_command(result.op, report, extra) if report is not None else
               " ".join(["opsdk", "gradcheck", result.op, "--seed", str(seed_value),
                         *(shlex.quote(e) for e in extra)]))
    return head + result.counterexample.render() + f"\n    reproduce: {command}"


def summary_lines(report: GradCheckReport, extra: tuple[str, ...] = ()) -> list[str]:
    """After the table: 'all gradients agree', or the failing ops and each counterexample; then
    what the attr combinations covered (a warning where they were sampled or left out)."""
    failures = report.failures
    if not failures:
        return [f"all gradients agree (seed {report.seed})"] + coverage_notes(report)
    names = ", ".join(sorted({f"{qualified(o)} ({r.device})" for o in report.outcomes
                              for r in o.results if not r.ok}))
    return ([f"{len(failures)} failing: {names}"] + [render_failure(r, report, extra) for r in failures]
            + coverage_notes(report))


def coverage_notes(report: GradCheckReport) -> list[str]:
    """One line per passing (op, device) where a value listed under `gradcheck: {attrs: ...}` was
    used by no checked case: drawn too rarely, or refused by the op every time it was drawn."""
    notes = []
    for outcome in report.outcomes:
        for r in outcome.results:
            notes += combination_notes(r)
            if r.ok and r.coverage is not None and r.coverage.unchecked:
                notes.append(f"note: {r.op} on {r.device}: no checked case used "
                             f"{', '.join(r.coverage.unchecked)} (the op refused it, or it was drawn too "
                             f"rarely: raise gradcheck.max_examples)")
    return notes


SHOWN_MISSING = 5  # combinations named in a partial-coverage warning; the rest are counted


def combination_notes(r: DeviceResult) -> list[str]:
    """Which attr combinations a passing (op, device) covered: `attrs: ... 12/12 combinations of
    k 1,3 x padding 'valid','same'`; a warning when the grid was sampled (above
    gradcheck.max_combinations) or some sampled combination was refused in every case."""
    c = r.coverage
    if not r.ok or c is None or c.grid is None:
        return []
    grid = c.grid
    lines = [f"attrs: {r.op} on {r.device}: {c.checked}/{c.possible} combinations of {grid.describe()} checked"
             + (f" ({grid.excluded} more break the op's requires:)" if grid.excluded else "")]
    if grid.partial:
        lines.append(f"warning: {r.op} on {r.device}: attr coverage is partial: {len(grid.combos)} of "
                     f"{grid.total} combinations sampled (gradcheck.max_combinations is "
                     f"{len(grid.combos)}; raise it to check them all)")
    if c.missing:
        shown = "; ".join(c.missing[:SHOWN_MISSING])
        more = f"; and {len(c.missing) - SHOWN_MISSING} more" if len(c.missing) > SHOWN_MISSING else ""
        lines.append(f"warning: {r.op} on {r.device}: attr coverage is partial: no checked case used {shown}{more} "
                     f"(the op refused every case drawn with it)")
    return lines
