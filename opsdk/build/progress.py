"""How `opsdk build` shows its progress: a live bar on a terminal, plain lines in logs and CI."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class UnitResult:
    """The outcome for one op on one device."""
    op: str
    device: str
    status: str  # "compiled", "up to date" or "failed"
    seconds: float = 0.0
    artefact: Optional[Path] = None
    message: str = ""  # the author-relevant compiler errors when failed
    parts: tuple[str, ...] = ()  # what a compiled unit redid: "kernel", "glue", "link"


class Display:
    """Progress without a terminal (logs, CI): one line per finished unit."""

    def __init__(self, total: int):
        self.total = total
        self.count = 0
        self.lock = threading.Lock()

    def start(self) -> None:
        pass

    def begin(self, op: str, device: str) -> None:
        pass

    def end(self, result: UnitResult) -> None:
        with self.lock:
            self.count += 1
            print(f"[{self.count}/{self.total}] {_describe(result)}", flush=True)

    def stop(self) -> None:
        pass


class _SilentDisplay(Display):
    def end(self, result: UnitResult) -> None:
        pass


class _RichDisplay(Display):
    """A live bar on a terminal, with a line above it per finished unit."""

    def __init__(self, total: int):
        super().__init__(total)
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn,
                                   TextColumn, TimeElapsedColumn)

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), transient=True)
        self.task = self.progress.add_task("compiling", total=total)
        self.running: list[str] = []

    def start(self) -> None:
        self.progress.start()

    def begin(self, op: str, device: str) -> None:
        with self.lock:
            self.running.append(f"{op} ({device})")
            self.progress.update(self.task, description="compiling " + ", ".join(self.running))

    def end(self, result: UnitResult) -> None:
        with self.lock:
            self.running.remove(f"{result.op} ({result.device})")
            self.count += 1
            mark = "[green]✓[/green]" if result.status == "compiled" else "[red]✗[/red]"
            self.progress.console.print(f"{mark} {_describe(result)}", highlight=False)
            self.progress.update(self.task, advance=1,
                                 description="compiling " + ", ".join(self.running))

    def stop(self) -> None:
        self.progress.stop()


def _describe(result: UnitResult) -> str:
    verb = "compiled" if result.status == "compiled" else "FAILED"
    parts = f" ({' + '.join(result.parts)})" if result.parts else ""
    return f"{result.op} ({result.device}) {verb} in {result.seconds:.1f} s{parts}"


def make_display(total: int, progress: bool) -> Display:
    """Rich on a terminal, one plain line per unit otherwise, nothing when progress is off."""
    if not progress:
        return _SilentDisplay(total)
    if sys.stdout.isatty():
        return _RichDisplay(total)
    return Display(total)
