"""Per-call overheads of opsdk next to raw pybind11, PyTorch, NumPy and TensorFlow, in one run.

    .venv/bin/python bench/bench_overhead.py [--quick] [--only call fwdbwd chain] [--json FILE]

Three measurements, each printed as a table of medians (µs) and ratios; nothing asserts a timing:

1. call    one tiny call: a raw pybind11 function compiled here with the flags `opsdk build` uses,
           the generated glue of pairwise_manhattan called directly (its `cpu` function), the
           generated Python wrapper eagerly, torch.cdist and a torch custom_op; 1x1 float32 inputs.
2. fwdbwd  forward + backward of z = reduce_sum(pairwise_manhattan(x, y)), x 4x3, y 5x3, fetching
           [z, dz/dx, dz/dy] through one Session.run; PyTorch autograd of cdist(p=1).sum() and a
           TensorFlow 1-style graph (tf.compat.v1.Session) on the same sizes.
3. chain   1000 scalar adds in a chain through Session.run (the chain of bench_executor.py), NumPy
           and torch eager doing the same adds in a Python loop, and TF1 Session.run.

A median is taken over repeats of a timed loop of calls; the machine's load average is printed
before and after, since other work on a shared machine slows every row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Skip: an alternative that cannot run here (not installed, failed to build), saying why.
from pairwise_impls import Skip, import_tf  # noqa: E402 (found through the path above)
from overhead_rows import (REPORTED, Row, Settings, print_rows, seconds_of,  # noqa: E402
                           timed_row)

# The raw baselines: what a hand-written pybind11 extension does for this op on 1x1 inputs, without
# opsdk's checks. `l1_array_t` is the idiomatic form (py::array_t arguments, which pybind11 passes
# through PyArray_FromAny on every call); `l1_array` takes py::array (a type check, no conversion),
# as lean as hand-written pybind11 gets while still computing; `noop` is the bare call floor.
RAW_SOURCE = r"""
#include <cmath>
#include <pybind11/pybind11.h>
#include <pybind11/numpy.h>
namespace py = pybind11;

static py::array_t<float> l1(const float* a, const float* b, py::ssize_t n, py::ssize_t m,
                             py::ssize_t p) {
    py::array_t<float> z({n, m});
    float* out = z.mutable_data();
    for (py::ssize_t i = 0; i < n; ++i)
        for (py::ssize_t j = 0; j < m; ++j) {
            float s = 0;
            for (py::ssize_t k = 0; k < p; ++k) s += std::fabs(a[i * p + k] - b[j * p + k]);
            out[i * m + j] = s;
        }
    return z;
}

PYBIND11_MODULE(OPSDK_MODULE_NAME, m) {
    using ArrT = py::array_t<float, py::array::c_style>;
    m.def("l1_array_t", [](ArrT x, ArrT y) {
        return l1(x.data(), y.data(), x.shape(0), y.shape(0), x.shape(1));
    });
    m.def("l1_array", [](py::array x, py::array y) {
        return l1(static_cast<const float*>(x.data()), static_cast<const float*>(y.data()),
                  x.shape(0), y.shape(0), x.shape(1));
    });
    m.def("noop", [](py::handle, py::handle) {});
}
"""

# -- optional frameworks ------------------------------------------------------------------------

def import_torch():
    """torch, or Skip with the reason."""
    try:
        import torch
    except ImportError:
        raise Skip("torch not installed (pip install '.[bench]')") from None
    return torch


# -- 1. one tiny call ---------------------------------------------------------------------------

def build_raw_extension(workdir: Path):
    """Compile RAW_SOURCE with the exact flag list `opsdk build` uses for a cpu kernel; load it."""
    import importlib.util

    from opsdk.build.compiler import (compile_command, extension_suffix, find_toolchain,
                                        flag_template, run_compiler)

    toolchain = find_toolchain("cpu")
    if toolchain is None:
        raise Skip("no g++ on PATH")
    source = workdir / "raw_l1.cc"
    source.write_text(RAW_SOURCE)
    module = "_bench_raw_l1"
    artefact = workdir / f"{module}{extension_suffix()}"
    command = compile_command(toolchain, flag_template("cpu", ROOT), str(source), str(artefact),
                              module, str(workdir / "raw_l1.d"))
    outcome = run_compiler(command, workdir)
    if not outcome.ok:
        raise Skip(f"raw extension failed to compile: {outcome.output.strip()[-300:]}")
    spec = importlib.util.spec_from_file_location(module, artefact)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    print(f"raw pybind11 extension compiled in {outcome.seconds:.1f} s (same flags as opsdk build)")
    return loaded


def torch_tiny_call(x, y) -> Callable:
    torch = import_torch()
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    return lambda: torch.cdist(tx, ty, p=1)


def torch_custom_op_call(x, y) -> Callable:
    """torch.library.custom_op around the same cdist: the custom_op machinery's own cost shows."""
    torch = import_torch()

    # An explicit schema: this module's lazy annotations are strings torch cannot infer from.
    @torch.library.custom_op("opsdk_bench::l1", mutates_args=(),
                             schema="(Tensor a, Tensor b) -> Tensor")
    def l1(a, b):
        return torch.cdist(a, b, p=1)

    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    return lambda: l1(tx, ty)


