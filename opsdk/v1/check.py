"""Run a folder of TensorFlow 1 programs under opsdk.v1 and report, per program, whether it ran
and its first failure: try your own code before porting it.

    python -m opsdk.v1.check FOLDER [--timeout 300] [--jobs 2] [--against-tf | --opsdk-only]

Each `*.py` of FOLDER runs in its own subprocess, with `import tensorflow as tf` answered by
`opsdk.v1` and, where TensorFlow is installed, once more by its `compat.v1` (graph mode), side
by side in one table (--against-tf: TensorFlow alone; --opsdk-only: opsdk alone). The numbers a
program prints after `loss` or `cost` (`loss: 0.5`, `cost= 0.5`) are collected, so that both
learning curves can be compared; `ran` means it exited with status 0. Each failure is
given its cause (opsdk/v1/check_causes.py): the framework's, or the program's or its
environment's (a removed NumPy argument, a missing folder or package), which no framework fixes.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from opsdk.v1.check_causes import FRAMEWORK, Cause, cause_of, program_line

# Runs a program with `tensorflow` bound to the chosen module, then exits with its status.
_SHIM = """
import runpy, sys
if sys.argv[1] == "tf":
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    sys.modules["tensorflow"] = tf
else:
    from opsdk.v1.run import bind_tensorflow
    bind_tensorflow()
path = sys.argv[2]
sys.argv = [path]
sys.path.insert(0, __import__("os").path.dirname(path))
runpy.run_path(path, run_name="__main__")
"""

_LOSS = re.compile(r"(?:loss|cost)\s*[:=]\s*\[?\s*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|nan|inf))",
                   re.IGNORECASE)


@dataclass(frozen=True)
class Outcome:
    """One program's run: `ok`, its losses printed, and the first failure and its cause when
    not ok."""

    program: str
    ok: bool
    seconds: float
    losses: tuple[float, ...] = field(default_factory=tuple)
    failure: Optional[str] = None
    cause: Optional[Cause] = None


def run_program(path: Path, timeout: float = 300.0, backend: str = "opsdk") -> Outcome:
    """Run one program in a subprocess under `backend` ('opsdk' or 'tf')."""
    import time
    start = time.perf_counter()
    env = {"TF_USE_LEGACY_KERAS": "1",  # compat.v1's tf.layers and RNN cells (TF 2.16+: tf_keras)
           **os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1",
           "MPLBACKEND": "Agg"}  # plots are drawn off screen: plt.show() returns
    try:
        done = subprocess.run([sys.executable, "-c", _SHIM, backend, str(path.resolve())],
                              capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=path.parent)
    except subprocess.TimeoutExpired:
        return Outcome(path.name, False, timeout, failure=f"timed out after {timeout:.0f} s",
                       cause=Cause("timeout", "too slow for --timeout, or waiting"))
    seconds = time.perf_counter() - start
    losses = tuple(float(m.group(1)) for m in _LOSS.finditer(done.stdout))
    if done.returncode == 0:
        return Outcome(path.name, True, seconds, losses)
    folder = path.resolve().parent  # where the subprocess runs it from: its frames name it
    cause = (Cause("signal", "killed from outside") if done.returncode < 0
             else cause_of(done.stderr, folder, backend))
    return Outcome(path.name, False, seconds, losses,
                   first_failure(done.stderr, done.returncode, folder), cause)


def first_failure(stderr: str, returncode: int = 1, folder: Optional[Path] = None) -> str:
    """The exception line of a traceback, with the program's last line that led to it (a line of
    a file in `folder`); for a program killed by a signal (no traceback), the signal."""
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    if returncode < 0:
        name = _signal_name(-returncode)
        why = " (the kernel's out-of-memory killer sends it)" if name == "SIGKILL" else ""
        last = f"; its last words: {lines[-1]}" if lines else ""
        return f"killed by signal {name}{why}{last}"
    if not lines:
        return f"exited with status {returncode} and printed nothing"
    where = program_line(stderr, folder) if folder is not None else None
    return lines[-1] + (f"  ({where})" if where else "")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def check_folder(folder: Path, timeout: float = 300.0, backend: str = "opsdk",
                 jobs: int = 1) -> list[Outcome]:
    """Every `*.py` of `folder`, in name order (`jobs` at a time)."""
    paths = sorted(folder.glob("*.py"))
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        return list(pool.map(lambda p: run_program(p, timeout, backend), paths))


def _cell(o: Optional[Outcome]) -> str:
    if o is None:
        return "-"
    losses = f" loss {o.losses[0]:.4g}->{o.losses[-1]:.4g}" if o.losses else ""
    return f"{'ran' if o.ok else 'FAILED'} {o.seconds:5.1f} s{losses}"


def print_table(ours: list[Outcome], theirs: Optional[list[Outcome]],
                label: str = "opsdk.v1") -> None:
    """One row per program: the first run's outcome (`label`: opsdk.v1, or TensorFlow's
    compat.v1 under --against-tf), TensorFlow's beside it, and each first failure."""
    theirs_by = {o.program: o for o in theirs or []}
    width = max(len(o.program) for o in ours)
    print(f"{'program':{width}s}  {label:34s}  {'TensorFlow compat.v1' if theirs else ''}")
    for o in ours:
        print(f"{o.program:{width}s}  {_cell(o):34s}  {_cell(theirs_by.get(o.program)) if theirs else ''}")
        t = theirs_by.get(o.program)
        for who, failed in ((label, o), ("TensorFlow", t)):
            if failed is not None and not failed.ok:
                print(f"{'':{width}s}    {who}: {failed.failure}")
                if failed.cause is not None:
                    print(f"{'':{width}s}      cause: {failed.cause.text}")


