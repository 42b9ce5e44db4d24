"""The flagship's CUDA kernels run on the CPU (tests/codegen/cuda_emulation.h: a thread per CUDA
thread, a barrier per block) with the grids their YAML declares, against float64 loops of the
definitions: the per-dtype tiles and their remainders, sizes of 0, ties (sign(0) = 0), NaN and
infinities. Where there is no GPU this is what checks the kernels' arithmetic and indexing; a copy
with one tile's rows shifted must fail, so the check can tell. Needs g++ with C++20 (<barrier>).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from opsdk.build.toolchain import find_toolchain
from opsdk.runtime.devices.cuda_jit import launch_shapes

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
REPO = HERE.parents[1]
# (n, m, p, special): one tile and its remainders in every direction (float32 tiles are 128 rows
# of x by 64 of y, float64 ones 64 by 64, gradient tiles 64 rows by 64 columns k), n < m and
# n > m (the gradient's grid follows the longer), empty sizes, and ties with NaN and infinities.
CASES = [(1, 1, 1, 0), (130, 70, 9, 0), (200, 3, 17, 0), (3, 130, 70, 0), (64, 129, 8, 0),
         (5, 0, 3, 0), (0, 5, 3, 0), (5, 5, 0, 0), (37, 45, 19, 1), (150, 20, 33, 1)]


def _checker(tmp_path: Path, source_root: Path) -> Path:
    cxx = find_toolchain("cpu")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path / "flagship_cuda_emulated"
    proc = subprocess.run([cxx.path, "-std=c++20", "-O1", "-pthread", "-Wno-unknown-pragmas",
                           f"-I{source_root}", f"-I{HERE}", f"-I{REPO / 'opsdk' / 'include'}",
                           str(HERE / "flagship_cuda_emulated.cc"), "-o", str(exe)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "barrier" in proc.stderr:
        pytest.skip("the C++ compiler has no <barrier> (C++20)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return exe


def _run(exe: Path, flagship) -> str:
    forward, grad = flagship
    lines = []
    for op, spec in (("fwd", forward), ("grad", grad)):
        (launch,) = spec.kernel("cuda").launches
        for dtype in ("float32", "float64"):
            for n, m, p, special in CASES:
                shape = launch_shapes(spec, launch, {"n": n, "m": m, "p": p})
                grid = shape[0] if shape else (0, 0, 0)  # an empty grid: nothing launched
                lines.append(f"{op} {dtype} {n} {m} {p} {special} {' '.join(map(str, grid))}")
    proc = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert f"checked {len(lines)}" in proc.stdout, proc.stdout
    return proc.stdout


def test_the_flagship_cuda_kernels_compute_the_definitions(flagship, tmp_path):
    out = _run(_checker(tmp_path, REPO), flagship)
    assert "FAIL" not in out, out


def test_a_kernel_with_a_misplaced_tile_fails_the_check(flagship, tmp_path):
    root = tmp_path / "mutant"
    (root / "opdefs").mkdir(parents=True)
    for name in ("pairwise_manhattan_cuda.cu", "pairwise_manhattan_grad_cuda.cu"):
        shutil.copy(REPO / "opdefs" / name, root / "opdefs" / name)
    source = root / "opdefs" / "pairwise_manhattan_cuda.cu"
    text = source.read_text()
    assert text.count(" + blockIdx.z * kSub;") == 1
    source.write_text(text.replace(" + blockIdx.z * kSub;", ";"))  # float64's lower halves
    out = _run(_checker(tmp_path, root), flagship)
    assert "FAIL fwd float64 n=130 m=70 p=9" in out and "FAIL fwd float32" not in out, out
