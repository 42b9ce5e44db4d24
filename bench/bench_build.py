"""Build times of `opsdk build` on a small workspace, next to torch.utils.cpp_extension.load.

    .venv/bin/python bench/bench_build.py [--quick] [--repeats N] [--torch-repeats N] [--no-torch]
                                          [--cuda]

In a temporary workspace made with `opsdk new` (two ops: `scale`, its body written, and `shift`,
whose body includes a header of its own, opdefs/shift_helpers.h), each step runs the whole
`opsdk build --cuda off` CLI process and times it from outside:

  cold          build/ removed first: everything regenerated and compiled
  no-op         nothing changed (target < 1 s, the whole process)
  kernel edit   opdefs/scale_cpu.cc changed: only `scale` should compile
  header edit   opdefs/shift_helpers.h changed: only `shift` should compile

With --cuda (needs nvcc, not a GPU), scale's CUDA kernel is written too, and its edit is timed
in turn both ways: a development build (`opsdk build`: this machine's GPUs, or one PTX target
without one) and the fat binary a wheel ships (`opsdk build --all-archs`).

The ops compiled in each step are read from the build's own per-unit lines, so the table shows
whether an edit rebuilt only what depends on it. For contrast, an equivalent small op (the same
body and the same kind of header) is built with torch.utils.cpp_extension.load, each time in a
fresh process (a same-process reload ignores edits): cold, then after a header edit.
Medians over --repeats runs (default 3 for slow steps, 5 for the no-op; --quick: 1 and 3);
cpp_extension.load runs --torch-repeats times (default 1: about a minute each here). The table
shows the 1-minute load average before each step (median over its runs).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

SCALE_BODY = r"""#include "scale_op.h"

namespace opsdk_op_scale {

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
    const int64_t size = dims.n * dims.p;
    const T factor = static_cast<T>(attrs.scale);  // edit 0
    opsdk::parallel_for(0, size, 1 << 14, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) out.y[i] = factor * in.x[i];
    });
}

}  // namespace opsdk_op_scale
"""

SHIFT_BODY = r"""#include "shift_op.h"
#include "shift_helpers.h"

namespace opsdk_op_shift {

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
    const int64_t size = dims.n * dims.p;
    opsdk::parallel_for(0, size, 1 << 14, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) out.y[i] = shift_helpers::shifted(in.x[i], attrs.scale);
    });
}

}  // namespace opsdk_op_shift
"""

HELPERS = """#pragma once
// A header of the workspace's own, included by shift_cpu.cc only.
namespace shift_helpers {
template <typename T>
inline T shifted(T v, double by) { return v + static_cast<T>(by); }  // edit 0
}  // namespace shift_helpers
"""

# The same op for torch.utils.cpp_extension.load: one source and one header of its own.
TORCH_SOURCE = r"""#include <torch/extension.h>
#include "shift_helpers.h"

torch::Tensor shift(torch::Tensor x, double by) {
    auto y = torch::empty_like(x);
    const float* a = x.data_ptr<float>();
    float* b = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) b[i] = shift_helpers::shifted(a[i], by);
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("shift", &shift); }
"""

TORCH_DRIVER = """import sys, torch
from torch.utils.cpp_extension import load
mod = load(name="bench_shift", sources=[sys.argv[1]], build_directory=sys.argv[2],
           extra_cflags=["-O3"], verbose=False)
print(float(mod.shift(torch.ones(3), 2.0)[0]))
"""

# The build's plain progress line per unit: "[1/2] scale (cpu) compiled in 6.1 s".
_COMPILED_LINE = re.compile(r"^(?:\[\d+/\d+\] )?(\S+) \((\w+)\) compiled in ([\d.]+) s")


@dataclass(frozen=True)
class Step:
    """One timed build: wall seconds of the whole process, and the ops it compiled."""
    seconds: float
    load: float  # the 1-minute load average just before it ran
    compiled: tuple[tuple[str, float], ...]  # (op, seconds its compiler ran) per compiled unit


@dataclass(frozen=True)
class Summary:
    """The median of several runs of one scenario, with what the runs compiled."""
    scenario: str
    tool: str
    runs: tuple[Step, ...]
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(s.seconds for s in self.runs)

    @property
    def compiled(self) -> str:
        """The ops each run compiled, one entry per distinct answer ("scale" when all agree)."""
        seen = (", ".join(op for op, _ in s.compiled) or "nothing" for s in self.runs)
        return " | ".join(dict.fromkeys(seen))

    @property
    def load(self) -> float:
        """Median 1-minute load average before the runs (other work slows a build)."""
        return statistics.median(s.load for s in self.runs)

    @property
    def compile_seconds(self) -> str:
        """Median seconds of one compiler run, over every unit the runs compiled."""
        times = [t for s in self.runs for _, t in s.compiled]
        return f"{statistics.median(times):.1f}" if times else ""


class BenchError(Exception):
    """A build that failed where it must not: the message carries the tool's output."""


