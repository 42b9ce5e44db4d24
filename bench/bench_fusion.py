"""Fusion benchmarks: elementwise regions run as one generated kernel, side by side in one run
with the alternatives.

    .venv/bin/python bench/bench_fusion.py [--size 16777216] [--repeats 9]

1. GELU (tanh form) built from builtin ops (mul, add, tanh) through Session.run, fused and with
   the fuse pass off; NumPy's expression; `torch.nn.functional.gelu(approximate="tanh")` where
   PyTorch is installed (reported absent otherwise).
2. A chain of 1000 adds on 256x256 float32 (y = y + x), fused and unfused, per add, beside NumPy
   adding in place.

Prints medians (and min/max) of timed runs after a warm-up, the ratios, the load average and the
CPU's SIMD flags; nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from opsdk.registry import load_registry
from opsdk.runtime.exec.session import Session, SessionConfig
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import Graph, placeholder
from opsdk.runtime.kernels.fused import wait_for_fused_kernels


def timed(fn, repeats: int) -> tuple[float, float, float]:
    """(median, min, max) seconds of `repeats` calls after one warm-up call."""
    fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), min(runs), max(runs)


def gelu_graph(registry, n: int):
    def op(name, *args):
        return apply_op(registry, name, list(args), {})
    f = np.float32
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [n], name="x")
        inner = op("mul", f(0.7978845608),
                   op("add", x, op("mul", f(0.044715), op("mul", x, op("mul", x, x)))))
        y = op("mul", op("mul", f(0.5), x), op("add", f(1.0), op("tanh", inner)))
    return g, x, y


def add_chain(registry, length: int):
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [256, 256], name="x")
        y = x
        for _ in range(length):
            y = apply_op(registry, "add", [y, x], {})
    return g, x, y


def session_time(graph, fetch, feeds, fuse: bool, repeats: int):
    config = SessionConfig(passes_off=frozenset() if fuse else frozenset({"fuse"}))
    with Session(graph, config) as sess:
        sess.run(fetch, feeds)
        wait_for_fused_kernels(300)
        return timed(lambda: sess.run(fetch, feeds), repeats)


def row(name: str, t: tuple, base: float, per: int = 1) -> None:
    med, lo, hi = (v / per for v in t)
    print(f"  {name:<44} {med * 1e3:9.3f} ms  (min {lo * 1e3:.3f}, max {hi * 1e3:.3f})"
          f"   x{base / t[0]:.2f} vs opsdk fused")


def bench_gelu(registry, n: int, repeats: int) -> None:
    g, x, y = gelu_graph(registry, n)
    xs = np.random.default_rng(0).normal(size=n).astype(np.float32)
    fused = session_time(g, y, {x: xs}, True, repeats)
    print(f"GELU (tanh form), {n} float32")
    row("opsdk Session.run, fused", fused, fused[0])
    row("opsdk Session.run, fuse pass off", session_time(g, y, {x: xs}, False, repeats),
        fused[0])
    c = np.float32
    row("NumPy expression", timed(lambda: c(0.5) * xs * (c(1) + np.tanh(
        c(0.7978845608) * (xs + c(0.044715) * xs * xs * xs))), repeats), fused[0])
    try:
        import torch
    except ImportError:
        print("  torch.nn.functional.gelu: absent (PyTorch is not installed)")
        return
    t = torch.from_numpy(xs)
    row(f"torch {torch.__version__} gelu(approximate='tanh')",
        timed(lambda: torch.nn.functional.gelu(t, approximate="tanh"), repeats), fused[0])


def bench_chain(registry, length: int, repeats: int) -> None:
    g, x, y = add_chain(registry, length)
    xs = np.ones((256, 256), np.float32)
    fused = session_time(g, y, {x: xs}, True, repeats)
    print(f"A chain of {length} adds on 256x256 float32, per add")
    row("opsdk Session.run, fused", fused, fused[0], length)
    row("opsdk Session.run, fuse pass off", session_time(g, y, {x: xs}, False, repeats),
        fused[0], length)

    def numpy_in_place():
        acc = xs.copy()
        for _ in range(length):
            np.add(acc, xs, out=acc)
    row("NumPy in place", timed(numpy_in_place, repeats), fused[0], length)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1 << 24)
    parser.add_argument("--chain", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    flags = next((line.split(":", 1)[1].split() for line in open("/proc/cpuinfo")
                  if line.startswith("flags")), [])
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores, SIMD: "
          f"{' '.join(f for f in ('avx2', 'avx512f') if f in flags)}")
    registry = load_registry()
    bench_gelu(registry, args.size, args.repeats)
    bench_chain(registry, args.chain, args.repeats)


if __name__ == "__main__":
    main()
