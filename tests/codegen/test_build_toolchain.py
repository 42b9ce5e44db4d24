"""Compilers behind a launcher (OPSDK_CXX="ccache g++") and the CUDA archs (OPSDK_CUDA_ARCHS).

The launcher is a tiny script that logs its arguments and runs the rest of them, so the tests need
no ccache; they check that every compile and link goes through it, that the key is the real
compiler's (switching the launcher on or off rebuilds nothing), and the messages when it is wrong.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from opsdk.build.compiler import build_key, object_flags
from opsdk.build.driver import build_workspace
from opsdk.build.toolchain import (DEFAULT_CUDA_ARCHS, CudaTargets, compiler_command,
                                   cuda_targets, find_toolchain)
from opsdk.registry import OpsdkError, load_registry
from opsdk.runtime.kernels.loader import load_kernel

NVCC13 = ("75", "80", "86", "87", "88", "89", "90", "100", "110", "103", "120", "121")


@pytest.mark.parametrize("value, launcher, compiler, options", [
    ("", (), "g++", ()),
    ("g++-12", (), "g++-12", ()),
    ("ccache g++", ("ccache",), "g++", ()),
    ("distcc -j4 g++", ("distcc", "-j4"), "g++", ()),
    ("'/opt/my gcc/g++' -fdiagnostics-color=never", (), "/opt/my gcc/g++",
     ("-fdiagnostics-color=never",)),
])
def test_the_compiler_command_splits_like_a_shell(monkeypatch, value, launcher, compiler,
                                                  options):
    monkeypatch.setenv("OPSDK_CXX", value)
    got = compiler_command("cpu")
    assert (got.launcher, got.compiler, got.options) == (launcher, compiler, options)


@pytest.mark.parametrize("value, message", [
    ("ccache 'g++", r"OPSDK_CXX=\"ccache 'g\+\+\": cannot split it like a shell"),
    ("-O2", r"OPSDK_CXX='-O2': give a compiler, optionally behind a launcher"),
])
def test_a_compiler_command_that_cannot_be_split_is_a_clear_error(monkeypatch, value, message):
    monkeypatch.setenv("OPSDK_CXX", value)
    with pytest.raises(OpsdkError, match=message):
        compiler_command("cpu")


def _fake_launcher(folder: Path) -> tuple[Path, Path]:
    """A launcher script that appends its arguments to a log, then runs them."""
    log = folder / "launcher.log"
    script = folder / "fake-ccache"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, log


def test_the_key_is_the_real_compilers_and_leaves_the_launcher_out(tmp_path, monkeypatch):
    script, log = _fake_launcher(tmp_path)
    plain = find_toolchain("cpu")
    monkeypatch.setenv("OPSDK_CXX", f"{script} g++")
    launched = find_toolchain("cpu")
    assert launched.launcher == (str(script),) and launched.path == plain.path
    assert launched.version == plain.version and launched.command == (str(script), plain.path)
    assert launched.describe() == "fake-ccache g++"
    assert build_key({"a": "1"}, ["-O3"], launched, "env") == build_key({"a": "1"}, ["-O3"], plain,
                                                                      "env")
    monkeypatch.setenv("OPSDK_CXX", f"{script} g++ -fno-common")  # options change the bytes
    assert build_key({"a": "1"}, ["-O3"], find_toolchain("cpu"), "env") != build_key(
        {"a": "1"}, ["-O3"], plain, "env")


def test_a_missing_launcher_is_named(tmp_path, monkeypatch):
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs/tl_copy.yaml").write_text(YAML)
    (tmp_path / "opdefs/tl_copy_cpu.cc").write_text(KERNEL)
    monkeypatch.setenv("OPSDK_CXX", "no-such-ccache g++")
    with pytest.raises(OpsdkError, match=r"cannot build cpu kernels: no-such-ccache not found on "
                                         r"PATH \(OPSDK_CXX='no-such-ccache g\+\+'\); install"):
        build_workspace(tmp_path, cuda="off", progress=False)


YAML = """\
op: tl_copy
summary: y = x.
inputs:
  x: {dtype: float64, shape: [n]}
outputs:
  y: {dtype: float64, shape: [n]}
kernels:
  cpu: tl_copy_cpu.cc
reference: "x"
"""
KERNEL = """\
#include "tl_copy_op.h"

