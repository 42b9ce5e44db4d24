"""opsdk.jax under jax.jit: the compiled kernel through its XLA FFI handler, through
jax.pure_callback, and the same computation in plain jax.numpy, side by side in one run.

    python bench/bench_jax_ffi.py            # needs `opsdk build` run with jaxlib installed
    python bench/bench_jax_ffi.py --quick

Per size: the median time of one jitted call of each (block_until_ready), forward and forward +
gradient; then the un-jitted call of opsdk.jax (the first one traces and compiles, later ones of
the same shapes reuse it). Medians of repeated runs; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import opsdk.jax as opsdk_jax
from opsdk import _jax_ffi
from opsdk.registry import load_registry


def median_seconds(fn, *args, repeat: int) -> float:
    jax.block_until_ready(fn(*args))  # compile outside the timing
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def reference(x, y):
    return jnp.abs(x[:, None, :] - y[None, :, :]).sum(-1)


def with_ffi(enabled: bool, fn):
    """`fn` traced with opsdk.jax's FFI switch set (it is read when a call is traced)."""
    def traced(*args):
        before, opsdk_jax.FFI = opsdk_jax.FFI, enabled
        try:
            return fn(*args)
        finally:
            opsdk_jax.FFI = before
    return traced


def loss(fn):
    return jax.grad(lambda x, y: fn(x, y).sum())


def row(label: str, seconds: dict[str, float]) -> None:
    base = seconds["FFI handler"]
    cells = "  ".join(f"{name} {value * 1e6:10.1f} us ({value / base:5.2f}x)"
                      for name, value in seconds.items())
    print(f"{label:<28} {cells}")


def compare(n: int, p: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.random((n, p), dtype=np.float32))
    y = jnp.asarray(rng.random((n, p), dtype=np.float32))
    pm = opsdk_jax.ops.pairwise_manhattan
    variants = {"FFI handler": with_ffi(True, pm), "pure_callback": with_ffi(False, pm),
                "plain jnp": reference}
    forward = {name: median_seconds(jax.jit(fn), x, y, repeat=repeat)
               for name, fn in variants.items()}
    row(f"forward n=m={n} p={p}", forward)
    backward = {name: median_seconds(jax.jit(loss(fn)), x, y, repeat=repeat)
                for name, fn in variants.items()}
    row(f"grad    n=m={n} p={p}", backward)


def unjitted(repeat: int) -> None:
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.random((37, 5), dtype=np.float32))  # shapes no other row used
    y = jnp.asarray(rng.random((29, 5), dtype=np.float32))
    pm = opsdk_jax.ops.pairwise_manhattan
    start = time.perf_counter()
    jax.block_until_ready(pm(x, y))
    first = time.perf_counter() - start
    again = median_seconds(pm, x, y, repeat=repeat)
    print(f"un-jitted opsdk.jax call: first {first * 1e3:.1f} ms (trace + compile), "
          f"then {again * 1e6:.1f} us per call (median of {repeat})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    args = parser.parse_args()
    if _jax_ffi.target(load_registry().get("pairwise_manhattan")) is None:
        raise SystemExit("no JAX FFI handler built for pairwise_manhattan: run `opsdk build` "
                         "with jaxlib installed")
    repeat = 20 if args.quick else 100
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, "
          f"load average {os.getloadavg()[0]:.2f} (1 min) at start")
    sizes = [(16, 8), (512, 64)] if args.quick else [(16, 8), (128, 64), (512, 64), (1024, 64)]
    for n, p in sizes:
        compare(n, p, repeat if n < 1024 else max(5, repeat // 10))
    unjitted(repeat)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at end")


if __name__ == "__main__":
    main()