def causes_summary(outcomes: list[Outcome], backend: str = "opsdk") -> str:
    """'; of the 3 others: 2 the programs' own, 1 the environment's' (empty when all ran)."""
    who = FRAMEWORK[backend]
    words = {"framework": f"errors inside {who}", "refused": f"refused by {who}",
             "program": "the programs' own", "environment": "the environment's",
             "timeout": "timed out", "signal": "killed by a signal", "unknown": "of unknown cause"}
    kinds = [o.cause.kind if o.cause else "unknown" for o in outcomes if not o.ok]
    if not kinds:
        return ""
    counts = ", ".join(f"{kinds.count(k)} {text}" for k, text in words.items() if k in kinds)
    return f"; of the {len(kinds)} others: {counts}"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m opsdk.v1.check", description=__doc__.split(
        "\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per program")
    parser.add_argument("--jobs", type=int, default=1, help="programs run at once")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--against-tf", action="store_true",
                       help="run under TensorFlow's compat.v1 alone (needs tensorflow)")
    which.add_argument("--opsdk-only", action="store_true",
                       help="do not run TensorFlow even where it is installed")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: {args.folder} is not a folder", file=sys.stderr)
        return 1
    with_tf = not args.opsdk_only and importlib.util.find_spec("tensorflow") is not None
    first = "tf" if args.against_tf else "opsdk"
    outcomes = check_folder(args.folder, args.timeout, first, args.jobs)
    if not outcomes:
        print(f"error: no *.py programs in {args.folder}", file=sys.stderr)
        return 1
    theirs = (check_folder(args.folder, args.timeout, "tf", args.jobs)
              if with_tf and not args.against_tf else None)
    print_table(outcomes, theirs, "TensorFlow compat.v1" if args.against_tf else "opsdk.v1")
    ran = sum(o.ok for o in outcomes)
    print(f"{ran} of {len(outcomes)} programs ran" + (" under TensorFlow's compat.v1" if
                                                      args.against_tf else "")
          + causes_summary(outcomes, "tf" if args.against_tf else "opsdk"))
    if theirs is not None:
        both = {o.program for o in theirs if o.ok}
        print(f"TensorFlow's compat.v1 ran {len(both)} of {len(theirs)}; opsdk.v1 ran "
              f"{sum(o.ok for o in outcomes if o.program in both)} of those {len(both)}")
    return 0 if ran == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