namespace opsdk_op_tl_copy {
void cpu(const Inputs& in, Outputs& out, const Dims& dims, const Attrs&) {
    for (int64_t i = 0; i < dims.n; ++i) out.y[i] = in.x[i];
}
}  // namespace opsdk_op_tl_copy
"""


@pytest.mark.slow
def test_a_build_runs_every_compile_and_link_through_the_launcher(tmp_path, monkeypatch):
    script, log = _fake_launcher(tmp_path)
    root = tmp_path / "ws"
    (root / "opdefs").mkdir(parents=True)
    (root / "opdefs/tl_copy.yaml").write_text(YAML)
    (root / "opdefs/tl_copy_cpu.cc").write_text(KERNEL)
    monkeypatch.setenv("OPSDK_CXX", f"{script} g++")
    report = build_workspace(root, cuda="off", progress=False)
    assert [r.op for r in report.compiled] == ["tl_copy"]
    calls = log.read_text().splitlines()
    assert len(calls) == 3, calls  # kernel, glue, link
    assert all(call.split()[0] == shutil.which("g++") for call in calls)
    assert sum(" -c " in call for call in calls) == 2
    fn = load_kernel(load_registry(root).get("tl_copy"), "cpu")
    assert list(fn(__import__("numpy").arange(3.0))) == [0.0, 1.0, 2.0]
    monkeypatch.delenv("OPSDK_CXX")  # the launcher is not part of the key: nothing to redo
    assert [r.op for r in build_workspace(root, cuda="off", progress=False).up_to_date] == [
        "tl_copy"]


# ------------------------------------------------------------------------------- CUDA archs
def test_default_archs_are_those_nvcc_supports_plus_ptx_of_the_newest(monkeypatch):
    monkeypatch.delenv("OPSDK_CUDA_ARCHS", raising=False)
    assert DEFAULT_CUDA_ARCHS == (70, 75, 80, 86, 89, 90)
    # CUDA 13's nvcc no longer lists sm_70 (Volta): it is dropped, and said to be.
    assert cuda_targets(NVCC13) == CudaTargets(("75", "80", "86", "89", "90"), ("90",), ("70",))
    assert cuda_targets(None).archs == ("70", "75", "80", "86", "89", "90")  # nvcc cannot say


@pytest.mark.parametrize("value, archs, ptx", [
    ("80", ("80",), ()),
    ("75,80,90+PTX", ("75", "80", "90"), ("90",)),
    ("sm_86 sm_90a", ("86", "90a"), ()),
    ("compute_89+ptx;80", ("89", "80"), ("89",)),
])
def test_opsdk_cuda_archs_overrides(monkeypatch, value, archs, ptx):
    monkeypatch.setenv("OPSDK_CUDA_ARCHS", value)
    supported = NVCC13 + ("90a",)
    assert cuda_targets(supported) == CudaTargets(archs, ptx)


@pytest.mark.parametrize("value, message", [
    ("ampere", r"OPSDK_CUDA_ARCHS='ampere': 'ampere' is not a CUDA arch; write archs as numbers"),
    ("70,80", r"OPSDK_CUDA_ARCHS='70,80': this nvcc does not support sm_70 \(it supports 75, "),
    (",", r"OPSDK_CUDA_ARCHS is set but names no arch"),
])
def test_bad_opsdk_cuda_archs_are_refused(monkeypatch, value, message):
    monkeypatch.setenv("OPSDK_CUDA_ARCHS", value)
    with pytest.raises(OpsdkError, match=message):
        cuda_targets(NVCC13)


def test_every_arch_goes_to_one_nvcc_call(tmp_path):
    """The kernel unit is compiled for every arch in one call; the host-only glue for none."""
    targets = CudaTargets(("75", "90"), ("90",))
    flags = object_flags("cuda", "kernel", tmp_path, "some_op", targets)
    assert [flags[i + 1] for i, f in enumerate(flags) if f == "-gencode"] == [
        "arch=compute_75,code=sm_75", "arch=compute_90,code=sm_90",
        "arch=compute_90,code=compute_90"]
    assert "-gencode" not in object_flags("cuda", "glue", tmp_path, "some_op", targets)
    assert "-c" in flags  # an object, linked by the unit like the cpu ones
