"""CPU benchmark of pairwise_manhattan and its gradient, side by side with the alternatives.

    python bench/bench_pairwise_manhattan.py [--quick] [--repeats N] [--only NAME ...]
        [--portable] [--flagship-from OPDEFS] [--simd baseline|avx2|avx512]

Compares opsdk (the built CPU kernel, eager and through Session.run) with NumPy broadcasting
(only where the n*m*p temporaries fit; the table says when skipped), SciPy's cdist(cityblock),
torch.cdist(p=1) and, when installed (pip install tensorflow-cpu), TensorFlow: the broadcast
|x - y| summed over p, blockwise over rows of x so its temporaries stay bounded, both as a
tf.function and as a TF1 graph through tf.compat.v1.Session.run. The gradient is compared with
torch autograd of cdist and TensorFlow's hand-vectorised gradient (same blocks). Each measurement runs in its own subprocess, so that its peak memory (VmHWM from
/proc/self/status, which sees C++ allocations that tracemalloc cannot) is its own: the table shows
the peak beyond what the process held once its inputs existed, the output included.
Times are medians over repeats after one warm-up call; GF/s counts 3*n*m*p flops. The CPU time
column is the median process CPU time per call, all threads together: on a shared machine it moves
less with the load than the wall time does, which other work stretches.

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
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# NumPy broadcasting holds two n*m*p temporaries; past this it is skipped, not swapped to death.
NUMPY_BUDGET_BYTES = 2 << 30
# TensorFlow has no L1 cdist: its rows broadcast over blocks of x's rows of at most this much.
TF_BLOCK_BYTES = 256 << 20


@dataclass(frozen=True)
class Case:
    """One problem: `kind` is forward or gradient, of `dtype` (float32 or float64)."""
    kind: str
    n: int
    m: int
    p: int
    dtype: str = "float32"

    @property
    def label(self) -> str:
        return f"{self.kind} n={self.n} m={self.m} p={self.p} {self.dtype}"

    @property
    def flops(self) -> float:
        return 3.0 * self.n * self.m * self.p


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


# -- the flagship in a workspace of its own (--portable, --flagship-from) -----------------------

# The workers' workspace, set by --portable / --flagship-from (empty: the checkout's builtin op).
WORKSPACE_ENV = "OPSDK_BENCH_WORKSPACE"
FLAGSHIP_FILES = ("pairwise_manhattan.yaml", "pairwise_manhattan_grad.yaml",
                  "pairwise_manhattan_cpu.cc", "pairwise_manhattan_grad_cpu.cc",
                  "pairwise_manhattan_simd.h")
# Renamed, so that the copy does not clash with the builtin op of the same name.
COPY_NAME = "pm_bench"


def build_flagship_copy(opdefs: Path, portable: bool) -> Path:
    """The flagship's files from `opdefs`, renamed, cpu only, built in a temporary workspace."""
    root = Path(tempfile.mkdtemp(prefix="bench_pm_"))
    (root / "opdefs").mkdir()
    for name in FLAGSHIP_FILES:
        text = (opdefs / name).read_text().replace("pairwise_manhattan", COPY_NAME)
        text = re.sub(r"\n  cuda:.*(?:\n {4,}.*)*", "", text)  # the cuda entry and its launch block
        (root / "opdefs" / name.replace("pairwise_manhattan", COPY_NAME)).write_text(text)
    env = {**os.environ, "OPSDK_PORTABLE": "1" if portable else "0"}
    subprocess.run([sys.executable, "-m", "opsdk.cli", "build", "--cuda=off", "--no-progress",
                    "-C", str(root)], env=env, check=True, stdout=subprocess.DEVNULL)
    return root


def flagship_ops():
    """(forward, gradient) functions: of the bench's workspace when there is one, else builtin."""
    workspace = os.environ.get(WORKSPACE_ENV)
    if not workspace:
        from opsdk import ops
        return ops.pairwise_manhattan, ops.pairwise_manhattan_grad
    import opsdk
    ops = opsdk.load_ops(workspace)
    return getattr(ops, COPY_NAME), getattr(ops, f"{COPY_NAME}_grad")


