"""conv2d and its gradient (and max_pool's) on the CPU: opsdk's C++ kernel, its NumPy python kernel
(windows copied, then one BLAS GEMM: the GEMM lowering on the BLAS NumPy ships),
torch.nn.functional.conv2d (channels_last, the same NHWC memory) and TensorFlow's raw NHWC ops
(oneDNN), float32, where installed.

    .venv/bin/python bench/bench_conv2d.py [--repeats 15] [--threads 1] [--only mnist2 ...]

Shapes are the layers of TF's deep-MNIST tutorial (batch 50) and a wider 3x3 layer. Each time is
the median over repeats after a warm-up call; "gradient" is both input and filter gradients
(torch: one autograd backward; TensorFlow: Conv2DBackpropInput and Conv2DBackpropFilter). GF/s
counts 2 * n * oh * ow * kh * kw * c * o flops per pass (twice that for the gradient). The load
average is printed before and after: the machine is shared, and a busy one slows every column
alike only roughly; so each cell also shows the median CPU time of the process per call (all
threads), which other processes inflate much less: with --threads 1 (OpenMP, torch and
TensorFlow on one thread) it is the fairest comparison on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@dataclass(frozen=True)
class Case:
    name: str
    n: int
    h: int
    w: int
    c: int
    k: int
    o: int
    stride: int = 1
    same: int = 1

    @property
    def out(self) -> tuple[int, int]:
        if self.same:
            return -(-self.h // self.stride), -(-self.w // self.stride)
        return (self.h - self.k) // self.stride + 1, (self.w - self.k) // self.stride + 1

    @property
    def flops(self) -> float:
        oh, ow = self.out
        return 2.0 * self.n * oh * ow * self.k * self.k * self.c * self.o


CASES = (
    Case("mnist1", 50, 28, 28, 1, 5, 32),
    Case("mnist2", 50, 14, 14, 32, 5, 64),
    Case("wide3x3", 32, 32, 32, 64, 3, 64),
    Case("stride2", 32, 32, 32, 32, 3, 64, stride=2, same=0),
)


def median_time(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(median wall seconds, median process CPU seconds) per call, after a warm-up call."""
    fn()
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def opsdk_calls(case: Case, x, f, gy) -> dict:
    from opsdk import ops
    from opdefs.builtin import kernels_conv as python_kernels
    attrs = dict(stride_h=case.stride, stride_w=case.stride, same=case.same)
    return {
        "opsdk C++": (lambda: ops.conv2d(x, f, **attrs), lambda: ops.conv2d_grad(x, f, gy, **attrs)),
        "opsdk python": (lambda: python_kernels.conv2d(np, x, f, **attrs),
                         lambda: python_kernels.conv2d_grad(np, x, f, gy, **attrs)),
    }


def torch_calls(case: Case, x, f, gy) -> dict:
    try:
        import torch
    except ImportError:
        return {}
    tx = torch.from_numpy(x).permute(0, 3, 1, 2).requires_grad_()  # NHWC memory: channels_last
    tf_ = torch.from_numpy(np.ascontiguousarray(f.transpose(3, 2, 0, 1))).requires_grad_()
    tgy = torch.from_numpy(gy).permute(0, 3, 1, 2)
    pad = "same" if case.same and case.stride == 1 else 0
    if case.same and case.stride != 1:
        return {}  # torch has no SAME padding with strides; the table leaves it out

    def forward():
        with torch.no_grad():
            return torch.nn.functional.conv2d(tx, tf_, stride=case.stride, padding=pad)

    def gradient():
        y = torch.nn.functional.conv2d(tx, tf_, stride=case.stride, padding=pad)
        return torch.autograd.grad(y, (tx, tf_), tgy)

    return {"torch": (forward, gradient)}


