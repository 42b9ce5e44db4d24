"""The implementations bench_pairwise_manhattan.py compares: each `make_*` takes a Case and its
prepared inputs and returns a zero-argument callable, or raises Skip saying why it does not apply
(not installed, no gradient, too much memory); and the ceiling loop, and the flagship copy that
--portable and --flagship-from build."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parents[1]

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
    return torch_cdist(torch, case.kind, *(torch.from_numpy(a) for a in (x, y, g)))


def torch_cdist(torch, kind: str, tx, ty, tg) -> Callable[[], object]:
    """torch.cdist(p=1) of tensors tx, ty (on any device), or for kind 'gradient' its backward
    against tg through autograd, as a zero-argument call."""
    if kind == "forward":
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


# TensorFlow's broadcast forward at n=m=4096 takes seconds of CPU per call (16 s, float32, on a
# 2-core Zen 4), and a row takes four calls (a warm-up, three timed). By default that case runs it
# once: as a TF1 graph, in float32; --all (this variable) runs the tf.function and float64 rows too.
ALL_ENV = "OPSDK_BENCH_ALL"
LARGE_FLOPS = 1e10


def skip_unless_all(case: Case, slow: bool, why: str) -> None:
    """Skip a row of the large case that repeats another's measurement at great cost, saying so."""
    if slow and case.flops > LARGE_FLOPS and not os.environ.get(ALL_ENV):
        raise Skip(f"{why} at this size, seconds per call: --all runs it")


def make_tensorflow(case: Case, x, y, g):
    """tf.function over the blockwise broadcast (forward) or the hand-vectorised gradient."""
    skip_unless_all(case, True, "the graph of 'tensorflow Session.run' again")
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
    skip_unless_all(case, case.dtype == "float64", "float64")
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
