"""CUDA kernels are compiled wherever nvcc is, GPU or not (as in CI), cached, errors located.

Needs nvcc (not a GPU); skipped with a reason on machines without it. Compiling one CUDA unit
for every default arch costs about 30 s of CPU, so the tests share one built workspace.
"""

from __future__ import annotations

import re
import shutil

import pytest

from opsdk.build import driver
from opsdk.build.diagnostics import BuildError
from opsdk.build.driver import build_workspace
from opsdk.build.toolchain import cuda_targets, find_toolchain, supported_cuda_archs
from opsdk.build.unit import Digests, plan_unit
from opsdk.cli.main import main
from opsdk.registry.manifest import read_manifest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("nvcc") is None,
                                 reason="needs nvcc (the CUDA toolkit) to compile CUDA kernels")]

OP = "cu_scaled"
BROKEN = "cu_broken"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A workspace whose op has a CUDA kernel (edited: an untouched stub is not compiled), built
    for every arch (--all-archs; no GPU asked for)."""
    root = tmp_path_factory.mktemp("cuda_ws")
    assert main(["-C", str(root), "new", OP]) == 0
    with open(root / f"opdefs/{OP}_cuda.cu", "a") as kernel:
        kernel.write("// edited\n")
    report = build_workspace(root, jobs=2, progress=False, all_archs=True)  # --cuda auto
    return root, report


def test_cuda_is_compiled_without_a_gpu_for_every_default_arch(ws, monkeypatch):
    root, report = ws
    assert sorted((r.op, r.device) for r in report.compiled) == [(OP, "cpu"), (OP, "cuda")]
    manifest = read_manifest(root / f"build/cuda/{OP}", OP, "cuda")
    assert (root / f"build/cuda/{OP}" / manifest.file).stat().st_size > 0
    # The flags, part of the key, carry each arch this nvcc supports, and PTX of the newest.
    targets = cuda_targets(supported_cuda_archs(shutil.which("nvcc")))
    unit = _units(root)[(OP, "cuda")]
    flags = {s.role: " ".join(s.flags) for s in unit.sources}
    for arch in targets.archs:
        assert f"arch=compute_{arch},code=sm_{arch}" in flags["kernel"]
    assert f"arch=compute_{targets.ptx[-1]},code=compute_{targets.ptx[-1]}" in flags["kernel"]
    assert "-gencode" not in flags["glue"] and "pybind11" not in flags["kernel"]
    assert set(targets.archs) >= {"75", "80", "86", "89", "90"}


def test_cuda_is_cached_like_cpu_and_a_new_arch_list_recompiles(ws, monkeypatch):
    root, _ = ws
    again = build_workspace(root, progress=False, all_archs=True)
    assert sorted((r.op, r.device) for r in again.up_to_date) == [(OP, "cpu"), (OP, "cuda")]
    monkeypatch.setenv("OPSDK_CUDA_ARCHS", "80")
    units = _units(root)
    digests, environment = Digests(root), driver.environment_fingerprint()
    assert plan_unit(units[(OP, "cuda")], environment, digests)[0] is not None  # stale
    assert plan_unit(units[(OP, "cpu")], environment, digests)[0] is None  # untouched


def test_cuda_off_skips_cuda(ws):
    root, _ = ws
    report = build_workspace(root, cuda="off", progress=False)
    assert [(r.op, r.device) for r in report.results] == [(OP, "cpu")]


def test_a_cuda_compile_error_names_the_authors_line_and_the_op(ws, monkeypatch):
    root, _ = ws
    assert main(["-C", str(root), "new", BROKEN]) == 0
    kernel = root / f"opdefs/{BROKEN}_cuda.cu"
    text = kernel.read_text()
    line = text[:text.index("OPSDK_NOT_IMPLEMENTED();")].count("\n") + 1
    kernel.write_text(text.replace("OPSDK_NOT_IMPLEMENTED();",
                                   "undeclared_in_cuda += 1;\n    OPSDK_NOT_IMPLEMENTED();"))
    with pytest.raises(BuildError) as err:
        build_workspace(root, ops=[BROKEN], progress=False)
    message = str(err.value)
    assert re.search(rf"^opdefs/{BROKEN}_cuda\.cu:{line}: error: identifier "
                     rf"\"undeclared_in_cuda\" is undefined \[op '{BROKEN}', cuda\]$",
                     message, re.M), message
    assert f"build/cuda/{BROKEN}/last_error.log" in message
    assert len(message.splitlines()) <= 4, message
    # The cpu kernel of the same op built; only its cuda unit failed.
    assert [(r.op, r.device) for r in err.value.report.failed] == [(BROKEN, "cuda")]


def _units(root):
    """The units a build would make now, by (op, device)."""
    found = driver._regenerate(root)[0]
    units, _ = driver._make_units(root, list(found), "auto", all_archs=True)
    assert find_toolchain("cuda") is not None
    return {(u.op, u.device): u for u in units}


LAUNCH_YAML = """op: cu_launch
summary: y = 2 x, launched from the declaration.
type_attrs:
  T: [float32]
inputs:
  x: {dtype: T, shape: [n]}
outputs:
  y: {dtype: T, shape: [n]}
kernels:
  cuda:
    source: cu_launch_cuda.cu
    launch:
      - kernel: twice<T>
        grid: ["(n + 255) // 256"]
        block: [256]
        args: [x, y, n]
"""
LAUNCH_SOURCE = """#include "opsdk/device.h"
namespace opsdk_op_cu_launch {
template <typename T>
__global__ void twice(const T* x, T* y, int n) {  // n is passed as int64_t
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2 * x[i];
}
}  // namespace opsdk_op_cu_launch
"""


def test_a_launched_kernel_whose_parameters_differ_fails_the_build_at_the_launchs_line(
        tmp_path, monkeypatch):
    monkeypatch.setenv("OPSDK_CUDA_ARCHS", "75")  # one arch: the check is the same for each
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs/cu_launch.yaml").write_text(LAUNCH_YAML)
    (tmp_path / "opdefs/cu_launch_cuda.cu").write_text(LAUNCH_SOURCE)
    with pytest.raises(BuildError) as err:
        build_workspace(tmp_path, progress=False)
    assert re.search(r"^opdefs/cu_launch\.yaml:13: error: static assertion failed with \"op "
                     r"'cu_launch': launch 1 passes \(const T\*, T\*, int64_t\) to twice<T>; "
                     r"declare its parameters with exactly these types, in the order of args\" "
                     r"\[op 'cu_launch', cuda\]$", str(err.value), re.M), str(err.value)
