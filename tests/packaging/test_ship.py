"""`opsdk build --wheel`: a workspace's ops packed, installed elsewhere, imported without the sources."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile

import pytest

pytestmark = pytest.mark.slow

BODY = """
    const int64_t size = dims.n * dims.p;
    for (int64_t i = 0; i < size; ++i) out.y[i] = static_cast<T>(attrs.scale) * in.x[i];
"""


def _write_body(kernel) -> None:
    text = kernel.read_text()
    start = text.index("    // For example:")
    end = text.index("}", text.index("OPSDK_NOT_IMPLEMENTED"))
    kernel.write_text(text[:start] + BODY + text[end:])


def test_a_packed_workspace_installs_and_imports_without_its_sources(installed_wheel, tmp_path):
    opsdk = installed_wheel.bin / "opsdk"
    ws = installed_wheel.home / "my-ops"
    ws.mkdir()
    assert installed_wheel.run(opsdk, "new", "scaled", cwd=ws).returncode == 0
    _write_body(ws / "opdefs" / "scaled_cpu.cc")
    proc = installed_wheel.run(opsdk, "build", "--wheel", "-o", str(tmp_path / "dist"), cwd=ws)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "portable baseline" in proc.stdout
    wheel, = (tmp_path / "dist").glob("my_ops-0.1.0-*.whl")
    assert "-none-any" not in wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = json.loads(archive.read("my_ops/opsdk_wheel.json"))
    assert info["portable"] and "-march=native" not in info["cpu_flags"]
    assert any(n.startswith("my_ops/build/cpu/scaled/") and n.endswith(".so") for n in names)
    assert not [n for n in names if "/obj/" in n]
    assert "my_ops/opdefs/scaled_cuda.cu" not in names  # the untouched scaffold stub
    assert not [n for n in names if "/build/cuda/" in n]

    shutil.rmtree(ws)  # the sources are gone: only the installed wheel remains
    install = subprocess.run([installed_wheel.python, "-m", "pip", "--version"], capture_output=True)
    pip = ([str(installed_wheel.python), "-m", "pip"] if install.returncode == 0 else
           [__import__("sys").executable, "-m", "pip", "--python", str(installed_wheel.python)])
    proc = subprocess.run([*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for op in ("my_ops.ops.scaled", "my_ops.scaled"):  # as docs/tutorial.md says, and .ops
        call = f"import numpy as np, my_ops; print({op}(np.ones((2, 3), np.float32), scale=2.5).sum())"
        proc = installed_wheel.run(installed_wheel.python, "-W", "error", "-c", call)
        assert proc.returncode == 0 and proc.stdout.strip() == "15.0", proc.stdout + proc.stderr


CUDA_BODY = """
template <typename T>
__global__ void scale_kernel(const T* x, T* y, int64_t size, double scale) {
    for (int64_t i = opsdk::cuda::first(); i < size; i += opsdk::cuda::stride()) {
        y[i] = static_cast<T>(scale) * x[i];
    }
}

template <typename T>
void cuda(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs, cudaStream_t stream) {
    const int64_t size = dims.n * dims.p;
    scale_kernel<<<opsdk::cuda::blocks(size), opsdk::cuda::kThreads, 0, stream>>>(
        in.x.data, out.y.data, size, attrs.scale);
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile the cuda kernel")
def test_a_written_cuda_kernel_ships_compiled_for_every_arch_under_the_yaml_name(installed_wheel,
                                                                                   tmp_path):
    opsdk = installed_wheel.bin / "opsdk"
    ws = installed_wheel.home / "ws"  # `ws` clashes with a public package: opsdk.yaml names it
    ws.mkdir()
    assert installed_wheel.run(opsdk, "new", "scaled", cwd=ws).returncode == 0
    (ws / "opsdk.yaml").write_text("name: scaled_ops\n")
    kernel = ws / "opdefs" / "scaled_cuda.cu"
    text = kernel.read_text()
    start = text.index("// For example:")
    kernel.write_text(text[:start] + CUDA_BODY + text[text.rindex("}  // namespace"):])
    proc = installed_wheel.run(opsdk, "build", "--wheel", "-o", str(tmp_path / "dist"), cwd=ws,
                               timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel, = (tmp_path / "dist").glob("scaled_ops-0.1.0-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        manifest = json.loads(archive.read("scaled_ops/build/cuda/scaled/manifest.json"))
        artefact = archive.read(f"scaled_ops/build/cuda/scaled/{manifest['file']}")
    assert "scaled_ops/opdefs/scaled_cuda.cu" in names
    for arch in ("75", "80", "86", "89", "90"):  # the fat binary: SASS for each default arch
        assert f"sm_{arch}".encode() in artefact, arch
