"""Fusion benchmarks: elementwise regions run as one generated kernel, side by side in one run
with the alternatives.

    .venv/bin/python bench/bench_fusion.py [--size 16777216] [--repeats 9] [--gpu]

1. GELU (tanh form) built from builtin ops (mul, add, tanh) through Session.run, fused and with
   the fuse pass off; NumPy's expression; `torch.nn.functional.gelu(approximate="tanh")` where
   PyTorch is installed (reported absent otherwise).
2. A chain of 1000 adds on 256x256 float32 (y = y + x), fused and unfused, per add, beside NumPy
   adding in place.
3. The mean square of a difference, reduce_mean(square(x - y)) over 16M float32 values: the
   region ends in the reduction (its values summed as computed, never written), against the same
   graph with the fuse pass off, NumPy's expression and torch's `((x - y) ** 2).mean()`.
4. A conv layer's bias add and ReLU, relu(x + b) with x [50, 28, 28, 32] and b [32] float32 (the
   deep-MNIST CNN's first layer): the bias is read in the fused pass (a `period:32` input),
   against the fuse pass off, NumPy's `np.maximum(x + b, 0)` and torch's `torch.relu(x + b)`.
5. Where CuPy sees a GPU (`--gpu`: these rows alone): the same GELU graph placed on the GPU, fed
   a CuPy array, through Session.run fused (one generated CUDA kernel) and with the fuse pass
   off, against `torch.nn.functional.gelu(approximate="tanh")` on CUDA and CuPy's expression.
   The GELU node is fetched as an operation, so its result stays on the GPU as the others' do
   (fetching the tensor copies it to the host: that row is printed too). Each GPU time is wall
   time around the call and a device-wide synchronisation. Without a GPU it says so (exit 0).
6. With the GPU rows: reduce_mean(square(x - y)) over 16M float32 values on the GPU, fed CuPy
   arrays, through Session.run fused (one generated rows kernel, the squares never written) and
   with the fuse pass off, against CuPy's `cp.mean(cp.square(x - y))` and torch's
   `((x - y) ** 2).mean()` on CUDA. The mean is fetched as an operation (it stays on the GPU);
   fetching the tensor (one value copied to the host) is printed too.

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
from opsdk.runtime.ir.graph import Graph, device, placeholder
from opsdk.runtime.kernels.fused import wait_for_fused_kernels


def timed(fn, repeats: int, sync=lambda: None) -> tuple[float, float, float]:
    """(median, min, max) seconds of `repeats` calls after one warm-up call, each followed by
    `sync()` (a GPU's synchronisation) inside the timed span."""
    fn()
    sync()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), min(runs), max(runs)


def gelu_graph(registry, n: int, where: str = "/cpu:0"):
    def op(name, *args):
        return apply_op(registry, name, list(args), {})
    f = np.float32
    g = Graph()
    with g.as_default(), device(where):
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


def session_time(graph, fetch, feeds, fuse: bool, repeats: int, sync=lambda: None):
    config = SessionConfig(passes_off=frozenset() if fuse else frozenset({"fuse"}))
    with Session(graph, config) as sess:
        sess.run(fetch, feeds)
        wait_for_fused_kernels(300)
        if fuse:
            lines = sess.explain(fetch, {k: None for k in feeds}, show=False).lines_of("fuse")
            print("  fused:", "; ".join(line.rsplit(" -> ", 1)[-1] for line in lines))
        return timed(lambda: sess.run(fetch, feeds), repeats, sync)


