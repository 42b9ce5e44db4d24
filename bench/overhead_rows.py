"""The rows of bench_overhead.py's tables: timed loops of calls, their medians, the rich tables
they print and the rows kept for --json."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Optional

from pairwise_impls import Skip


@dataclass(frozen=True)
class Row:
    """One implementation's times per unit (call, step or op), one per timed loop, or why it was
    not timed (`note` of a row without times)."""
    name: str
    times: tuple[float, ...] = ()
    note: str = ""

    @property
    def seconds(self) -> Optional[float]:
        """The median over the loops."""
        return statistics.median(self.times) if self.times else None

    def as_json(self, case: str) -> dict:
        if not self.times:
            return {"case": case, "impl": self.name, "skipped": self.note}
        return {"case": case, "impl": self.name, "median_s": self.seconds, "min_s": min(self.times),
                "max_s": max(self.times), "repeats": len(self.times), "note": self.note}


# Every table printed, as rows for --json.
REPORTED: list[dict] = []


@dataclass(frozen=True)
class Settings:
    """How many calls one timed loop makes and how many loops give the median."""
    calls: int
    repeats: int


def per_call(fn: Callable[[], object], settings: Settings, calls: Optional[int] = None) -> list[float]:
    """The seconds one call of `fn` takes (warm), in each of `settings.repeats` loops."""
    n = calls or settings.calls
    fn()
    per_loop = []
    for _ in range(settings.repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        per_loop.append((time.perf_counter() - start) / n)
    return per_loop


def timed_row(name: str, make: Callable[[], Callable[[], object]], settings: Settings,
              note: str = "", calls: Optional[int] = None, per: int = 1) -> Row:
    """Build the callable with `make` (which may raise Skip), time it, divide by `per` units."""
    try:
        fn = make()
    except Skip as why:
        return Row(name, note=str(why))
    return Row(name, tuple(t / per for t in per_call(fn, settings, calls)), note)


def print_rows(title: str, rows: list[Row], base: str, unit: str = "us") -> None:
    """A rich table: median µs, ratio to the row named `base`, note."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    REPORTED.extend(r.as_json(title) for r in rows)
    ref = next((r.seconds for r in rows if r.name == base and r.seconds), None)
    table = Table(title=escape(title), title_justify="left")
    for col in ("implementation", f"median {unit}", f"time / {base}", "note"):
        table.add_column(col, justify="left" if col in ("implementation", "note") else "right")
    for r in rows:
        if r.seconds is None:
            table.add_row(escape(r.name), "", "", f"[dim]skipped: {escape(r.note)}[/dim]")
            continue
        ratio = f"{r.seconds / ref:.2f}x" if ref else ""
        table.add_row(escape(r.name), f"{r.seconds * 1e6:.2f}", ratio, escape(r.note))
    Console(width=max(Console().width, 110)).print(table)


def seconds_of(rows: list[Row], name: str) -> Optional[float]:
    """The median of the row called `name`, None when it was skipped."""
    return next((r.seconds for r in rows if r.name == name), None)