def use_flagship_copy(args: argparse.Namespace) -> Optional[Path]:
    """Point the workers at a built copy of the flagship when asked (and at OPSDK_SIMD's cap)."""
    if args.simd:
        os.environ["OPSDK_SIMD"] = args.simd
    if not (args.portable or args.flagship_from):
        return None
    opdefs = args.flagship_from or ROOT / "opdefs"
    workspace = build_flagship_copy(opdefs, args.portable)
    os.environ[WORKSPACE_ENV] = str(workspace)
    print(f"opsdk rows: the flagship from {opdefs}, built {'portable' if args.portable else 'native'}"
          f" in {workspace}; OPSDK_SIMD={os.environ.get('OPSDK_SIMD', 'unset')}")
    return workspace


# -- the implementations: each returns a zero-argument callable over prepared inputs -------------

def make_opsdk(case: Case, x, y, g):
    forward, gradient = flagship_ops()
    if case.kind == "forward":
        return lambda: forward(x, y)
    return lambda: gradient(x, y, g)


def make_opsdk_session(case: Case, x, y, g):
    from opsdk.runtime.ir.graph import Graph, placeholder
    from opsdk.runtime.exec.session import Session
    if case.kind != "forward":
        raise Skip("forward only")
    forward, _ = flagship_ops()
    graph = Graph()
    with graph.as_default():
        xp = placeholder(case.dtype, [None, case.p], name="x")
        yp = placeholder(case.dtype, [None, case.p], name="y")
        z = forward(xp, yp, name="dist")
    sess = Session(graph)
    feed = {xp: x, yp: y}
    return lambda: sess.run(z, feed)


def make_numpy(case: Case, x, y, g):
    import numpy as np
    need = 2 * case.n * case.m * case.p * x.itemsize
    if need > NUMPY_BUDGET_BYTES:
        raise Skip(f"needs {need / 2**30:.1f} GiB of temporaries")
    if case.kind == "forward":
        return lambda: np.abs(x[:, None, :] - y[None, :, :]).sum(-1)

    def grad():
        t = g[:, :, None] * np.sign(x[:, None, :] - y[None, :, :])
        return t.sum(1), -t.sum(0)
    return grad


def make_scipy(case: Case, x, y, g):
    if case.kind != "forward":
        raise Skip("SciPy has no gradient")
    from scipy.spatial.distance import cdist
    return lambda: cdist(x, y, metric="cityblock")


def make_torch(case: Case, x, y, g):
    try:
        import torch
    except ImportError:
        raise Skip("torch not installed (pip install torch==2.13.0)") from None
    tx, ty, tg = (torch.from_numpy(a) for a in (x, y, g))
    if case.kind == "forward":
        return lambda: torch.cdist(tx, ty, p=1)
    tx.requires_grad_(True)
    ty.requires_grad_(True)
    tz = torch.cdist(tx, ty, p=1)
    return lambda: torch.autograd.grad(tz, (tx, ty), tg, retain_graph=True)


