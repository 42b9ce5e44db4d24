"""Turning g++/nvcc output into the few lines an op's author needs.

A failed template instantiation makes g++ print dozens of lines (include chains, "required from"
notes, source excerpts, one copy per dtype). The author needs the error lines in their own
kernel, workspace-relative, tagged with the op and device; an error inside the generated glue
almost always means the kernel's signature does not match its header, so it gets that hint.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from opsdk.registry.errors import OpsdkError

MAX_DIAGNOSTICS = 8
MAX_NOTES_PER_ERROR = 2

# g++: "path:line:col: error: msg" (col optional); nvcc: "path(line): error: msg".
_GCC_LINE = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)?\s*"
                       r"(?P<kind>fatal error|error|warning|note):\s*(?P<msg>.*)$")
_NVCC_LINE = re.compile(r"^(?P<file>[^(\s][^(]*)\((?P<line>\d+)\):\s*"
                        r"(?P<kind>fatal error|error|warning|note|remark)[^:]*:\s*(?P<msg>.*)$")
_NO_DEFINITION = re.compile(r"explicit instantiation of '(?:void )?(?P<sym>[^']+)' but no "
                            r"definition available")
_LINKER_LINE = re.compile(r"(undefined reference to|multiple definition of|cannot find -l)")


class BuildError(OpsdkError):
    """One or more kernels failed to compile; the message holds the author-relevant diagnostics."""

    def __init__(self, message: str, report: object = None):
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class Diagnostic:
    """One located message of a compiler, with its path relative to the workspace when inside it."""
    file: str
    line: int
    col: Optional[int]
    kind: str  # "error", "fatal error", "warning", "note"
    message: str

    def where(self) -> str:
        col = f":{self.col}" if self.col else ""
        return f"{self.file}:{self.line}{col}"


def parse_diagnostics(output: str, root: Path) -> list[Diagnostic]:
    """Every located error/warning/note line of g++ or nvcc output, in order."""
    found = []
    for raw in output.splitlines():
        line = raw.rstrip()
        m = _GCC_LINE.match(line) or _NVCC_LINE.match(line)
        if not m:
            continue
        col = m.groupdict().get("col")
        found.append(Diagnostic(_relative(m["file"], root), int(m["line"]),
                                int(col) if col else None, m["kind"], m["msg"].strip()))
    return found


def _relative(name: str, root: Path) -> str:
    path = Path(os.path.normpath(name if os.path.isabs(name) else root / name))
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def summarize_failure(output: str, root: Path, op: str, device: str, log_path: str) -> str:
    """The message of a failed compile: tagged error lines, a hint, where the full log is."""
    tag = f"[op '{op}', {device}]"
    diags = parse_diagnostics(output, root)
    lines = _error_lines(diags, tag)
    if not lines:
        lines = _fallback_lines(output, tag)
    hint = _header_hint(diags, op) or _glue_hint(diags, root, op, device)
    text = "\n".join(lines)
    if hint:
        text += "\n" + hint
    return f"{text}\n(full compiler output: {log_path})"


def summarize_missing_kernel(symbols: tuple[str, ...], root: Path, op: str, device: str,
                             kernel: str) -> str:
    """The message when the glue calls a kernel function the author's source does not define."""
    tag = f"[op '{op}', {device}]"
    lines = [f"{kernel}: error: the {device} kernel does not define `{sym}`, which the generated "
             f"glue calls {tag}" for sym in symbols[:MAX_DIAGNOSTICS]]
    header = f"generated/cpp/{op}_op.h"
    signature = expected_signature(root / header, device)
    lines.append(f"hint: define it in namespace opsdk_op_{op} exactly as {header} declares it"
                 + (":" if signature else " (check the parameter list and template parameters)"))
    lines += [f"    {s}" for s in signature]
    return "\n".join(lines)


def uninstantiated_kernels(output: str) -> tuple[str, ...]:
    """Kernel instantiations the generated kernel unit asked for but the author never defined.

    g++ says "explicit instantiation of 'void ns::cpu(...) [with T = float]' but no definition
    available" when the kernel's template has another signature than its header declares.
    """
    return tuple(sorted({m["sym"] for m in _NO_DEFINITION.finditer(output)}))


