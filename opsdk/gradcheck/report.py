"""The gradcheck report as text: a table per run, then every failure's counterexample."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .check import DeviceResult
from .runner import GradCheckReport

_STYLE = {"pass": "green", "fail": "bold red", "error": "bold red", "skip": "yellow"}


def render_table(report: GradCheckReport) -> Table:
    """One row per (op, device): cases, worst error / tolerance, status."""
    table = Table(title=f"opsdk gradcheck (seed {report.seed})", title_justify="left")
    for column in ("op", "device", "cases", "worst err/tol", "status"):
        table.add_column(column, justify="right" if column in ("cases", "worst err/tol") else "left")
    for outcome in report.outcomes:
        if outcome.skipped:
            table.add_row(outcome.op, "-", "-", "-", f"[yellow]skipped[/]: {outcome.skipped}")
            continue
        for r in outcome.results:
            worst = f"{r.worst:.3g}" if r.cases else "-"
            note = f": {r.message}" if r.status == "skip" and r.message else ""
            table.add_row(r.op, r.device, str(r.cases), worst, f"[{_STYLE[r.status]}]{r.status}[/]{note}")
    return table


def render_failure(result: DeviceResult, seed_value: int) -> str:
    """A failure's counterexample (or error) and the command that reproduces it."""
    head = f"{result.op} on {result.device}: "
    if result.counterexample is not None:
        body = head + result.counterexample.render()
    else:
        body = head + result.message
    return f"{body}\n    reproduce: opsdk gradcheck {result.op} --seed {seed_value}"


def print_report(report: GradCheckReport, console: Console) -> None:
    """Print the table, then each failing op with its smallest counterexample."""
    console.print(render_table(report))
    failures = report.failures
    if not failures:
        console.print(f"[green]all gradients agree[/] (seed {report.seed})")
        return
    console.print(f"[bold red]{len(failures)} failing:[/] "
                  + ", ".join(sorted({f"{r.op} ({r.device})" for r in failures})))
    for result in failures:
        console.print(render_failure(result, report.seed), markup=False, highlight=False)