def row(name: str, t: tuple, base: float, per: int = 1) -> None:
    med, lo, hi = (v / per for v in t)
    scale, unit = (1e6, "us") if med < 1e-3 else (1e3, "ms")  # a chain's per-add times in us
    print(f"  {name:<44} {med * scale:9.3f} {unit}  (min {lo * scale:.3f}, max {hi * scale:.3f})"
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


def bench_mean_square(registry, n: int, repeats: int) -> None:
    g, x, y, r = mean_square_graph(registry, n, "/cpu:0")
    rng = np.random.default_rng(0)
    xs, ys = (rng.normal(size=n).astype(np.float32) for _ in range(2))
    fused = session_time(g, r, {x: xs, y: ys}, True, repeats)
    print(f"reduce_mean(square(x - y)), {n} float32")
    row("opsdk Session.run, fused with its reduction", fused, fused[0])
    row("opsdk Session.run, fuse pass off", session_time(g, r, {x: xs, y: ys}, False, repeats),
        fused[0])
    row("NumPy np.mean(np.square(x - y))", timed(lambda: np.mean(np.square(xs - ys)), repeats),
        fused[0])
    try:
        import torch
    except ImportError:
        print("  torch ((x - y) ** 2).mean(): absent (PyTorch is not installed)")
        return
    tx, ty = torch.from_numpy(xs), torch.from_numpy(ys)
    row(f"torch {torch.__version__} ((x - y) ** 2).mean()",
        timed(lambda: ((tx - ty) ** 2).mean(), repeats), fused[0])


def bench_bias_relu(registry, repeats: int, shape=(50, 28, 28, 32)) -> None:
    g = Graph()
    with g.as_default(), device("/cpu:0"):
        x = placeholder("float32", [None, *shape[1:]], name="x")
        b = placeholder("float32", [shape[-1]], name="b")
        y = apply_op(registry, "relu", [apply_op(registry, "add", [x, b], {})], {})
    rng = np.random.default_rng(0)
    xs = rng.normal(size=shape).astype(np.float32)
    bs = rng.normal(size=shape[-1]).astype(np.float32)
    fused = session_time(g, y, {x: xs, b: bs}, True, repeats)
    print(f"relu(x + b), x {list(shape)} and b [{shape[-1]}] float32")
    row("opsdk Session.run, fused (b a period input)", fused, fused[0])
    row("opsdk Session.run, fuse pass off", session_time(g, y, {x: xs, b: bs}, False, repeats),
        fused[0])
    row("NumPy np.maximum(x + b, 0)", timed(lambda: np.maximum(xs + bs, 0), repeats), fused[0])
    try:
        import torch
    except ImportError:
        print("  torch.relu(x + b): absent (PyTorch is not installed)")
        return
    tx, tb = torch.from_numpy(xs), torch.from_numpy(bs)
    row(f"torch {torch.__version__} torch.relu(x + b)", timed(lambda: torch.relu(tx + tb), repeats),
        fused[0])


def gpu_or_reason():
    """CuPy when it imports and sees a device, else (None, why not)."""
    try:
        import cupy as cp
    except ImportError as exc:
        return None, f"CuPy is not installed ({exc})"
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            return None, "no CUDA device"
    except cp.cuda.runtime.CUDARuntimeError as exc:
        return None, f"no usable CUDA device ({exc})"
    return cp, ""


def bench_gelu_gpu(registry, cp, n: int, repeats: int) -> None:
    g, x, y = gelu_graph(registry, n, "/gpu:0")
    xs = cp.asarray(np.random.default_rng(0).normal(size=n).astype(np.float32))
    sync = cp.cuda.Device().synchronize
    c = np.float32

    def cupy_gelu():
        return c(0.5) * xs * (c(1) + cp.tanh(c(0.7978845608) * (xs + c(0.044715) * xs * xs * xs)))
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    print(f"GELU (tanh form), {n} float32 on the GPU ({props['name'].decode()}), Session.run "
          "fed a CuPy array")
    fused = session_time(g, y.op, {x: xs}, True, repeats, sync)
    with Session(g) as sess:
        err = float(np.max(np.abs(sess.run(y, {x: xs}) - cp.asnumpy(cupy_gelu()))))
    print(f"  largest difference from CuPy's expression: {err:.3g}")
    row("opsdk Session.run, fused", fused, fused[0])
    row("opsdk Session.run, fuse pass off", session_time(g, y.op, {x: xs}, False, repeats, sync),
        fused[0])
    row("opsdk Session.run, fused, fetching y (to host)",
        session_time(g, y, {x: xs}, True, repeats, sync), fused[0])
    row(f"CuPy {cp.__version__} expression", timed(cupy_gelu, repeats, sync), fused[0])
    try:
        import torch
    except ImportError:
        print("  torch.nn.functional.gelu on CUDA: absent (PyTorch is not installed)")
        return
    if not torch.cuda.is_available():
        print(f"  torch.nn.functional.gelu on CUDA: absent (torch {torch.__version__} has no CUDA)")
        return
    t = torch.from_dlpack(xs)
    row(f"torch {torch.__version__} gelu(approximate='tanh'), CUDA",
        timed(lambda: torch.nn.functional.gelu(t, approximate="tanh"), repeats, sync), fused[0])


def mean_square_graph(registry, n: int, where: str):
    g = Graph()
    with g.as_default(), device(where):
        x = placeholder("float32", [n], name="x")
        y = placeholder("float32", [n], name="y")
        r = apply_op(registry, "reduce_mean", [apply_op(registry, "square", [
            apply_op(registry, "sub", [x, y], {})], {})], {})
    return g, x, y, r


def bench_mean_square_gpu(registry, cp, n: int, repeats: int) -> None:
    g, x, y, r = mean_square_graph(registry, n, "/gpu:0")
    rng = np.random.default_rng(0)
    xs, ys = (cp.asarray(rng.normal(size=n).astype(np.float32)) for _ in range(2))
    feeds = {x: xs, y: ys}
    sync = cp.cuda.Device().synchronize
    print(f"reduce_mean(square(x - y)), {n} float32 on the GPU, Session.run fed CuPy arrays")
    fused = session_time(g, r.op, feeds, True, repeats, sync)
    with Session(g) as sess:
        got = float(sess.run(r, feeds))
    exact = float(cp.mean(cp.square(xs.astype(cp.float64) - ys.astype(cp.float64))))
    print(f"  relative difference from the float64 mean: {abs(got - exact) / exact:.3g}")
    row("opsdk Session.run, fused with its reduction", fused, fused[0])
    row("opsdk Session.run, fuse pass off", session_time(g, r.op, feeds, False, repeats, sync),
        fused[0])
    row("opsdk Session.run, fused, fetching the mean (to host)",
        session_time(g, r, feeds, True, repeats, sync), fused[0])
    row(f"CuPy {cp.__version__} cp.mean(cp.square(x - y))",
        timed(lambda: cp.mean(cp.square(xs - ys)), repeats, sync), fused[0])
    try:
        import torch
    except ImportError:
        print("  torch ((x - y) ** 2).mean() on CUDA: absent (PyTorch is not installed)")
        return
    if not torch.cuda.is_available():
        print(f"  torch ((x - y) ** 2).mean() on CUDA: absent (torch {torch.__version__} has no "
              "CUDA)")
        return
    tx, ty = torch.from_dlpack(xs), torch.from_dlpack(ys)
    row(f"torch {torch.__version__} ((x - y) ** 2).mean(), CUDA",
        timed(lambda: ((tx - ty) ** 2).mean(), repeats, sync), fused[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1 << 24)
    parser.add_argument("--chain", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--gpu", action="store_true", help="the GPU rows alone")
    parser.add_argument("--cpu", action="store_true", help="the CPU rows alone")
    args = parser.parse_args()
    flags = next((line.split(":", 1)[1].split() for line in open("/proc/cpuinfo")
                  if line.startswith("flags")), [])
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores, SIMD: "
          f"{' '.join(f for f in ('avx2', 'avx512f') if f in flags)}")
    registry = load_registry()
    if not args.gpu:
        bench_gelu(registry, args.size, args.repeats)
        bench_chain(registry, args.chain, args.repeats)
        bench_mean_square(registry, args.size, args.repeats)
        bench_bias_relu(registry, args.repeats)
    if args.cpu:
        return
    cp, why = gpu_or_reason()
    if cp is None:
        print(f"GPU rows: skipped ({why})")
        return
    bench_gelu_gpu(registry, cp, args.size, args.repeats)
    bench_mean_square_gpu(registry, cp, args.size, args.repeats)


if __name__ == "__main__":
    main()
