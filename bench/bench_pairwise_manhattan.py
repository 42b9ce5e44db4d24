"""CPU benchmark of pairwise_manhattan and its gradient, side by side with the alternatives.

    python bench/bench_pairwise_manhattan.py [--quick] [--repeats N] [--only NAME ...]
        [--portable] [--flagship-from OPDEFS] [--simd baseline|avx2|avx512] [--all]

Compares opsdk (the built CPU kernel, eager and through Session.run) with NumPy broadcasting (only
where the n*m*p temporaries fit; the table says when skipped), SciPy's cdist(cityblock),
torch.cdist(p=1) and, when installed (pip install tensorflow-cpu), TensorFlow: the broadcast |x-y|
summed over p, blockwise over rows of x so its temporaries stay bounded, both as a tf.function and
as a TF1 graph through tf.compat.v1.Session.run. The gradient is compared with torch autograd of
cdist and TensorFlow's hand-vectorised gradient (same blocks). At n=m=4096 TensorFlow runs as the
TF1 graph in float32 only unless --all (its calls take seconds of CPU each; the skipped rows say
so). Each measurement runs in its own subprocess (TensorFlow's: one per implementation), so that
its peak memory (VmHWM from /proc/self/status, which sees C++ allocations that tracemalloc cannot)
is its own: the table shows the peak beyond what the process held once its inputs existed, the
output included.
Times are medians, min and max over the calls timed after one warm-up call: as many as fit in 2 s
(0.5 s with --quick), at least 3 and at most 200 (5), so a call of seconds is timed 3 times; the
table gives the count. GF/s counts 3*n*m*p flops. The CPU time column is the median process CPU
time per call, all threads together: on a shared machine it moves less with the load than the wall
time does, which other work stretches.

By default the opsdk rows run the builtin op as this checkout built it (-march=native). With
--portable or --flagship-from they run a copy of the flagship's declarations and kernels (from
OPDEFS, default this checkout's opdefs/) built in a temporary workspace, for the portable baseline
with --portable (OPSDK_PORTABLE=1, as wheels are); --simd caps the level a portable kernel
dispatches to (OPSDK_SIMD). That compares builds, and kernels of another commit
(`git show REV:opdefs/FILE`), on one machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from pairwise_impls import (ALL_ENV, CEILING, CEILING_ENV, IMPLS,  # noqa: E402  (no package)
                            Case, Skip, build_ceiling, use_flagship_copy)


@dataclass(frozen=True)
class Result:
    """What one subprocess measured, or why it did not (`skipped`)."""
    impl: str
    median_s: Optional[float] = None
    peak_extra_mib: Optional[float] = None
    skipped: str = ""
    cpu_s: Optional[float] = None
    min_s: Optional[float] = None
    max_s: Optional[float] = None
    repeats: int = 0


# -- the worker: one implementation on one case, in a fresh process ----------------------------

def vm_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# Timed calls per row, when --repeats does not fix them: calls go on until their times add up to
# the mode's budget, so that a call of seconds (TensorFlow at n=m=4096) is timed 3 times and one of
# microseconds up to the cap; never fewer than MIN_REPEATS, which a median and a spread need.
MIN_REPEATS = 3
ROW_TIMEOUT_S = 600  # a worker past this is killed and its row says so (a hang blocks nothing)


@dataclass(frozen=True)
class Timing:
    """How many calls a worker times: `repeats` when set, else by `budget_s` within the bounds."""
    repeats: int = 0
    budget_s: float = 2.0
    cap: int = 200

    def more(self, times: list[float]) -> bool:
        """Whether to time another call after those that took `times`."""
        if self.repeats:
            return len(times) < self.repeats
        return len(times) < MIN_REPEATS or (sum(times) < self.budget_s and len(times) < self.cap)


def worker(impl: str, cases: list[Case], timing: Timing) -> list[Result]:
    """`impl` on each case in turn, in this process."""
    return [worker_case(impl, case, timing) for case in cases]


def worker_case(impl: str, case: Case, timing: Timing) -> Result:
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (case.n, case.p)).astype(case.dtype)
    y = rng.uniform(-2, 2, (case.m, case.p)).astype(case.dtype)
    g = rng.uniform(-2, 2, (case.n, case.m)).astype(case.dtype)
    try:
        fn = IMPLS[impl](case, x, y, g)
    except Skip as why:
        return Result(impl, skipped=str(why))
    # The first call measures memory: it allocates whatever the implementation needs.
    reset_peak()
    base = vm_kib("VmRSS")
    fn()
    peak = (vm_kib("VmHWM") - base) / 1024.0
    times, cpu = [], []
    while timing.more(times):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return Result(impl, statistics.median(times), peak, cpu_s=statistics.median(cpu),
                  min_s=min(times), max_s=max(times), repeats=len(times))


# Implementations whose import costs seconds of CPU (TensorFlow's about 6) measure all their cases
# in one process; every other row has a process of its own, so that its peak memory is its own.
SHARED_PROCESS = ("tensorflow tf.function", "tensorflow Session.run")


def measure(impl: str, cases: list[Case], timing: Timing) -> list[Result]:
    """Run `worker` in a subprocess; its last stdout line is the JSON list of results."""
    cmd = [sys.executable, __file__, "--worker", impl, json.dumps([asdict(c) for c in cases]),
           json.dumps(asdict(timing))]
    limit = ROW_TIMEOUT_S * len(cases)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy(),
                              timeout=limit)
    except subprocess.TimeoutExpired:
        return [Result(impl, skipped=f"failed: no result within {limit} s")] * len(cases)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return [Result(impl, skipped=f"failed: {tail}")] * len(cases)
    return [Result(**r) for r in json.loads(proc.stdout.strip().splitlines()[-1])]


def measure_all(impls: list[str], cases: list[Case], timing: Timing):
    """Yield each case and its results in the order of `impls`: first the implementations that
    share a process run over all cases, then case by case the others, so that a case's rows
    are measured close together and each case is reported as soon as it is done."""
    shared = {impl: measure(impl, cases, timing) for impl in impls if impl in SHARED_PROCESS}
    for i, case in enumerate(cases):
        yield case, [shared[impl][i] if impl in shared else measure(impl, [case], timing)[0]
                     for impl in impls]


# -- the table -----------------------------------------------------------------------------------

def print_table(case: Case, results: list[Result]) -> None:
    from rich.console import Console
    from rich.table import Table
    base = next((r.median_s for r in results if r.impl == "opsdk" and r.median_s), None)
    ceiling = next((r.median_s for r in results if r.impl == CEILING and r.median_s), None)
    table = Table(title=case.label, title_justify="left")
    for col in ("implementation", "median", "min - max", "calls", "GF/s", "of ceiling",
                "time / opsdk", "CPU time", "peak extra memory"):
        table.add_column(col, justify="left" if col == "implementation" else "right")
    for r in results:
        if r.median_s is None:
            table.add_row(r.impl, f"[dim]{r.skipped}[/dim]", "", "", "", "", "", "", "")
            continue
        table.add_row(r.impl, format_seconds(r.median_s),
                      f"{format_seconds(r.min_s)} - {format_seconds(r.max_s)}", str(r.repeats),
                      f"{case.flops / r.median_s / 1e9:.1f}",
                      f"{ceiling / r.median_s:.2f}" if ceiling else "",
                      f"{r.median_s / base:.2f}x" if base else "", format_seconds(r.cpu_s),
                      f"{r.peak_extra_mib:.1f} MiB")
    Console(width=max(Console().width, 130)).print(table)


def json_rows(case: Case, results: list[Result]) -> list[dict]:
    """The table's rows for --json: GF/s, the share of the ceiling loop's rate and the time
    relative to the opsdk row's included."""
    ceiling = next((r.median_s for r in results if r.impl == CEILING and r.median_s), None)
    base = next((r.median_s for r in results if r.impl == "opsdk" and r.median_s), None)
    rows = []
    for r in results:
        row = {"case": case.label, **asdict(r)}
        if r.median_s:
            row["gflops"] = case.flops / r.median_s / 1e9
            row["of_ceiling"] = ceiling / r.median_s if ceiling else None
            row["time_vs_opsdk"] = r.median_s / base if base else None
        rows.append(row)
    return rows