def import_tf():
    """TensorFlow (not a dependency: pip install tensorflow-cpu), or Skip saying so."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import tensorflow as tf
    except ImportError:
        raise Skip("TensorFlow not installed (pip install tensorflow-cpu)") from None
    return tf


def tf_block_rows(case: Case) -> int:
    """Rows of x per broadcast block, so a block's n*m*p temporaries stay within TF_BLOCK_BYTES."""
    per_row = 3 * case.m * case.p * (8 if case.dtype == "float64" else 4)  # difference, abs, product
    return max(1, min(case.n, TF_BLOCK_BYTES // per_row))


def tf_forward(tf, a, b, rows: int):
    """|a - b| summed over p by broadcasting, over blocks of `rows` rows of a (TF has no L1 cdist)."""
    n = int(a.shape[0])
    parts = [tf.reduce_sum(tf.abs(a[i:i + rows, None, :] - b[None, :, :]), axis=-1)
             for i in range(0, n, rows)]
    return parts[0] if len(parts) == 1 else tf.concat(parts, axis=0)


def tf_gradient(tf, a, b, g, rows: int):
    """The gradient written vectorised by hand, blockwise: what a TF user writes for speed."""
    n = int(a.shape[0])
    gx, gy = [], tf.zeros_like(b)
    for i in range(0, n, rows):
        t = g[i:i + rows, :, None] * tf.sign(a[i:i + rows, None, :] - b[None, :, :])
        gx.append(tf.reduce_sum(t, axis=1))
        gy = gy - tf.reduce_sum(t, axis=0)
    return (gx[0] if len(gx) == 1 else tf.concat(gx, axis=0)), gy


def make_tensorflow(case: Case, x, y, g):
    """tf.function over the blockwise broadcast (forward) or the hand-vectorised gradient."""
    tf = import_tf()
    rows = tf_block_rows(case)
    tx, ty, tg = tf.constant(x), tf.constant(y), tf.constant(g)
    if case.kind == "forward":
        fn = tf.function(lambda a, b: tf_forward(tf, a, b, rows))
        return lambda: fn(tx, ty).numpy()
    fn = tf.function(lambda a, b, c: tf_gradient(tf, a, b, c, rows))
    return lambda: [t.numpy() for t in fn(tx, ty, tg)]


def make_tensorflow_session(case: Case, x, y, g):
    """The same computation as a TF1 graph run by tf.compat.v1.Session (opsdk's own model)."""
    tf = import_tf()
    rows = tf_block_rows(case)
    graph = tf.Graph()
    with graph.as_default():
        a = tf.compat.v1.placeholder(x.dtype, x.shape)
        b = tf.compat.v1.placeholder(y.dtype, y.shape)
        c = tf.compat.v1.placeholder(g.dtype, g.shape)
        if case.kind == "forward":
            fetch, feed = tf_forward(tf, a, b, rows), {a: x, b: y}
        else:
            fetch, feed = list(tf_gradient(tf, a, b, c, rows)), {a: x, b: y, c: g}
    sess = tf.compat.v1.Session(graph=graph)
    return lambda: sess.run(fetch, feed)


# -- the ceiling: the kernel's three vector operations, register-resident, on every core ----------

CEILING_ENV = "OPSDK_BENCH_CEILING"  # the compiled ceiling_l1.cc, set by main for the workers
CEILING = "ceiling loop"


def build_ceiling(workdir: Path) -> str:
    """Compile ceiling_l1.cc with `opsdk build`'s cpu flags; the module's path, or why not."""
    from opsdk.build.compiler import (compile_command, extension_suffix, find_toolchain,
                                        flag_template, run_compiler)
    toolchain = find_toolchain("cpu")
    if toolchain is None:
        return "no g++ on PATH"
    module = "_bench_ceiling_l1"
    artefact = workdir / f"{module}{extension_suffix()}"
    flags = (*flag_template("cpu", ROOT), f"-I{ROOT / 'opdefs'}")
    command = compile_command(toolchain, flags, str(ROOT / "bench" / "ceiling_l1.cc"),
                              str(artefact), module, str(workdir / "ceiling.d"))
    outcome = run_compiler(command, workdir)
    if not outcome.ok:
        return f"failed to compile: {outcome.output.strip()[-300:]}"
    return str(artefact)


def make_ceiling(case: Case, x, y, g):
    """The same number of subtract/abs/add lane operations as the case, with no memory traffic."""
    import importlib.util
    if case.kind != "forward":
        raise Skip("forward only")
    path = os.environ.get(CEILING_ENV, "")
    if not path.endswith(".so"):
        raise Skip(path or "not built")
    spec = importlib.util.spec_from_file_location("_bench_ceiling_l1", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = getattr(module, f"run_{case.dtype}")
    return lambda: run(case.flops)


IMPLS: dict[str, Callable] = {
    CEILING: make_ceiling, "opsdk": make_opsdk, "opsdk Session.run": make_opsdk_session, "numpy broadcast": make_numpy,
    "scipy cdist": make_scipy, "torch.cdist": make_torch, "tensorflow tf.function": make_tensorflow,
    "tensorflow Session.run": make_tensorflow_session,
}


class Skip(Exception):
    """An implementation that does not apply to a case; the message says why."""


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


def worker(impl: str, case: Case, repeats: int) -> Result:
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
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return Result(impl, statistics.median(times), peak, cpu_s=statistics.median(cpu),
                  min_s=min(times), max_s=max(times))


def measure(impl: str, case: Case, repeats: int) -> Result:
    """Run `worker` in a subprocess; its last stdout line is the JSON result."""
    cmd = [sys.executable, __file__, "--worker", impl, json.dumps(asdict(case)), str(repeats)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Result(impl, skipped=f"failed: {tail}")
    return Result(**json.loads(proc.stdout.strip().splitlines()[-1]))


# -- the table -----------------------------------------------------------------------------------

def print_table(case: Case, results: list[Result]) -> None:
    from rich.console import Console
    from rich.table import Table
    base = next((r.median_s for r in results if r.impl == "opsdk" and r.median_s), None)
    ceiling = next((r.median_s for r in results if r.impl == CEILING and r.median_s), None)
    table = Table(title=case.label, title_justify="left")
    for col in ("implementation", "median", "GF/s", "of ceiling", "time / opsdk", "CPU time",
                "peak extra memory"):
        table.add_column(col, justify="left" if col == "implementation" else "right")
    for r in results:
        if r.median_s is None:
            table.add_row(r.impl, f"[dim]{r.skipped}[/dim]", "", "", "", "", "")
            continue
        table.add_row(r.impl, format_seconds(r.median_s), f"{case.flops / r.median_s / 1e9:.1f}",
                      f"{ceiling / r.median_s:.2f}" if ceiling else "",
                      f"{r.median_s / base:.2f}x" if base else "", format_seconds(r.cpu_s),
                      f"{r.peak_extra_mib:.1f} MiB")
    Console().print(table)


def json_rows(case: Case, results: list[Result]) -> list[dict]:
    """The table's rows for --json: GF/s and the share of the ceiling loop's rate included."""
    ceiling = next((r.median_s for r in results if r.impl == CEILING and r.median_s), None)
    rows = []
    for r in results:
        row = {"case": case.label, **asdict(r)}
        if r.median_s:
            row["gflops"] = case.flops / r.median_s / 1e9
            row["of_ceiling"] = ceiling / r.median_s if ceiling else None
        rows.append(row)
    return rows


def format_seconds(s: float) -> str:
    return f"{s:.3f} s" if s >= 1 else (f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us")


def cases_for(quick: bool) -> list[Case]:
    big = 2048 if quick else 4096
    return [Case("forward", big, big, 256), Case("forward", big, big, 256, "float64"),
            Case("forward", 128, 128, 64), Case("gradient", 1024, 1024, 256),
            Case("gradient", 1024, 1024, 256, "float64")]


def repeats_for(case: Case, quick: bool, impl: str) -> int:
    slow = case.flops > 1e9 and impl not in ("opsdk", CEILING)  # the alternatives take seconds
    if quick:
        return 1 if slow else 5
    return 3 if slow else (7 if case.flops > 1e9 else 200)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n=m=2048 for the large case, few repeats")
    parser.add_argument("--repeats", type=int, help="timed calls per measurement (default: by size)")
    parser.add_argument("--only", nargs="+", choices=sorted(IMPLS), help="run only these")
    parser.add_argument("--portable", action="store_true",
                        help="opsdk rows: a copy of the flagship built with OPSDK_PORTABLE=1")
    parser.add_argument("--flagship-from", type=Path, metavar="OPDEFS",
                        help="opsdk rows: the flagship's files from this folder, built in a copy")
    parser.add_argument("--simd", choices=("baseline", "avx2", "avx512"),
                        help="cap a portable kernel's run-time choice (sets OPSDK_SIMD)")
    parser.add_argument("--json", help="also write every row to this JSON file")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        impl, case, repeats = args.worker
        print(json.dumps(asdict(worker(impl, Case(**json.loads(case)), int(repeats)))))
        return 0
    workspace = use_flagship_copy(args)
    ceiling_dir = Path(tempfile.mkdtemp(prefix="bench_ceiling_"))
    os.environ[CEILING_ENV] = build_ceiling(ceiling_dir)
    print(f"{os.cpu_count()} CPUs; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; "
          f"load average {os.getloadavg()[0]:.1f} (other work on the machine slows every row alike)")
    rows = []
    try:
        for case in cases_for(args.quick):
            results = [measure(impl, case, args.repeats or repeats_for(case, args.quick, impl))
                       for impl in (args.only or IMPLS)]
            print_table(case, results)
            rows += json_rows(case, results)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    finally:
        if workspace is not None:
            shutil.rmtree(workspace, ignore_errors=True)
        shutil.rmtree(ceiling_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
