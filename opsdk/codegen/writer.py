"""Writes generated files: only those whose content changed, and removes stale generated ones.

A file counts as generated when its first line carries the do-not-edit mark, so a file a person
put under generated/ by hand is never deleted.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .names import GENERATED_MARK

GENERATED_SUFFIXES = (".h", ".cc", ".cu", ".py", ".pyi")


@dataclass(frozen=True)
class GenerateResult:
    """What a generation did (or, with check=True, would do); paths are workspace-relative.

    `changed`: files written (new or different); `deleted`: stale generated files removed;
    `stale`: with check=True, every file that differs, is missing or should be removed.
    """
    changed: tuple[str, ...]
    deleted: tuple[str, ...]
    stale: tuple[str, ...]
    unchanged: int

    @property
    def up_to_date(self) -> bool:
        return not (self.changed or self.deleted or self.stale)


def is_generated(path: Path) -> bool:
    """Whether a file starts with opsdk's do-not-edit header."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            return GENERATED_MARK in handle.readline()
    except OSError:
        return False


def existing_generated(generated_dir: Path) -> list[Path]:
    """Every generated file under `generated_dir`, sorted."""
    if not generated_dir.is_dir():
        return []
    found = [p for p in generated_dir.rglob("*") if p.is_file() and p.suffix in GENERATED_SUFFIXES]
    return sorted(p for p in found if is_generated(p))


def _write_atomic(path: Path, text: str) -> None:
    # A concurrent build may read the file while we write it: never expose half a file.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_files(root: Path, files: Mapping[str, str], generated_dir: Path, check: bool = False) -> GenerateResult:
    """Make `generated_dir` hold exactly `files` (workspace-relative path -> text).

    With check=True nothing is written; the result lists the stale paths instead.
    """
    changed: list[str] = []
    unchanged = 0
    for rel in sorted(files):
        path = root / rel
        try:
            current = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            current = None
        if current == files[rel]:
            unchanged += 1
            continue
        changed.append(rel)
        if not check:
            _write_atomic(path, files[rel])
    deleted = []
    for path in existing_generated(generated_dir):
        rel = path.relative_to(root).as_posix()
        if rel not in files:
            deleted.append(rel)
            if not check:
                path.unlink()
    if check:
        return GenerateResult((), (), tuple(sorted(changed + deleted)), unchanged)
    return GenerateResult(tuple(changed), tuple(deleted), (), unchanged)
