"""GPU benchmark of pairwise_manhattan and its gradient: opsdk's CUDA kernels against
torch.cdist(p=1) on CUDA and a CuPy broadcasting baseline, with a correctness check first; then
the MNIST tutorial's training step through Session.run on the GPU and on the CPU.

    opsdk build pairwise_manhattan pairwise_manhattan_grad
    python bench/bench_pairwise_manhattan_gpu.py [--quick] [--repeats N] [--compiler nvcc|nvrtc|both]

opsdk's kernels run twice where both are possible: as `opsdk build` compiled them with nvcc
("opsdk") and as the cuda device compiles their declared launches through NVRTC ("opsdk (NVRTC)").

Cases: n=m=4096 and 8192, p=64 and 256, float32 and float64, forward and gradient. Each row
prints the median time, GF/s (3 flops per element and k), the ratio to opsdk, and for opsdk the
fraction of the card's limit for this kernel: two adds per element and k (|x - y| accumulated:
a subtract and an add with the abs folded in), so the limit is the card's add rate / 2 (FP32
lanes x SMs x clock for float32; FP64 lanes for float64).

Without CuPy or a GPU it says so and exits 0 (skipped). Times are medians of wall-clock time
around each call followed by a device-wide synchronisation (so torch's own stream is covered too).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pairwise_impls import torch_cdist  # noqa: E402 (found through the path above)


@dataclass(frozen=True)
class Case:
    """One benchmarked problem: the forward op or the gradient at (n, m, p)."""
    kind: str  # "forward" or "gradient"
    n: int
    m: int
    p: int
    dtype: str

    @property
    def label(self) -> str:
        return f"{self.kind} {self.dtype} n={self.n} m={self.m} p={self.p}"

    @property
    def flops(self) -> float:
        return 3.0 * self.n * self.m * self.p


@dataclass(frozen=True)
class Row:
    """One implementation's result on one case; `note` says why it did not run."""
    impl: str
    seconds: Optional[float]
    note: str = ""


def gpu_or_reason():
    """CuPy when it imports and sees a device, else the reason to skip."""
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


def median_seconds(fn: Callable[[], object], sync: Callable[[], None], repeats: int) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def opsdk_kernels():
    from opsdk.registry import load_registry
    from opsdk.runtime.kernels.loader import load_kernel
    registry = load_registry()
    return (load_kernel(registry.get("pairwise_manhattan"), "cuda"),
            load_kernel(registry.get("pairwise_manhattan_grad"), "cuda"))


def nvrtc_kernels(cp):
    """The same two kernels compiled through NVRTC (their declared launches), called like the
    nvcc-built ones: forward(x, y, z, stream), gradient(x, y, g, gx, gy, stream)."""
    from opsdk.registry import load_registry
    from opsdk.runtime.devices import cuda_jit
    registry = load_registry()

    def wrap(spec, n_inputs: int):
        jit = cuda_jit.jit_kernel(spec)

        def call(*args):
            inputs, outputs = args[:n_inputs], args[n_inputs:-1]
            sizes = {"n": inputs[0].shape[0], "m": inputs[1].shape[0], "p": inputs[0].shape[1]}
            functions = jit.functions({"T": inputs[0].dtype.name}, cp)
            cuda_jit.run_launches(spec, functions, inputs, outputs, sizes, {})  # current stream
        return call
    return (wrap(registry.get("pairwise_manhattan"), 2),
            wrap(registry.get("pairwise_manhattan_grad"), 3))


def impls_for(case: Case, cp, arrays: dict, kernel_sets: dict) -> dict[str, Callable[[], object]]:
    """The callables to time for one case, by name; torch only when it has CUDA."""
    x, y, g = arrays["x"], arrays["y"], arrays["g"]
    stream = cp.cuda.get_current_stream().ptr
    out: dict[str, Callable[[], object]] = {}
    if case.kind == "forward":
        z = cp.empty((case.n, case.m), dtype=case.dtype)
        for name, (forward, _) in kernel_sets.items():
            out[name] = lambda forward=forward: forward(x, y, z, stream)
        out["cupy broadcast"] = lambda: cp.abs(x[:, None, :] - y[None, :, :]).sum(-1)
    else:
        gx, gy = cp.empty_like(x), cp.empty_like(y)
        for name, (_, gradient) in kernel_sets.items():
            out[name] = lambda gradient=gradient: gradient(x, y, g, gx, gy, stream)

        def cupy_grad():
            t = g[:, :, None] * cp.sign(x[:, None, :] - y[None, :, :])
            return t.sum(1), -t.sum(0)
        out["cupy broadcast"] = cupy_grad
    torch_fn = torch_impl(case, x, y, g)
    if torch_fn is not None:
        out["torch.cdist"] = torch_fn
    return out