def tf_calls(case: Case, x, f, gy) -> dict:
    """TensorFlow's NHWC kernels (oneDNN on x86), run eagerly."""
    import importlib.util
    if importlib.util.find_spec("tensorflow") is None:
        return {}
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    tx, tf_, tgy = tf.constant(x), tf.constant(f), tf.constant(gy)
    kw = dict(strides=[1, case.stride, case.stride, 1], padding="SAME" if case.same else "VALID")

    def gradient():
        ops = tf.raw_ops
        return (ops.Conv2DBackpropInput(input_sizes=x.shape, filter=tf_, out_backprop=tgy, **kw).numpy(),
                ops.Conv2DBackpropFilter(input=tx, filter_sizes=f.shape, out_backprop=tgy, **kw).numpy())
    return {"tf": (lambda: tf.raw_ops.Conv2D(input=tx, filter=tf_, **kw).numpy(), gradient)}


def run_case(case: Case, repeats: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((case.n, case.h, case.w, case.c), dtype=np.float32)
    f = rng.standard_normal((case.k, case.k, case.c, case.o), dtype=np.float32)
    gy = rng.standard_normal((case.n, *case.out, case.o), dtype=np.float32)
    calls = {**opsdk_calls(case, x, f, gy), **torch_calls(case, x, f, gy), **tf_calls(case, x, f, gy)}
    for kind, index, flops in (("forward", 0, case.flops), ("gradient", 1, 2 * case.flops)):
        times = {name: median_time(pair[index], repeats) for name, pair in calls.items()}
        cells = "  ".join(f"{n}: {t * 1e3:7.2f} ms ({c * 1e3:7.2f} cpu) {flops / t / 1e9:6.1f} GF/s"
                          for n, (t, c) in times.items())
        base = times["opsdk C++"][0]
        ratios = "  ".join(f"{n}/C++ {t / base:5.2f}" for n, (t, _) in times.items() if n != "opsdk C++")
        print(f"{case.name:8s} {kind:8s} {cells}  {ratios}", flush=True)


def run_max_pool(repeats: int) -> None:
    """max_pool 2x2 / 2 over the first deep-MNIST layer's output, and its gradient."""
    from opsdk import ops
    from opdefs.builtin import kernels_conv as python_kernels
    x = np.random.default_rng(0).standard_normal((50, 28, 28, 32), dtype=np.float32)
    attrs = dict(ksize_h=2, ksize_w=2, stride_h=2, stride_w=2, same=1)
    y = ops.max_pool(x, **attrs)
    gy = np.ones_like(y)
    calls = {"opsdk C++": (lambda: ops.max_pool(x, **attrs), lambda: ops.max_pool_grad(x, y, gy, **attrs)),
             "opsdk python": (lambda: python_kernels.max_pool(np, x, **attrs),
                              lambda: python_kernels.max_pool_grad(np, x, y, gy, **attrs))}
    try:
        import torch
        tx = torch.from_numpy(x).permute(0, 3, 1, 2).requires_grad_()
        tgy = torch.from_numpy(gy).permute(0, 3, 1, 2)
        pool = torch.nn.functional.max_pool2d

        def torch_grad():
            return torch.autograd.grad(pool(tx, 2, 2), tx, tgy)
        calls["torch"] = (lambda: pool(tx.detach(), 2, 2), torch_grad)
    except ImportError:
        pass
    for kind, index in (("forward", 0), ("gradient", 1)):
        times = {name: median_time(pair[index], repeats) for name, pair in calls.items()}
        cells = "  ".join(f"{n}: {t * 1e3:7.2f} ms ({c * 1e3:7.2f} cpu)" for n, (t, c) in times.items())
        print(f"max_pool {kind:8s} {cells}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--only", nargs="*", default=None, help="case names (default: all)")
    parser.add_argument("--threads", type=int, default=None, help="threads of every kernel")
    args = parser.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # read when the kernels first load
        try:
            import torch
            torch.set_num_threads(args.threads)
        except ImportError:
            pass
        try:  # before TensorFlow's first op starts its thread pools
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
            import tensorflow as tf
            tf.config.threading.set_intra_op_parallelism_threads(args.threads)
            tf.config.threading.set_inter_op_parallelism_threads(args.threads)
        except ImportError:
            pass
    print(f"load average before: {os.getloadavg()}")
    for case in CASES:
        if args.only is None or case.name in args.only:
            print(f"-- {case}")
            run_case(case, args.repeats)
    if args.only is None or "max_pool" in args.only:
        print("-- max_pool [50, 28, 28, 32], 2x2 windows, strides 2, SAME")
        run_max_pool(args.repeats)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