def opsdk_command() -> list[str]:
    """The `opsdk` console script of this interpreter's environment, else `python -m opsdk.cli`."""
    script = Path(sys.executable).parent / "opsdk"
    return [str(script)] if script.exists() else [sys.executable, "-m", "opsdk.cli"]


def run_timed(argv: list[str], cwd: Path) -> tuple[float, str]:
    """Run a process to the end; (wall seconds, merged output). Raises BenchError on failure."""
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)} failed in {cwd}:\n{proc.stdout[-2000:]}")
    return seconds, proc.stdout


SCALE_CUDA_BODY = r"""#include "scale_op.h"

namespace opsdk_op_scale {

template <typename T>
__global__ void scale_kernel(const T* x, T* y, int64_t size, double scale) {
    for (int64_t i = opsdk::cuda::first(); i < size; i += opsdk::cuda::stride()) {
        y[i] = static_cast<T>(scale) * x[i];  // edit 0
    }
}

template <typename T>
void cuda(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs,
          cudaStream_t stream) {
    const int64_t size = dims.n * dims.p;
    scale_kernel<<<opsdk::cuda::blocks(size), opsdk::cuda::kThreads, 0, stream>>>(
        in.x.data, out.y.data, size, attrs.scale);
}

}  // namespace opsdk_op_scale
"""


def make_workspace(root: Path) -> None:
    """`opsdk new scale` and `opsdk new shift`, then their bodies and shift's own header."""
    for name in ("scale", "shift"):
        run_timed(opsdk_command() + ["new", name], root)
    (root / "opdefs" / "scale_cpu.cc").write_text(SCALE_BODY)
    (root / "opdefs" / "shift_cpu.cc").write_text(SHIFT_BODY)
    (root / "opdefs" / "shift_helpers.h").write_text(HELPERS)


def opsdk_build(root: Path, *options: str) -> Step:
    """One `opsdk build --cuda off` process (or with `options`); the ops compiled come from its
    per-unit lines."""
    load = os.getloadavg()[0]
    seconds, output = run_timed(opsdk_command() + ["build", *(options or ("--cuda", "off"))], root)
    compiled = tuple(sorted((m.group(1), float(m.group(3))) for line in output.splitlines()
                            if (m := _COMPILED_LINE.match(line.strip()))))
    return Step(seconds, load, compiled)


def bump_edit_marker(path: Path) -> None:
    """Change the `// edit N` comment: new content (a touch alone would not count as an edit)."""
    text = path.read_text()
    found = re.search(r"// edit (\d+)", text)
    if found is None:
        raise BenchError(f"{path} lost its '// edit N' marker")
    path.write_text(text.replace(found.group(0), f"// edit {int(found.group(1)) + 1}"))


def bench_opsdk(root: Path, repeats: int, slow_repeats: int) -> list[Summary]:
    """Cold, no-op, kernel-edit and header-edit builds of the workspace at `root`."""
    cold = []
    for _ in range(slow_repeats):
        shutil.rmtree(root / "build", ignore_errors=True)
        cold.append(opsdk_build(root))
    noop = [opsdk_build(root) for _ in range(repeats)]
    kernel, header = [], []
    for _ in range(slow_repeats):
        bump_edit_marker(root / "opdefs" / "scale_cpu.cc")
        kernel.append(opsdk_build(root))
        bump_edit_marker(root / "opdefs" / "shift_helpers.h")
        header.append(opsdk_build(root))
    return [Summary("cold (empty build/)", "opsdk build", tuple(cold), "target < 15 s"),
            Summary("no-op rebuild", "opsdk build", tuple(noop), "target < 1 s, whole process"),
            Summary("after editing scale_cpu.cc", "opsdk build", tuple(kernel), "expect: scale"),
            Summary("after editing shift_helpers.h", "opsdk build", tuple(header), "expect: shift")]


