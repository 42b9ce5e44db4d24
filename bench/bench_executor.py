"""Executor benchmarks: per-node overhead on a chain, and overlap of independent heavy nodes.

    .venv/bin/python bench/bench_executor.py [--chain 1000] [--size 8000000]

Prints numbers only; nothing here asserts a timing.

1. A chain of 1000 scalar `add` nodes fed by a placeholder, through Session.run: µs per node,
   next to the cost of calling the builtin add kernel alone, so the executor's own share shows.
2. Two independent `exp` nodes on large arrays against one: the wall-time ratio (1.0 = the two
   ran fully in parallel, 2.0 = one after the other).
3. A chain of 1000 `add` nodes on 256x256 float32 (y = y + x): µs per add and the step's peak
   memory (tracemalloc, which sees NumPy's buffers), next to NumPy adding in place in a loop.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc

import numpy as np

from opsdk.registry import load_callable, load_registry
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import Graph, placeholder
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.exec.session import Session


def best_of(fn, repeats: int) -> float:
    """The fastest of `repeats` timed calls, in seconds (the least disturbed by other work)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def chain_graph(registry, length: int) -> tuple[Graph, Tensor, Tensor]:
    """A graph of `length` scalar float32 `add` nodes (t = t + 1.0) after a placeholder x.

    Returns (graph, x, last): fetch `last` feeding x. bench_overhead.py times the same chain.
    """
    graph = Graph()
    with graph.as_default():
        x = placeholder("float32", [], name="x")
        t = x
        for _ in range(length):
            t = t + 1.0
    return graph, x, t


def bench_chain(registry, length: int) -> None:
    graph, x, t = chain_graph(registry, length)
    feed = {x: np.float32(0.0)}
    with Session(graph) as sess:
        sess.run(t, feed)
        runs = 20
        per_node = best_of(lambda: [sess.run(t, feed) for _ in range(runs)], 5) / runs / length
    spec = registry.get("add")
    kernel = load_callable(spec, spec.kernel("python").source)
    a, b = np.asarray(np.float32(1)), np.asarray(np.float32(1))
    calls = 20000
    alone = best_of(lambda: [kernel(np, a, b) for _ in range(calls)], 5) / calls
    # The plan runs 0-d float adds in their scalar form (kernel.scalar_form on NumPy scalars), so
    # the array kernel's cost is a ceiling of what a node would pay without that, not a share.
    scalar = getattr(kernel, "scalar_form", None)
    sa, sb = np.float32(1), np.float32(1)
    in_scalar = (best_of(lambda: [scalar(sa, sb) for _ in range(calls)], 5) / calls
                 if scalar else float("nan"))
    print(f"chain of {length} scalar adds: {per_node * 1e6:.2f} us/node through Session.run; "
          f"the add kernel on 0-d arrays {alone * 1e6:.2f} us, its scalar form {in_scalar * 1e6:.2f} us; "
          f"executor share {(per_node - in_scalar) * 1e6:.2f} us")


def bench_overlap(registry, size: int) -> None:
    graph = Graph()
    with graph.as_default():
        u = placeholder("float64", [size], name="u")
        v = placeholder("float64", [size], name="v")
        one = apply_op(registry, "exp", [u], {}, name="exp_u")
        two = [one, apply_op(registry, "exp", [v], {}, name="exp_v")]
    data = np.random.default_rng(0).random(size)
    feed = {u: data, v: data.copy()}
    with Session(graph) as sess:
        sess.run(two, feed)
        t_one = best_of(lambda: sess.run(one, {u: data}), 5)
        t_two = best_of(lambda: sess.run(two, feed), 5)
    print(f"exp over {size} doubles: one node {t_one * 1e3:.1f} ms, two independent nodes "
          f"{t_two * 1e3:.1f} ms, ratio {t_two / t_one:.2f} (1.0 = full overlap; "
          f"{os.cpu_count()} cores)")


def bench_array_chain(registry, length: int, side: int = 256) -> None:
    graph = Graph()
    with graph.as_default():
        x = placeholder("float32", [side, side], name="x")
        y = x
        for _ in range(length):
            y = apply_op(registry, "add", [y, x], {})
    value = np.ones((side, side), np.float32)
    with Session(graph) as sess:
        sess.run(y, {x: value})
        times = []
        for _ in range(5):
            start = time.perf_counter()
            sess.run(y, {x: value})
            times.append(time.perf_counter() - start)
        tracemalloc.start()
        sess.run(y, {x: value})
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    a, b = value.copy(), value.copy()
    numpy_times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(length):
            np.add(b, a, out=b)
        numpy_times.append(time.perf_counter() - start)
    print(f"chain of {length} adds on {side}x{side} float32: "
          f"{statistics.median(times) / length * 1e6:.1f} us/add through Session.run, peak "
          f"{peak / 1e6:.1f} MB; NumPy in place {statistics.median(numpy_times) / length * 1e6:.1f} "
          f"us/add (medians of 5)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=int, default=1000)
    parser.add_argument("--size", type=int, default=8_000_000)
    args = parser.parse_args()
    registry = load_registry()
    bench_chain(registry, args.chain)
    bench_overlap(registry, args.size)
    bench_array_chain(registry, args.chain)


if __name__ == "__main__":
    main()