def format_seconds(s: float) -> str:
    return f"{s:.3f} s" if s >= 1 else (f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us")


def cases_for(quick: bool) -> list[Case]:
    big = 2048 if quick else 4096
    return [Case("forward", big, big, 256), Case("forward", big, big, 256, "float64"),
            Case("forward", 128, 128, 64), Case("gradient", 1024, 1024, 256),
            Case("gradient", 1024, 1024, 256, "float64")]


def timing_for(quick: bool, repeats: Optional[int]) -> Timing:
    """--repeats N times N calls of every row; else each row's calls fit a budget (see Timing)."""
    if repeats:
        return Timing(repeats=repeats)
    return Timing(budget_s=0.5, cap=5) if quick else Timing(budget_s=2.0, cap=200)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n=m=2048 for the large case, few repeats")
    parser.add_argument("--repeats", type=int,
                        help="timed calls per row (default: as many as fit in 2 s, 0.5 s with "
                             f"--quick, after the warm-up call, at least {MIN_REPEATS})")
    parser.add_argument("--only", nargs="+", choices=sorted(IMPLS), help="run only these")
    parser.add_argument("--portable", action="store_true",
                        help="opsdk rows: a copy of the flagship built with OPSDK_PORTABLE=1")
    parser.add_argument("--flagship-from", type=Path, metavar="OPDEFS",
                        help="opsdk rows: the flagship's files from this folder, built in a copy")
    parser.add_argument("--simd", choices=("baseline", "avx2", "avx512"),
                        help="cap a portable kernel's run-time choice (sets OPSDK_SIMD)")
    parser.add_argument("--all", action="store_true",
                        help="at n=m=4096 also TensorFlow's tf.function and float64 rows "
                             "(seconds of CPU per call each; by default one TF1 float32 row)")
    parser.add_argument("--json", help="also write every row to this JSON file")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        impl, cases, timing = args.worker
        results = worker(impl, [Case(**c) for c in json.loads(cases)], Timing(**json.loads(timing)))
        print(json.dumps([asdict(r) for r in results]))
        return 0
    if args.all:
        os.environ[ALL_ENV] = "1"
    workspace = use_flagship_copy(args)
    ceiling_dir = Path(tempfile.mkdtemp(prefix="bench_ceiling_"))
    os.environ[CEILING_ENV] = build_ceiling(ceiling_dir)
    print(f"{os.cpu_count()} CPUs; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; "
          f"load average {os.getloadavg()[0]:.1f} (other work on the machine slows every row alike)")
    rows = []
    try:
        timing = timing_for(args.quick, args.repeats)
        for case, results in measure_all(list(args.only or IMPLS), cases_for(args.quick), timing):
            print_table(case, results)
            rows += json_rows(case, results)
            if args.json:  # case by case: a run stopped at its time limit keeps what it measured
                Path(args.json).write_text(json.dumps(rows, indent=1))
    finally:
        if workspace is not None:
            shutil.rmtree(workspace, ignore_errors=True)
        shutil.rmtree(ceiling_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