def torch_impl(case: Case, x, y, g) -> Optional[Callable[[], object]]:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return torch_cdist(torch, case.kind, *(torch.as_tensor(a, device="cuda") for a in (x, y, g)))


def check_correctness(cp, kernels) -> bool:
    """opsdk against the float64 CuPy reference on awkward shapes; prints one line each."""
    forward, gradient = kernels
    ok = True
    stream = cp.cuda.get_current_stream().ptr
    for n, m, p in [(0, 3, 4), (3, 4, 0), (1, 1, 1), (7, 9, 13), (65, 63, 17), (130, 70, 300)]:
        for dtype, tol in (("float32", 2e-5), ("float64", 1e-12)):
            rng = cp.random.default_rng(n * 1000 + m + p)
            x = rng.uniform(-2, 2, (n, p)).astype(dtype)
            y = rng.uniform(-2, 2, (m, p)).astype(dtype)
            g = rng.uniform(-2, 2, (n, m)).astype(dtype)
            z, gx, gy = cp.empty((n, m), dtype), cp.empty_like(x), cp.empty_like(y)
            forward(x, y, z, stream)
            gradient(x, y, g, gx, gy, stream)
            x64, y64, g64 = (a.astype("float64") for a in (x, y, g))
            rz = cp.abs(x64[:, None, :] - y64[None, :, :]).sum(-1)
            t = g64[:, :, None] * cp.sign(x64[:, None, :] - y64[None, :, :])
            errs = [rel_err(cp, z, rz), rel_err(cp, gx, t.sum(1)), rel_err(cp, gy, -t.sum(0))]
            good = max(errs) <= tol
            ok &= good
            print(f"{'ok  ' if good else 'FAIL'} {dtype} n={n} m={m} p={p}: "
                  f"relative errors z {errs[0]:.2g}, grad_x {errs[1]:.2g}, grad_y {errs[2]:.2g}")
    return ok


def rel_err(cp, got, want) -> float:
    if want.size == 0:
        return 0.0
    return float(cp.max(cp.abs(got - want) / (1.0 + cp.abs(want))))


def broadcast_bytes(case: Case) -> int:
    itemsize = 4 if case.dtype == "float32" else 8
    return 2 * case.n * case.m * case.p * itemsize  # the difference and its abs/sign product


def run_case(case: Case, cp, kernel_sets: dict, repeats: int) -> list[Row]:
    rng = cp.random.default_rng(0)
    arrays = {"x": rng.uniform(-2, 2, (case.n, case.p)).astype(case.dtype),
              "y": rng.uniform(-2, 2, (case.m, case.p)).astype(case.dtype),
              "g": rng.uniform(-2, 2, (case.n, case.m)).astype(case.dtype)}
    free, _ = cp.cuda.runtime.memGetInfo()
    sync = cp.cuda.Device().synchronize
    rows = []
    for name, fn in impls_for(case, cp, arrays, kernel_sets).items():
        if name == "cupy broadcast" and broadcast_bytes(case) > 0.6 * free:
            rows.append(Row(name, None, f"skipped: needs {broadcast_bytes(case) / 2**30:.1f} GiB"))
            continue
        rows.append(Row(name, median_seconds(fn, sync, repeats)))
        cp.get_default_memory_pool().free_all_blocks()
    return rows


# FP32 and FP64 lanes per SM by compute capability (CUDA programming guide's throughput table).
_LANES = {(7, 0): (64, 32), (7, 5): (64, 2), (8, 0): (64, 32), (8, 6): (128, 2),
          (8, 7): (128, 2), (8, 9): (128, 2), (9, 0): (128, 64), (10, 0): (128, 64),
          (12, 0): (128, 2)}