def raw_rows(x, y, glue, settings: Settings) -> list[Row]:
    """The three raw pybind11 rows; all skipped with one reason when the extension cannot build."""
    names = ("raw pybind11, py::array_t args", "raw pybind11, py::array args",
             "raw pybind11 no-op (call floor)")
    with tempfile.TemporaryDirectory(prefix="opsdk-bench-raw-") as tmp:
        try:
            raw = build_raw_extension(Path(tmp))
        except Skip as why:
            return [Row(name, note=str(why)) for name in names]
        for fn in (raw.l1_array_t, raw.l1_array):
            if not np.array_equal(fn(x, y), glue(x, y)):
                raise SystemExit("the raw extension disagrees with the generated glue")
        return [timed_row(names[0], lambda: lambda: raw.l1_array_t(x, y), settings),
                timed_row(names[1], lambda: lambda: raw.l1_array(x, y), settings),
                timed_row(names[2], lambda: lambda: raw.noop(x, y), settings)]


def bench_call(settings: Settings) -> None:
    from opsdk import ops
    from opsdk.registry import load_registry
    from opsdk.runtime.kernels.loader import load_kernel

    x = np.full((1, 1), 0.5, np.float32)
    y = np.full((1, 1), -0.25, np.float32)
    glue = load_kernel(load_registry().get("pairwise_manhattan"), "cpu")
    glue_name, wrapper_name = "opsdk glue: load_kernel(...)(x, y)", "opsdk wrapper: ops.pairwise_manhattan"
    rows = raw_rows(x, y, glue, settings)
    rows += [timed_row(glue_name, lambda: lambda: glue(x, y), settings),
             timed_row(wrapper_name, lambda: lambda: ops.pairwise_manhattan(x, y), settings,
                       note="eager: attrs, shape inference, kernel choice, then the glue"),
             timed_row("torch.cdist(p=1)", lambda: torch_tiny_call(x, y), settings),
             timed_row("torch custom_op(cdist)", lambda: torch_custom_op_call(x, y), settings)]
    print_rows("one tiny call, 1x1 float32 inputs (µs per call)", rows, rows[1].name)
    lean, glue_s, wrapper_s = (seconds_of(rows, n) for n in (rows[1].name, glue_name, wrapper_name))
    if lean and glue_s:
        print(f"generated glue adds {(glue_s - lean) * 1e6:+.2f} us over the lean raw pybind11 "
              f"function (target <= 1.5 us); the eager wrapper adds "
              f"{(wrapper_s - glue_s) * 1e6:.2f} us over the glue")
    cdist_s, custom_s = seconds_of(rows, "torch.cdist(p=1)"), seconds_of(rows, "torch custom_op(cdist)")
    if cdist_s and custom_s:
        print(f"torch custom_op adds {(custom_s - cdist_s) * 1e6:.2f} us over the bare cdist call")


# -- 2. forward + backward on tiny inputs -------------------------------------------------------

def opsdk_fwdbwd(x, y) -> Callable:
    import opsdk
    from opsdk import ops

    graph = opsdk.Graph()
    with graph.as_default():
        xp = opsdk.placeholder("float32", [None, 3], name="x")
        yp = opsdk.placeholder("float32", [None, 3], name="y")
        z = ops.reduce_sum(ops.pairwise_manhattan(xp, yp, name="dist"), name="z")
        gx, gy = opsdk.gradients(z, [xp, yp])
    sess = opsdk.Session(graph)
    feed = {xp: x, yp: y}
    return lambda: sess.run([z, gx, gy], feed)


def torch_fwdbwd(x, y) -> Callable:
    torch = import_torch()
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    ty = torch.from_numpy(y.copy()).requires_grad_(True)

    def step():
        tx.grad = ty.grad = None
        z = torch.cdist(tx, ty, p=1).sum()
        z.backward()
        return z.item(), tx.grad.numpy(), ty.grad.numpy()
    return step


def tf1_fwdbwd(x, y) -> Callable:
    tf = import_tf()
    graph = tf.Graph()
    with graph.as_default():
        xp = tf.compat.v1.placeholder(tf.float32, [None, 3])
        yp = tf.compat.v1.placeholder(tf.float32, [None, 3])
        z = tf.reduce_sum(tf.abs(xp[:, None, :] - yp[None, :, :]))
        gx, gy = tf.gradients(z, [xp, yp])
    sess = tf.compat.v1.Session(graph=graph)
    feed = {xp: x, yp: y}
    return lambda: sess.run([z, gx, gy], feed)


FWDBWD_TITLE = ("forward + backward, x 4x3, y 5x3 float32, fetch [z, gx, gy] "
                "(µs per step; target <= 10 us)")
