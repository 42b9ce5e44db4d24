"""Elementwise work through Session.run, as it runs today (one pass over memory per op):
GELU (tanh form) from builtin ops on 16M float32 values, and a chain of 1000 adds on 256x256
float32, side by side with torch and NumPy.

    .venv/bin/python bench/bench_elementwise.py [--quick] [--repeats N] [--case chain] [--json FILE]

The chain also runs unfused (each add its own kernel, writing into its dead input's buffer), with
and without the opt-in process settings (`opsdk.tune_process()`, opsdk/_process.py); GELU runs
with them too (its fetched 64 MB result is lent to the caller and written again once dropped,
docs/internals.md "Lent fetches"; before that it was a fresh array every run, which glibc maps and
faults in anew, and the settings were what kept its memory).

Each row runs in a process of its own after one warm-up call; it reports the median, min and max
over the repeats and the peak memory of the repeats beyond what the process held after the
warm-up (VmHWM: the step's own buffers, not the plan built on the first call).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

C = math.sqrt(2 / math.pi)


class Skip(Exception):
    """A row that cannot run here; the message says why."""


def gelu_opsdk(n: int) -> Callable:
    from opsdk import ops
    from opsdk.runtime.exec.session import Session
    from opsdk.runtime.ir.graph import Graph, placeholder
    graph = Graph()
    with graph.as_default():
        x = placeholder("float32", [None], name="x")
        inner = ops.mul(ops.add(x, ops.mul(ops.mul(ops.mul(x, x), x), 0.044715)), C)
        y = ops.mul(ops.mul(x, 0.5), ops.add(ops.tanh(inner), 1.0))
    sess = Session(graph)
    feed = {x: np.random.default_rng(0).standard_normal(n, dtype=np.float32)}
    return lambda: sess.run(y, feed)


def gelu_opsdk_tuned(n: int) -> Callable:
    import opsdk
    opsdk.tune_process()  # glibc keeps the freed 64 MB results instead of faulting in new ones
    return gelu_opsdk(n)


def gelu_torch(n: int) -> Callable:
    try:
        import torch
    except ImportError:
        raise Skip("torch not installed") from None
    t = torch.from_numpy(np.random.default_rng(0).standard_normal(n, dtype=np.float32))
    return lambda: torch.nn.functional.gelu(t, approximate="tanh")


def gelu_numpy(n: int) -> Callable:
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    c, k = np.float32(C), np.float32(0.044715)
    return lambda: np.float32(0.5) * x * (np.float32(1) + np.tanh(c * (x + k * x * x * x)))


def chain_opsdk(length: int, passes_off: frozenset = frozenset()) -> Callable:
    from opsdk import ops
    from opsdk.runtime.exec.session import Session, SessionConfig
    from opsdk.runtime.ir.graph import Graph, placeholder
    graph = Graph()
    with graph.as_default():
        x = placeholder("float32", [256, 256], name="x")
        t = x
        for _ in range(length):
            t = ops.add(t, 1.0)
    sess = Session(graph, SessionConfig(passes_off=passes_off))
    feed = {x: np.zeros((256, 256), np.float32)}
    return lambda: sess.run(t, feed)


def chain_unfused(length: int) -> Callable:
    return chain_opsdk(length, frozenset({"fuse"}))


def chain_unfused_tuned(length: int) -> Callable:
    import opsdk
    opsdk.tune_process()  # the opt-in process settings (opsdk/_process.py)
    return chain_unfused(length)


def chain_numpy(length: int) -> Callable:
    x = np.zeros((256, 256), np.float32)

    def run():
        t = x.copy()
        for _ in range(length):
            np.add(t, np.float32(1.0), out=t)
        return t
    return run


CASES = {
    "gelu": ("GELU (tanh form), 16M float32", {"opsdk Session.run": gelu_opsdk,
             "opsdk Session.run, tune_process()": gelu_opsdk_tuned,
             "torch gelu(approximate='tanh')": gelu_torch, "NumPy expression": gelu_numpy}),
    "chain": ("1000 adds on 256x256 float32 (time per add)", {"opsdk Session.run": chain_opsdk,
              "opsdk Session.run, fuse off": chain_unfused,
              "opsdk fuse off, tune_process()": chain_unfused_tuned,
              "NumPy in place": chain_numpy}),
}


def vm_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def worker(case: str, impl: str, size: int, repeats: int) -> dict:
    try:
        fn = CASES[case][1][impl](size)
    except Skip as why:
        return {"skipped": str(why)}
    fn()  # warm-up: the plan is built, kernels load (their memory is not the step's)
    if impl.startswith("opsdk"):  # steady state: fused kernels compile in the background first
        from opsdk.runtime.kernels.fused import wait_for_fused_kernels
        wait_for_fused_kernels(300)
        fn()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
    except OSError:
        pass
    base = vm_kib("VmRSS")
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    peak = (vm_kib("VmHWM") - base) / 1024
    per = size if case == "chain" else 1  # the chain reports time per add
    return {"median_s": statistics.median(times) / per, "min_s": min(times) / per,
            "max_s": max(times) / per, "peak_extra_mib": peak, "repeats": repeats}


def measure(case: str, impl: str, size: int, repeats: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", case, impl, str(size), str(repeats)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"skipped": "failed: " + (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--case", choices=sorted(CASES), action="append",
                        help="run only this case (repeatable; default: all)")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        case, impl, size, repeats = args.worker
        print(json.dumps(worker(case, impl, int(size), int(repeats))))
        return 0
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
    sizes = {"gelu": 16 << 20, "chain": 1000}
    repeats = args.repeats or (3 if args.quick else 7)
    rows = []
    for case, (title, impls) in CASES.items():
        if args.case and case not in args.case:
            continue
        print(title)
        for impl in impls:
            r = {"case": title, "impl": impl, **measure(case, impl, sizes[case], repeats)}
            rows.append(r)
            if "skipped" in r:
                print(f"  {impl:32s} skipped: {r['skipped']}")
            else:
                print(f"  {impl:32s} median {r['median_s'] * 1e3:9.4f} ms  (min {r['min_s'] * 1e3:.4f},"
                      f" max {r['max_s'] * 1e3:.4f})  peak +{r['peak_extra_mib']:.1f} MiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