def _error_lines(diags: list[Diagnostic], tag: str) -> list[str]:
    """Errors deduplicated (template bodies fail once per dtype), each with its first notes."""
    lines: list[str] = []
    seen: set[tuple] = set()
    notes_left = 0
    shown = 0
    skipped = 0
    for d in diags:
        if d.kind == "note":
            if notes_left > 0 and not _is_noise_note(d):
                lines.append(f"  {d.where()}: note: {d.message}")
                notes_left -= 1
            continue
        if d.kind not in ("error", "fatal error"):
            notes_left = 0
            continue
        key = (d.file, d.line, d.col, d.message)
        if key in seen:
            notes_left = 0
            continue
        seen.add(key)
        if shown >= MAX_DIAGNOSTICS:
            skipped += 1
            notes_left = 0
            continue
        lines.append(f"{d.where()}: {d.kind}: {d.message} {tag}")
        shown += 1
        notes_left = MAX_NOTES_PER_ERROR
    if skipped:
        lines.append(f"... and {skipped} more error(s)")
    return lines


def _is_noise_note(d: Diagnostic) -> bool:
    # Candidate lists from pybind11 internals say nothing about the author's code.
    return "pybind11" in d.file or d.message.startswith("in expansion of macro")


def _fallback_lines(output: str, tag: str) -> list[str]:
    """No located error (a linker or driver failure): the relevant lines, else the output's tail."""
    picked = [line.strip() for line in output.splitlines() if _LINKER_LINE.search(line)]
    if not picked:
        picked = [line.rstrip() for line in output.strip().splitlines()[-6:]]
    return [f"{line} {tag}" for line in picked[:MAX_DIAGNOSTICS]] or [f"compiler failed {tag}"]


_OTHER_HEADER = re.compile(r"(?P<name>\w+)_op\.h: No such file or directory")


def _header_hint(diags: list[Diagnostic], op: str) -> Optional[str]:
    """A kernel that includes another op's generated header: the op was renamed in its
    declaration (`op: add` in a file `opsdk new probe` started), the kernel kept the old names."""
    for d in diags:
        m = _OTHER_HEADER.search(d.message) if d.kind == "fatal error" else None
        if m and m["name"] != op:
            return (f"hint: {m['name']}_op.h would be the generated header of an op named "
                    f"'{m['name']}', and no op has that name; this is the kernel of op '{op}': "
                    f"include \"{op}_op.h\" and define the kernel in namespace opsdk_op_{op} "
                    f"(or name the op '{m['name']}' again in its declaration)")
    return None


def _glue_hint(diags: list[Diagnostic], root: Path, op: str, device: str) -> Optional[str]:
    """When an error sits in generated glue, show the kernel signature the glue expects."""
    in_glue = any(d.kind in ("error", "fatal error") and d.file.startswith("generated/")
                  for d in diags)
    if not in_glue:
        return None
    header = f"generated/cpp/{op}_op.h"
    signature = expected_signature(root / header, device)
    where = f"in namespace opsdk_op_{op}"
    if not signature:
        return (f"hint: the error is in generated glue; check that the {device} kernel is defined "
                f"{where} as declared in {header}")
    body = "\n".join(f"    {s}" for s in signature)
    return (f"hint: the error is in generated glue, which calls your {device} kernel as declared "
            f"in {header}; define it {where} with exactly this signature:\n{body}")


def expected_signature(header: Path, device: str) -> list[str]:
    """The declaration lines of `device`'s kernel in a generated `<op>_op.h` (template line too)."""
    try:
        lines = header.read_text().splitlines()
    except OSError:
        return []
    pattern = re.compile(rf"\bvoid\s+{re.escape(device)}\s*\(")
    out: list[str] = []
    for i, line in enumerate(lines):
        if pattern.search(line):
            if i > 0 and lines[i - 1].strip().startswith("template") and "void" not in lines[i - 1]:
                out.append(lines[i - 1].strip())
            out.append(line.strip())
            # A declaration split over lines continues until its ';'.
            j = i
            while not lines[j].rstrip().endswith(";") and j + 1 < len(lines):
                j += 1
                out.append(lines[j].strip())
    return out
