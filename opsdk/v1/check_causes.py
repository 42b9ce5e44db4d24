"""Whose failure it is, read from a failed program's traceback, for `python -m opsdk.v1.check`.

A program can fail in the framework answering `import tensorflow` (opsdk.v1, or TensorFlow's
compat.v1 beside it), or in its own code or its environment: a NumPy argument since removed, a
folder it writes into that nobody made, a package it imports that is not installed. The check
names the cause beside each failure, so that only the framework's own failures are read as
gaps (docs/tf1.md, "Measured on public programs").

The innermost frame that is either the framework's or the program's own (its folder, with
helpers such as `libs/`) decides: libraries in between (NumPy, matplotlib, PIL) are where the
program's call went, not a cause.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

FRAMEWORK = {"opsdk": "opsdk.v1", "tf": "TensorFlow"}
# Where each backend's own code lives (compat.v1's RNN cells and layers are tf_keras's).
_PACKAGES = {"opsdk": ("opsdk",), "tf": ("tensorflow", "tf_keras", "keras")}
# Import names whose package is published under another name.
_PIP_NAMES = {"skimage": "scikit-image", "sklearn": "scikit-learn", "cv2": "opencv-python",
              "PIL": "pillow", "yaml": "pyyaml", "bs4": "beautifulsoup4"}
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in ')
_MISSING_MODULE = re.compile(r"^ModuleNotFoundError: No module named '([^']+)'")


@dataclass(frozen=True)
class Cause:
    """`kind` is 'framework' (an error raised in the framework's code), 'refused' (the
    framework's own error, a message naming what it does not take), 'program' (raised in the
    program's code or a library it called there), 'environment' (a package or file missing),
    'timeout', 'signal' or 'unknown'; `text` says it in words for the table."""

    kind: str
    text: str


def cause_of(stderr: str, folder: Path, backend: str = "opsdk") -> Cause:
    """The cause of a failure that printed `stderr` (a program of `folder` run under
    `backend`, 'opsdk' or 'tf')."""
    who = FRAMEWORK[backend]
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    last = lines[-1] if lines else ""
    missing = _MISSING_MODULE.match(last)
    if missing and missing.group(1).split(".")[0] == "tensorflow":
        if backend == "opsdk":  # a module of TF's that opsdk.v1 does not answer
            return Cause("refused", f"refused by opsdk.v1: it does not provide the module "
                                    f"'{missing.group(1)}'")
    elif missing:
        name = missing.group(1).split(".")[0]
        return Cause("environment", f"the environment's: the package it imports as '{name}' is "
                                    f"not installed (pip install {_PIP_NAMES.get(name, name)})")
    decisive = _decisive_frame(_last_traceback(lines), folder, backend)
    if decisive == "framework":
        if backend == "opsdk" and _opsdk_message(last):
            return Cause("refused", "refused by opsdk.v1 (its error names what it does not take)")
        return Cause("framework", f"an error raised inside {who}")
    if last.startswith(("FileNotFoundError", "NotADirectoryError")):
        return Cause("environment", "the environment's: a file or folder the program reads or "
                                    "writes does not exist")
    if decisive == "program":
        return Cause("program", f"the program's: raised in its own code or a library it calls, "
                                f"not in {who}")
    return Cause("unknown", f"cause unknown: no frame of the program or of {who} in what it "
                            f"printed")


def _opsdk_message(last: str) -> bool:
    """An error of opsdk's own classes, or one whose message opsdk wrote naming itself (`opsdk.v1
    has no 'foo'`, `tf.nn.foo is not provided by opsdk.v1`)."""
    return last.startswith("opsdk.") or "opsdk" in last.partition(":")[2]


def program_line(stderr: str, folder: Path) -> Optional[str]:
    """The program's innermost line in the traceback (`File "...", line N, in f`), if any."""
    lines = _last_traceback([l for l in stderr.strip().splitlines() if l.strip()])
    for line in reversed(lines):
        found = _FRAME.match(line)
        if found and _inside(Path(found.group(1)), [folder.resolve()]):
            return line.strip()
    return None


def _decisive_frame(lines: list[str], folder: Path, backend: str) -> Optional[str]:
    framework = _package_dirs(backend)
    for line in reversed(lines):
        found = _FRAME.match(line)
        if not found:
            continue
        path = Path(found.group(1))
        if _inside(path, framework):
            return "framework"
        if _inside(path, [folder.resolve()]):
            return "program"
    return None


def _last_traceback(lines: list[str]) -> list[str]:
    """The lines of the last traceback (a chained exception prints several)."""
    starts = [i for i, l in enumerate(lines) if l.startswith("Traceback (most recent call last)")]
    return lines[starts[-1]:] if starts else lines


def _package_dirs(backend: str) -> list[Path]:
    dirs = [Path(__file__).resolve().parents[1]] if backend == "opsdk" else []
    for name in _PACKAGES[backend]:
        spec = importlib.util.find_spec(name) if name != "opsdk" else None  # found, not imported
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(Path(p).resolve() for p in spec.submodule_search_locations)
    return dirs


def _inside(path: Path, dirs: list[Path]) -> bool:
    try:
        resolved = path.resolve()
    except OSError:
        return False
    return any(resolved == d or d in resolved.parents for d in dirs)