FWDBWD_ROWS = ("opsdk Session.run", "torch autograd cdist(p=1).sum().backward()",
               "TF1 Session.run (broadcast |x-y|, tf.gradients)")


def bench_fwdbwd(settings: Settings) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (4, 3)).astype(np.float32)
    y = rng.uniform(-2, 2, (5, 3)).astype(np.float32)
    check_fwdbwd_agree(x, y)
    calls = max(settings.calls // 10, 50)
    makers = (opsdk_fwdbwd, torch_fwdbwd, tf1_fwdbwd)
    rows = [timed_row(name, lambda make=make: make(x, y), settings, calls=calls)
            for name, make in zip(FWDBWD_ROWS, makers)]
    print_rows(FWDBWD_TITLE, rows, FWDBWD_ROWS[0])


def check_fwdbwd_agree(x, y) -> None:
    """The opsdk step must compute what torch does: a benchmark of a wrong result is worthless."""
    z, gx, gy = opsdk_fwdbwd(x, y)()
    s = np.sign(x[:, None, :] - y[None, :, :])
    want = (np.abs(x[:, None, :] - y[None, :, :]).sum(), s.sum(1), -s.sum(0))
    for got, ref, what in zip((z, gx, gy), want, ("z", "dz/dx", "dz/dy")):
        if not np.allclose(got, ref, rtol=1e-5, atol=1e-5):
            raise SystemExit(f"opsdk forward+backward gives a wrong {what}: {got} != {ref}")


# -- 3. a chain of scalar adds ------------------------------------------------------------------

def opsdk_chain(length: int) -> Callable:
    from bench_executor import chain_graph

    import opsdk
    from opsdk.registry import load_registry

    graph, x, last = chain_graph(load_registry(), length)
    sess = opsdk.Session(graph)
    feed = {x: np.float32(0.0)}
    if float(sess.run(last, feed)) != float(length):
        raise SystemExit(f"the opsdk chain of {length} adds does not sum to {length}")
    return lambda: sess.run(last, feed)


def numpy_scalar_chain(length: int) -> Callable:
    """The natural loop: NumPy float32 scalars take NumPy's fast scalar path (no ufunc call)."""
    one = np.float32(1.0)

    def run():
        t = np.float32(0.0)
        for _ in range(length):
            t = t + one
        return t
    return run


def numpy_array_chain(length: int) -> Callable:
    """np.add over 0-d arrays, as opsdk's Python `add` kernel does: the ufunc's own per-call cost."""
    one = np.asarray(np.float32(1.0))

    def run():
        t = np.asarray(np.float32(0.0))
        for _ in range(length):
            t = np.asarray(np.add(t, one))
        return t
    return run


def torch_chain(length: int) -> Callable:
    torch = import_torch()
    start = torch.zeros((), dtype=torch.float32)

    def run():
        t = start
        for _ in range(length):
            t = t + 1.0
        return t
    return run


def tf1_chain(length: int) -> Callable:
    tf = import_tf()
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        t = x
        for _ in range(length):
            t = t + 1.0
    sess = tf.compat.v1.Session(graph=graph)
    return lambda: sess.run(t, {x: 0.0})


def bench_chain(settings: Settings, length: int) -> None:
    calls = max(settings.calls // 200, 5)
    rows = [timed_row(f"opsdk Session.run ({length} add nodes)", lambda: opsdk_chain(length),
                      settings, calls=calls, per=length),
            timed_row("NumPy scalars, t = t + 1 in a Python loop", lambda: numpy_scalar_chain(length),
                      settings, calls=calls, per=length),
            timed_row("NumPy 0-d arrays, np.asarray(np.add(t, one)) in a loop",
                      lambda: numpy_array_chain(length), settings, calls=calls, per=length,
                      note="what the builtin add kernel runs per node"),
            timed_row("torch eager t + 1.0 in a Python loop", lambda: torch_chain(length), settings,
                      calls=calls, per=length),
            timed_row(f"TF1 Session.run ({length} add nodes)", lambda: tf1_chain(length), settings,
                      calls=calls, per=length)]
    print_rows(f"a chain of {length} scalar float32 adds (µs per add; target <= 1 us)", rows,
               rows[0].name)


SECTIONS = ("call", "fwdbwd", "chain")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and repeats")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these measurements")
    parser.add_argument("--chain", type=int, default=1000, help="length of the add chain")
    parser.add_argument("--json", help="also write every row to this JSON file")
    args = parser.parse_args(argv)
    settings = Settings(calls=2000, repeats=5) if args.quick else Settings(calls=20000, repeats=9)
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} at the start")
    chosen = args.only or SECTIONS
    if "call" in chosen:
        bench_call(settings)
    if "fwdbwd" in chosen:
        bench_fwdbwd(settings)
    if "chain" in chosen:
        bench_chain(settings, args.chain)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    if args.json:
        Path(args.json).write_text(json.dumps(REPORTED, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
