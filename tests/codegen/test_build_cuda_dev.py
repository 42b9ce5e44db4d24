"""CUDA for authors: a development build compiles for the GPUs present (one PTX target where
there is none), and only the kernel's own translation unit; --all-archs builds the fat binary;
an untouched scaffold stub costs nothing.

The compilers here are scripts that log their arguments and write pretend objects (the build
never loads what it links), so these tests need neither nvcc nor g++ and take a second.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from opsdk.build import toolchain
from opsdk.build.driver import build_workspace
from opsdk.cli.main import main
from opsdk.codegen.scaffold import untouched_stub

OP = "dv_scale"
FAKE = """\
#!/bin/sh
case "$1" in
  --version) echo "fake 1.0"; exit 0;;
  --list-gpu-arch) printf 'compute_75\\ncompute_80\\ncompute_86\\ncompute_89\\ncompute_90\\n'; exit 0;;
esac
echo "$(basename "$0") $*" >> "$DV_LOG"
out=""; dep=""
while [ $# -gt 0 ]; do
  case "$1" in -o) out="$2"; shift;; -MF) dep="$2"; shift;; esac
  shift
done
[ -n "$dep" ] && printf 'x.o: \\n' > "$dep"
printf built > "$out"
"""


@pytest.fixture
def ws(tmp_path, monkeypatch) -> Path:
    log = tmp_path / "calls.log"
    for name, env in (("fake-g++", "OPSDK_CXX"), ("fake-nvcc", "OPSDK_NVCC")):
        script = tmp_path / name
        script.write_text(FAKE)
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv(env, str(script))
    monkeypatch.setenv("DV_LOG", str(log))
    monkeypatch.delenv("OPSDK_CUDA_ARCHS", raising=False)
    monkeypatch.setattr(toolchain, "present_gpu_archs", lambda: ())  # no GPU
    root = tmp_path / "ws"
    assert main(["-C", str(root), "new", OP]) == 0
    return root


def calls(root: Path) -> list[str]:
    log = root.parent / "calls.log"
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def nvcc_calls(root: Path) -> list[str]:
    return [c for c in calls(root) if c.startswith("fake-nvcc")]


def test_an_untouched_cuda_stub_is_not_compiled_and_an_edited_one_is(ws):
    kernel = ws / "opdefs" / f"{OP}_cuda.cu"
    assert untouched_stub(ws, f"opdefs/{OP}_cuda.cu")
    report = build_workspace(ws, progress=False)
    assert [(r.op, r.device) for r in report.compiled] == [(OP, "cpu")]
    assert (f"op '{OP}': opdefs/{OP}_cuda.cu is the untouched scaffold stub; not compiled (write "
            "the kernel, then build)") in report.notes
    assert nvcc_calls(ws) == []
    kernel.write_text(kernel.read_text() + "// written\n")
    assert not untouched_stub(ws, f"opdefs/{OP}_cuda.cu")
    report = build_workspace(ws, progress=False)
    assert [(r.op, r.device) for r in report.compiled] == [(OP, "cuda")]
    assert len(nvcc_calls(ws)) == 3  # kernel, glue, link


def test_a_dev_build_compiles_one_ptx_target_without_a_gpu_and_recompiles_only_the_kernel(ws):
    kernel = ws / "opdefs" / f"{OP}_cuda.cu"
    kernel.write_text(kernel.read_text() + "// written\n")
    report = build_workspace(ws, progress=False)
    assert ("cuda kernels compiled for PTX compute_75 (no GPU here: one PTX target checks the "
            "code; `opsdk build --all-archs` or --wheel builds every arch)") in report.notes
    compiled = {_role(c): c for c in nvcc_calls(ws)}
    assert compiled["kernel"].count("-gencode") == 1
    assert "arch=compute_75,code=compute_75" in compiled["kernel"]
    assert "-gencode" not in compiled["glue"] and "pybind11" not in compiled["kernel"]
    kernel.write_text(kernel.read_text() + "// an edit\n")
    build_workspace(ws, progress=False)
    assert sorted(_role(c) for c in nvcc_calls(ws)) == ["kernel", "link"]  # the glue is reused


def test_a_dev_build_targets_the_gpus_present_and_all_archs_the_fat_binary(ws, monkeypatch):
    kernel = ws / "opdefs" / f"{OP}_cuda.cu"
    kernel.write_text(kernel.read_text() + "// written\n")
    monkeypatch.setattr(toolchain, "present_gpu_archs", lambda: ("86",))
    build_workspace(ws, progress=False)
    compiled = {_role(c): c for c in nvcc_calls(ws)}
    assert compiled["kernel"].count("-gencode") == 1 and "code=sm_86" in compiled["kernel"]
    monkeypatch.setattr(toolchain, "present_gpu_archs", lambda: ("120",))  # newer than nvcc
    assert toolchain.dev_targets(("75", "80", "86", "89", "90")).describe() == "PTX compute_90"
    report = build_workspace(ws, progress=False, all_archs=True)
    compiled = {_role(c): c for c in nvcc_calls(ws)}
    assert compiled["kernel"].count("-gencode") == 6  # 75 80 86 89 90 + PTX 90
    assert "glue" not in compiled  # the glue has no arch: a new arch list does not recompile it
    assert ("cuda kernels compiled for sm_75, sm_80, sm_86, sm_89, sm_90, PTX compute_90 (every "
            "default arch)") in report.notes


def test_the_scaffolded_test_of_a_cuda_only_op_skips_with_the_reason(ws, monkeypatch):
    import subprocess
    import sys

    yaml = ws / "opdefs" / f"{OP}.yaml"
    yaml.write_text(yaml.read_text().replace(f"  cpu: {OP}_cpu.cc\n", ""))
    (ws / "opdefs" / f"{OP}_cpu.cc").unlink()
    blocker = ws.parent / "nocupy"  # the test must skip whatever GPU this machine has
    (blocker / "cupy").mkdir(parents=True)
    (blocker / "cupy" / "__init__.py").write_text("raise ImportError('no CuPy here')\n")
    env = {**__import__("os").environ, "PYTHONPATH": str(blocker)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           f"tests/test_{OP}.py"], cwd=ws, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{OP} has only a cuda kernel, and /device:GPU:0 needs CuPy" in proc.stdout, proc.stdout
    assert "2 skipped" in proc.stdout


def _role(call: str) -> str:
    if " -c " not in f" {call} ":
        return "link"
    return "kernel" if "_cuda_kernel.cu" in call else "glue"
