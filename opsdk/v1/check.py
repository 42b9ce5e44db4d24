"""Run a folder of TensorFlow 1 programs under opsdk.v1 and report, per program, whether it ran
and its first failure: try your own code before porting it.

    python -m opsdk.v1.check FOLDER [--timeout 300] [--against-tf]

Each `*.py` of FOLDER runs in its own subprocess, with `import tensorflow as tf` answered by
`opsdk.v1` (or, with --against-tf, by TensorFlow's `compat.v1`, to compare). A program that
prints lines `loss: <number>` has them collected; `ran` means it exited with status 0.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

# Runs a program with `tensorflow` bound to the chosen module, then exits with its status.
_SHIM = """
import runpy, sys
if sys.argv[1] == "tf":
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    sys.modules["tensorflow"] = tf
else:
    import opsdk.v1 as tf
    sys.modules["tensorflow"] = tf
path = sys.argv[2]
sys.argv = [path]
sys.path.insert(0, __import__("os").path.dirname(path))
runpy.run_path(path, run_name="__main__")
"""

_LOSS = re.compile(r"loss:\s*([-+0-9.eEinfa]+)")


@dataclass(frozen=True)
class Outcome:
    """One program's run: `ok`, its losses printed, and the first failure when not ok."""

    program: str
    ok: bool
    seconds: float
    losses: tuple[float, ...] = field(default_factory=tuple)
    failure: Optional[str] = None


def run_program(path: Path, timeout: float = 300.0, backend: str = "opsdk") -> Outcome:
    """Run one program in a subprocess under `backend` ('opsdk' or 'tf')."""
    import time
    start = time.perf_counter()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"}
    try:
        done = subprocess.run([sys.executable, "-c", _SHIM, backend, str(path.resolve())],
                              capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=path.parent)
    except subprocess.TimeoutExpired:
        return Outcome(path.name, False, timeout, failure=f"timed out after {timeout:.0f} s")
    seconds = time.perf_counter() - start
    losses = tuple(float(m.group(1)) for m in _LOSS.finditer(done.stdout))
    if done.returncode == 0:
        return Outcome(path.name, True, seconds, losses)
    return Outcome(path.name, False, seconds, losses, first_failure(done.stderr))


def first_failure(stderr: str) -> str:
    """The exception line of a traceback, with the program's last line that led to it."""
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    if not lines:
        return "exited with an error and printed nothing"
    where = [l.strip() for l in lines if l.strip().startswith("File ") and "opsdk" not in l
             and "<string>" not in l and "runpy" not in l]
    return lines[-1] + (f"  ({where[-1]})" if where else "")


def check_folder(folder: Path, timeout: float = 300.0, backend: str = "opsdk") -> list[Outcome]:
    """Every `*.py` of `folder`, in name order."""
    return [run_program(p, timeout, backend) for p in sorted(folder.glob("*.py"))]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m opsdk.v1.check", description=__doc__.split(
        "\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per program")
    parser.add_argument("--against-tf", action="store_true",
                        help="run under TensorFlow's compat.v1 instead (needs tensorflow)")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: {args.folder} is not a folder", file=sys.stderr)
        return 1
    outcomes = check_folder(args.folder, args.timeout, "tf" if args.against_tf else "opsdk")
    if not outcomes:
        print(f"error: no *.py programs in {args.folder}", file=sys.stderr)
        return 1
    for o in outcomes:
        losses = f"  loss {o.losses[0]:.4g} -> {o.losses[-1]:.4g}" if o.losses else ""
        status = "ran" if o.ok else f"FAILED: {o.failure}"
        print(f"{o.program:32s} {o.seconds:6.1f} s  {status}{losses}")
    ran = sum(o.ok for o in outcomes)
    print(f"{ran} of {len(outcomes)} programs ran")
    return 0 if ran == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
