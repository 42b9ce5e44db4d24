"""The wheel as a new user meets it: installed (not editable) into a fresh venv, used from
a folder far from the checkout, with the builtin ops, graphs, gradients and every command."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
import zipfile

import pytest

pytestmark = pytest.mark.slow

USER_SCRIPT = textwrap.dedent("""
    import numpy as np, opsdk
    from opsdk import ops
    from opsdk.registry import BUILTIN_ROOT, load_registry

    assert "site-packages" in opsdk.__file__, opsdk.__file__
    names = load_registry().names()
    missing = [n for n in names if not callable(getattr(ops, n, None))]
    assert len(names) > 40 and not missing, missing
    rng = np.random.default_rng(0)
    x = rng.random((7, 5), dtype=np.float32)
    y = rng.random((3, 5), dtype=np.float32)
    want = np.abs(x[:, None, :] - y[None, :, :]).sum(-1)
    np.testing.assert_allclose(ops.pairwise_manhattan(x, y), want, rtol=1e-5)
    g = opsdk.Graph()
    with g.as_default():
        xp = opsdk.placeholder("float32", [None, 5], name="x")
        c = opsdk.Variable(y, name="c")
        loss = ops.reduce_sum(ops.pairwise_manhattan(xp, c) * 2.0)
        grad_c, = opsdk.gradients(loss, [c])
        init = opsdk.global_variables_initializer()
    with opsdk.Session(g) as sess:
        sess.run(init)
        value, gc = sess.run([loss, grad_c], {xp: x})
    np.testing.assert_allclose(value, 2 * want.sum(), rtol=1e-4)
    np.testing.assert_allclose(gc, -2 * np.sign(x[:, None, :] - y[None]).sum(0), atol=1e-4)
    # The compiler of declared CUDA launches is found through the wheel's entry point.
    from opsdk.runtime.devices import cuda_jit
    assert type(cuda_jit.compiler()).__name__ == "NvrtcCompiler", cuda_jit.compiler()
    print("user script ok", BUILTIN_ROOT)
""")

KERNEL_BODY = """
    const int64_t size = dims.n * dims.p;
    for (int64_t i = 0; i < size; ++i) out.y[i] = static_cast<T>(attrs.scale) * in.x[i];
"""


def test_wheel_carries_the_builtin_ops_and_is_tagged_for_this_platform(installed_wheel):
    names = zipfile.ZipFile(installed_wheel.wheel).namelist()
    for needed in ("opsdk/_builtin/opdefs/pairwise_manhattan.yaml",
                   "opsdk/_builtin/opdefs/builtin/math.yaml",
                   "opsdk/_builtin/templates/new/op.yaml.j2",
                   "opsdk/_builtin/generated/python/ops.py",
                   "opsdk/_builtin/generated/python/ops.pyi",
                   "opsdk/_builtin/build/cpu/pairwise_manhattan/manifest.json",
                   "opsdk/_builtin/build/cpu/pairwise_manhattan_grad/manifest.json",
                   "opsdk/include/opsdk/kernel.h", "opsdk/py.typed"):
        assert needed in names
    assert any(n.startswith("opsdk/_builtin/build/cpu/pairwise_manhattan/") and n.endswith(".so")
               for n in names)
    assert not [n for n in names if "/obj/" in n or n.endswith((".o", ".lock"))]
    assert "-none-any" not in installed_wheel.wheel.name  # it holds compiled kernels


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) not on PATH")
def test_wheel_kernels_are_built_for_the_portable_baseline(installed_wheel, tmp_path):
    # -march=native on an AVX-512 machine uses zmm registers; x86-64-v2 never does, except in the
    # flagship's tiles compiled for AVX2 and AVX-512 and chosen at run time (Level<32>, Level<64>).
    with zipfile.ZipFile(installed_wheel.wheel) as wheel:
        kernels = [n for n in wheel.namelist() if n.endswith(".so")]
        wheel.extractall(tmp_path, kernels)
    for kernel in kernels:
        text = subprocess.run(["objdump", "-d", "-C", str(tmp_path / kernel)], capture_output=True,
                              text=True, check=True).stdout
        function, wide = "", set()
        for line in text.splitlines():
            if line.endswith(">:"):
                function = line
            elif "%zmm" in line or "%ymm" in line:
                wide.add(function)
        assert all(re.search(r"::Level<(32|64)>::run_(packed_)?tile<", f) for f in wide), (kernel, wide)


def test_installed_ops_graphs_and_gradients_work_from_any_folder(installed_wheel):
    proc = installed_wheel.run(installed_wheel.python, "-c", USER_SCRIPT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "site-packages/opsdk/_builtin" in proc.stdout


def test_installed_commands_work_in_a_new_workspace(installed_wheel):
    opsdk = installed_wheel.bin / "opsdk"
    ws = installed_wheel.home / "myops"
    ws.mkdir()

    def ok(*args: str) -> str:
        proc = installed_wheel.run(opsdk, *args, cwd=ws)
        assert proc.returncode == 0, f"opsdk {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc.stdout

    assert ok("--version").strip().startswith("opsdk ")
    ok("new", "scaled")
    kernel = ws / "opdefs" / "scaled_cpu.cc"
    text = kernel.read_text()
    start = text.index("    // For example:")
    kernel.write_text(text[:start] + KERNEL_BODY + text[text.index("}", text.index("OPSDK_NOT_IMPLEMENTED")):])
    ok("build", "--cuda=off", "--no-progress")
    assert "scaled" in ok("list")
    doctor = ok("doctor")
    assert "builtin kernels" in doctor and "not built" not in doctor
    ok("gradcheck", "pairwise_manhattan", "--max-examples", "3")
    call = ("import numpy as np, opsdk; ops = opsdk.load_ops('.'); "
            "print(ops.scaled(np.ones((2, 3), np.float32), scale=3.0).sum())")
    proc = installed_wheel.run(installed_wheel.python, "-c", call, cwd=ws)
    assert proc.returncode == 0 and proc.stdout.strip() == "18.0", proc.stdout + proc.stderr