def element_limit(cp, dtype: str) -> Optional[float]:
    """The card's limit in (i, j, k) elements per second for this kernel: its add rate / 2."""
    props = cp.cuda.runtime.getDeviceProperties(0)
    lanes = _LANES.get((props["major"], props["minor"]))
    if lanes is None:
        return None
    per_sm = lanes[0] if dtype == "float32" else lanes[1]
    return props["multiProcessorCount"] * per_sm * props["clockRate"] * 1e3 / 2.0


def print_rows(case: Case, rows: list[Row], limit: Optional[float]) -> None:
    base = next((r.seconds for r in rows if r.impl.startswith("opsdk")), None)
    print(f"\n{case.label}")
    for r in rows:
        if r.seconds is None:
            print(f"  {r.impl:<16} {r.note}")
            continue
        ratio = f"{r.seconds / base:7.2f}x opsdk's time" if base else ""
        elements = case.n * case.m * case.p / r.seconds
        share = f"  {elements / limit:6.1%} of the card's limit" if limit else ""
        print(f"  {r.impl:<16} {r.seconds * 1e3:10.3f} ms  {case.flops / r.seconds / 1e9:9.1f} "
              f"GF/s  {ratio}{share}")


def mnist_step_ms(device: str, repeats: int) -> float:
    """Median ms of one training step of the MNIST tutorial's model (batch 100) through
    Session.run, everything under `device`."""
    import numpy as np
    import opsdk.v1 as tf
    graph = tf.Graph()
    with graph.as_default(), tf.device(device):
        x = tf.placeholder(tf.float32, [None, 784])
        W = tf.Variable(tf.zeros([784, 10]))
        b = tf.Variable(tf.zeros([10]))
        y_ = tf.placeholder(tf.float32, [None, 10])
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(
            labels=y_, logits=tf.matmul(x, W) + b))
        train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
        init = tf.global_variables_initializer()
    rng = np.random.default_rng(0)
    feed = {x: rng.random((100, 784), dtype=np.float32),
            y_: np.eye(10, dtype=np.float32)[rng.integers(0, 10, 100)]}
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        return 1e3 * median_seconds(lambda: sess.run(train, feed), lambda: None, repeats)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller large case")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per case")
    parser.add_argument("--compiler", choices=("nvcc", "nvrtc", "both"), default="both",
                        help="opsdk's kernels as nvcc built them, as NVRTC compiles them, or both")
    args = parser.parse_args(argv)
    cp, reason = gpu_or_reason()
    if cp is None:
        print(f"skipped: {reason}")
        return 0
    from opsdk.registry.errors import OpsdkError
    from opsdk.build.nvrtc import nvrtc_problem
    kernel_sets = {}
    try:
        kernel_sets["opsdk"] = opsdk_kernels()
    except OpsdkError as exc:
        print(f"opsdk (nvcc): {exc}\n(build the CUDA kernels with `opsdk build --cuda on`)")
    if args.compiler != "nvcc" and nvrtc_problem() is None:
        kernel_sets["opsdk (NVRTC)"] = nvrtc_kernels(cp)
    elif args.compiler != "nvcc":
        print(f"opsdk (NVRTC): {nvrtc_problem()}")
    if args.compiler == "nvrtc":
        kernel_sets.pop("opsdk", None)
    if not kernel_sets:
        print("error: no opsdk kernel to time", file=sys.stderr)
        return 1
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    for name, kernels in kernel_sets.items():
        print(f"{name}:")
        if not check_correctness(cp, kernels):
            print("correctness check FAILED", file=sys.stderr)
            return 1
    sizes = (2048,) if args.quick else (4096, 8192)
    repeats = args.repeats or (5 if args.quick else 20)
    cases = [Case(kind, n, n, p, dtype) for kind in ("forward", "gradient") for n in sizes
             for p in (64, 256) for dtype in ("float32", "float64")]
    for case in cases:
        print_rows(case, run_case(case, cp, kernel_sets, repeats), element_limit(cp, case.dtype))
    print("\nMNIST tutorial's training step (batch 100) through Session.run:")
    steps = {device: mnist_step_ms(device, repeats * 10) for device in ("/gpu:0", "/cpu:0")}
    for device, ms in steps.items():
        print(f"  {device:<8} {ms:8.3f} ms/step")
    print(f"  GPU/CPU  {steps['/gpu:0'] / steps['/cpu:0']:8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