def bench_cuda_edit(root: Path, repeats: int) -> list[Summary]:
    """An edit of scale_cuda.cu, rebuilt for this machine (development) and for every arch, in
    turn, so both see the same machine load."""
    if shutil.which("nvcc") is None:
        return [Summary("after editing scale_cuda.cu", "opsdk build", (),
                        "skipped: nvcc not found")]
    (root / "opdefs" / "scale_cuda.cu").write_text(SCALE_CUDA_BODY)
    opsdk_build(root, "--cuda", "on")  # the glue, compiled once for both
    dev, fat = [], []
    for _ in range(repeats):
        for runs, options in ((dev, ("--cuda", "on")), (fat, ("--cuda", "on", "--all-archs"))):
            bump_edit_marker(root / "opdefs" / "scale_cuda.cu")
            runs.append(opsdk_build(root, *options))
    return [Summary("after editing scale_cuda.cu", "opsdk build", tuple(dev),
                    "this machine's GPUs, or one PTX target"),
            Summary("after editing scale_cuda.cu", "opsdk build --all-archs", tuple(fat),
                    "every default arch (the fat binary)")]


def check_ops_run(root: Path) -> None:
    """The built ops must compute what their bodies say; otherwise the timings mean nothing."""
    script = ("import numpy as np\nfrom opsdk.runtime.frontend.ops_module import load_ops\n"
              "ops = load_ops('.')\nx = np.ones((2, 3), np.float32)\n"
              "print(float(ops.scale(x, scale=3.0)[0, 0]), float(ops.shift(x, scale=2.0)[0, 0]))\n")
    _, output = run_timed([sys.executable, "-c", script], root)
    if output.split()[-2:] != ["3.0", "3.0"]:
        raise BenchError(f"the built ops give wrong values: {output.strip()}")


def bench_torch(workdir: Path, repeats: int) -> list[Summary]:
    """cpp_extension.load cold (empty build directory), then after a header edit; fresh processes."""
    try:
        import torch.utils.cpp_extension  # noqa: F401  (only to know it is there)
    except ImportError:
        return [Summary("cold / after a header edit", "torch cpp_extension.load", (),
                        "skipped: torch not installed (pip install '.[bench]')")]
    src = workdir / "torch_src"
    src.mkdir()
    (src / "shift.cpp").write_text(TORCH_SOURCE)
    (src / "shift_helpers.h").write_text(HELPERS)
    (workdir / "driver.py").write_text(TORCH_DRIVER)
    cold, header = [], []
    for i in range(repeats):
        out = workdir / f"torch_build_{i}"
        out.mkdir()
        argv = [sys.executable, str(workdir / "driver.py"), str(src / "shift.cpp"), str(out)]
        cold.append(Step(run_timed(argv, workdir)[0], os.getloadavg()[0], ()))
        bump_edit_marker(src / "shift_helpers.h")
        header.append(Step(run_timed(argv, workdir)[0], os.getloadavg()[0], ()))
    return [Summary("cold (empty build directory)", "torch cpp_extension.load", tuple(cold),
                    "fresh process each run"),
            Summary("after editing shift_helpers.h", "torch cpp_extension.load", tuple(header),
                    "fresh process (a same-process reload ignores the edit)")]


def print_summaries(rows: list[Summary]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="building a small op (seconds, whole process, median of runs)",
                  title_justify="left")
    numeric = ("median s", "runs", "one compile s", "load")
    for col in ("tool", "scenario", *numeric[:2], "compiled", *numeric[2:], "note"):
        table.add_column(col, justify="right" if col in numeric else "left")
    for r in rows:
        if not r.runs:
            table.add_row(r.tool, r.scenario, "", "0", "", "", "", f"[dim]{escape(r.note)}[/dim]")
            continue
        # torch's load() does not say what it compiled: its column stays empty.
        compiled = escape(r.compiled) if r.tool.startswith("opsdk") else ""
        table.add_row(r.tool, r.scenario, f"{r.median:.2f}", str(len(r.runs)), compiled,
                      r.compile_seconds, f"{r.load:.1f}", escape(r.note))
    Console(width=max(Console().width, 120)).print(table)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run of each slow step")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each slow step")
    parser.add_argument("--torch-repeats", type=int, default=1,
                        help="runs of each cpp_extension.load step (about a minute each)")
    parser.add_argument("--no-torch", action="store_true", help="skip cpp_extension.load")
    parser.add_argument("--cuda", action="store_true",
                        help="also time an edit of a CUDA kernel (needs nvcc, not a GPU)")
    args = parser.parse_args(argv)
    slow = 1 if args.quick else max(args.repeats, 1)
    fast = 3 if args.quick else max(args.repeats, 5)
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} at the start")
    with tempfile.TemporaryDirectory(prefix="opsdk-bench-build-") as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        try:
            make_workspace(root)
            rows = bench_opsdk(root, fast, slow)
            check_ops_run(root)
            if args.cuda:
                rows += bench_cuda_edit(root, slow)
            if not args.no_torch:
                rows += bench_torch(Path(tmp), max(args.torch_repeats, 1))
        except BenchError as exc:
            print(f"bench_build: {exc}", file=sys.stderr)
            return 1
    print_summaries(rows)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
