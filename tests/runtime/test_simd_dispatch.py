"""The flagship's SIMD paths: portable builds choose one at run time, native builds the widest.

A portable build (OPSDK_PORTABLE=1, as wheels are built) compiles the flagship's loops for three
levels and picks the best the CPU runs, capped by OPSDK_SIMD (opsdk/cpu_dispatch.h). Here the
flagship's declarations and kernels are copied into a temporary workspace (renamed `pmp`, so they
do not clash with the builtin op), built portable, and run at every cap, each in a fresh process
(the level is decided once per process), against NumPy.

Which path ran shows in the forward's float32 sums: each vector lane adds its own k's in order and
the lanes are added at the end, so a kernel with L lanes gives, bit for bit, the NumPy emulation
of that order with L lanes, and (on the inputs drawn here) not the emulation with another count.
The gradient's sums run along j within each lane, so every path gives the same bits.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from opsdk.build.driver import build_workspace
from opsdk.registry import BUILTIN_ROOT

pytestmark = pytest.mark.slow

FILES = ("pairwise_manhattan.yaml", "pairwise_manhattan_grad.yaml", "pairwise_manhattan_cpu.cc",
         "pairwise_manhattan_grad_cpu.cc", "pairwise_manhattan_simd.h")
LEVELS = ("baseline", "avx2", "avx512")
# Vector bytes per level; lanes = bytes / itemsize.
LEVEL_BYTES = {"baseline": 16, "avx2": 32, "avx512": 64}
# Forward shapes (n, m, p): partial register tiles; p off every vector width (a scalar tail);
# p beyond one k block of 1024 (sums carried across blocks).
# (197, 70, 300): the forward's packed form with AVX-512 (192 rows or more), columns and k left
# over, and rows after the tiles of 6.
FORWARD_SHAPES = ((9, 7, 261), (5, 6, 3), (3, 4, 1100), (33, 17, 64), (197, 70, 300))
GRAD_SHAPES = ((9, 7, 261), (31, 29, 70))


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def best_level() -> str:
    """What opsdk::simd_level() should find here: /proc/cpuinfo lists what the OS enabled."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return "baseline"
    flags = cpu_flags()
    if {"avx2", "fma"} <= flags:
        return "avx512" if "avx512f" in flags else "avx2"
    return "baseline"


def lane_order_sums(x: np.ndarray, y: np.ndarray, lanes: int) -> np.ndarray:
    """z as a kernel with `lanes` lanes adds it, for p within one k block: lane l sums
    k = l, l + lanes, ... in order; then the lanes are added pairwise, the upper half of them onto
    the lower half until one is left (the forward's shuffle tree); then the k past the last whole
    vector. In x's dtype, every step rounded as the kernel rounds it."""
    p = x.shape[1]
    whole = p // lanes * lanes
    acc = np.zeros((x.shape[0], y.shape[0], lanes), x.dtype)
    for k in range(0, whole, lanes):
        acc += np.abs(x[:, None, k:k + lanes] - y[None, :, k:k + lanes])
    width = lanes
    while width > 1:
        width //= 2
        acc[:, :, :width] += acc[:, :, width:2 * width]
    z = acc[:, :, 0].copy()
    for k in range(whole, p):
        z += np.abs(x[:, None, k] - y[None, :, k])
    return z


@np.errstate(invalid="ignore")  # inf - inf is NaN, as the kernels make it
def reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.abs(x[:, None, :].astype(np.float64) - y[None, :, :]).sum(-1)


@np.errstate(invalid="ignore")
def reference_grad(x, y, g) -> tuple[np.ndarray, np.ndarray]:
    """np.sign's gradient in float64: NaN where x - y is NaN (a NaN input, or inf - inf)."""
    t = g[:, :, None].astype(np.float64) * np.sign(x[:, None, :].astype(np.float64) - y[None, :, :])
    return t.sum(1), -t.sum(0)


def _inputs() -> dict[str, np.ndarray]:
    """Named inputs: f<i>_<dtype>_{x,y} for the forward, g<i>_<dtype>_{x,y,g} for the gradient,
    and nonfinite_{x,y,g} (NaN and infinities: the gradient's exact path, the forward's NaN)."""
    rng = np.random.default_rng(0)
    out = {}
    for dtype in (np.float32, np.float64):
        name = np.dtype(dtype).name
        for i, (n, m, p) in enumerate(FORWARD_SHAPES):
            out[f"f{i}_{name}_x"] = rng.uniform(-2, 2, (n, p)).astype(dtype)
            out[f"f{i}_{name}_y"] = rng.uniform(-2, 2, (m, p)).astype(dtype)
        for i, (n, m, p) in enumerate(GRAD_SHAPES):
            for key, shape in (("x", (n, p)), ("y", (m, p)), ("g", (n, m))):
                out[f"g{i}_{name}_{key}"] = rng.uniform(-2, 2, shape).astype(dtype)
    x, y, g = rng.random((4, 40)), rng.random((5, 40)), rng.random((4, 5))
    x[1, 5] = np.nan
    x[2, 3], y[3, 3], y[0, 39] = np.inf, np.inf, -np.inf
    out.update(nonfinite_x=x, nonfinite_y=y, nonfinite_g=g)
    return out


# Runs in a fresh process (OPSDK_SIMD is read once): every input through the workspace's ops.
CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import opsdk
    ops = opsdk.load_ops(sys.argv[1])
    data = dict(np.load(sys.argv[2]))
    out = {}
    try:
        for key in data:
            if key.endswith("_x"):
                stem = key[:-2]
                x, y = data[stem + "_x"], data[stem + "_y"]
                if stem.startswith("f") or stem == "nonfinite":
                    out[stem + "_z"] = ops.pmp(x, y)
                if stem + "_g" in data:
                    out[stem + "_gx"], out[stem + "_gy"] = ops.pmp_grad(x, y, data[stem + "_g"])
    except ValueError as error:
        print(f"ValueError: {error}")
        sys.exit(3)
    np.savez(sys.argv[3], **out)
""")


@pytest.fixture(scope="module")
def portable(tmp_path_factory) -> Path:
    """The flagship copied as `pmp`, cpu only, built with OPSDK_PORTABLE=1; its inputs saved."""
    root = tmp_path_factory.mktemp("portable")
    (root / "opdefs").mkdir()
    for name in FILES:
        text = (BUILTIN_ROOT / "opdefs" / name).read_text().replace("pairwise_manhattan", "pmp")
        text = re.sub(r"\n  cuda:.*(?:\n {4,}.*)*", "", text)  # the cuda entry and its launch block
        (root / "opdefs" / name.replace("pairwise_manhattan", "pmp")).write_text(text)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPSDK_PORTABLE", "1")
        build_workspace(root, jobs=2, cuda="off", progress=False)
    np.savez(root / "inputs.npz", **_inputs())
    return root


def run_at(root: Path, cap: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OPSDK_SIMD"}
    if cap is not None:
        env["OPSDK_SIMD"] = cap
    tag = cap or "unset"
    return subprocess.run([sys.executable, "-c", CHILD, str(root), str(root / "inputs.npz"),
                           str(root / f"out_{tag}.npz")], env=env, capture_output=True, text=True,
                          timeout=300)


def results_at(root: Path, cap: str | None) -> dict[str, np.ndarray]:
    proc = run_at(root, cap)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dict(np.load(root / f"out_{cap or 'unset'}.npz"))


@pytest.fixture(scope="module")
def outputs(portable):
    """outputs(cap): every output of the portable build run with OPSDK_SIMD=cap, run once."""
    cache: dict[str | None, dict[str, np.ndarray]] = {}

    def at(cap: str | None) -> dict[str, np.ndarray]:
        if cap not in cache:
            cache[cap] = results_at(portable, cap)
        return cache[cap]
    return at


def expected_level(cap: str | None) -> str:
    best = best_level()
    return best if cap is None else min(cap, best, key=LEVELS.index)


def wide_registers_by_function(library: Path) -> dict[str, set[str]]:
    """{demangled function: the vector registers wider than SSE's it uses (ymm, zmm)}."""
    text = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", str(library)],
                          capture_output=True, text=True, check=True).stdout
    found: dict[str, set[str]] = {}
    name = ""
    for line in text.splitlines():
        head = re.match(r"[0-9a-f]+ <(.*)>:$", line)
        if head:
            name = head.group(1)
        for register in ("ymm", "zmm"):
            if f"%{register}" in line:
                found.setdefault(name, set()).add(register)
    return found


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) not on PATH")
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 only")
def test_only_the_dispatched_tiles_use_avx_registers(portable):
    """The portable build is baseline code except the AVX2 and AVX-512 tiles, which exist (the
    forward's packed tiles are AVX-512 only)."""
    for op in ("pmp", "pmp_grad"):
        (library,) = (portable / "build" / "cpu" / op).glob("*.so")
        wide = wide_registers_by_function(library)
        avx2 = {f for f in wide if "::Level<32>::run_tile<" in f}
        avx512 = {f for f in wide if re.search(r"::Level<64>::run_(packed_)?tile<", f)}
        assert avx2 and avx512, sorted(wide)
        assert set(wide) == avx2 | avx512, sorted(set(wide) - avx2 - avx512)
        assert all(wide[f] == {"ymm"} for f in avx2) and all("zmm" in wide[f] for f in avx512)


@pytest.mark.parametrize("cap", [*LEVELS, None])
def test_every_path_matches_numpy(portable, outputs, cap):
    out, data = outputs(cap), dict(np.load(portable / "inputs.npz"))
    for key, z in out.items():
        stem = key.rsplit("_", 1)[0]
        x, y = data[stem + "_x"], data[stem + "_y"]
        rtol = 2e-5 if x.dtype == np.float32 else 1e-12
        atol = 8 * max(*x.shape, y.shape[0]) * np.finfo(x.dtype).eps
        if key.endswith("_z"):
            np.testing.assert_allclose(z, reference(x, y), rtol=rtol, atol=atol, err_msg=key)
        else:
            want = reference_grad(x, y, data[stem + "_g"])[0 if key.endswith("_gx") else 1]
            np.testing.assert_allclose(z, want, rtol=rtol, atol=atol, err_msg=key)
    for key in ("nonfinite_z", "nonfinite_gx", "nonfinite_gy"):  # compared above, NaN and all
        assert np.isnan(out[key]).any() and np.isfinite(out[key]).any(), key
    assert np.isposinf(out["nonfinite_z"]).any()


@pytest.mark.parametrize("cap", [*LEVELS, None])
def test_the_path_taken_is_the_capped_best(portable, outputs, cap):
    """The forward's float32 sums equal the lane-order emulation of the expected level only."""
    level = expected_level(cap)
    data = dict(np.load(portable / "inputs.npz"))
    x, y = data["f0_float32_x"], data["f0_float32_y"]
    emulated = {name: lane_order_sums(x, y, LEVEL_BYTES[name] // 4) for name in LEVELS}
    for a in LEVELS:  # the test tells the paths apart only if their sums differ
        for b in LEVELS[LEVELS.index(a) + 1:]:
            assert not np.array_equal(emulated[a], emulated[b]), (a, b)
    z = outputs(cap)["f0_float32_z"]
    taken = [name for name in LEVELS if np.array_equal(z, emulated[name])]
    assert taken == [level], f"OPSDK_SIMD={cap}: expected the {level} path, the sums say {taken}"


def test_every_path_gives_the_same_gradient_bits(outputs):
    outs = [outputs(cap) for cap in LEVELS]
    for key in (k for k in outs[0] if k.endswith(("_gx", "_gy"))):
        for out in outs[1:]:
            np.testing.assert_array_equal(out[key], outs[0][key], err_msg=key)


def test_a_wheel_of_the_build_names_the_levels_and_the_ops_that_dispatch(portable):
    from opsdk.build.wheel import _dispatch_text, _dispatching_ops

    ops = _dispatching_ops(portable)
    assert ops == ["pmp", "pmp_grad"]
    assert _dispatch_text(("baseline", "avx2", "avx512"), ops) == (
        "SIMD level chosen at run time among baseline, avx2 (AVX2+FMA), avx512 (AVX-512F) by: "
        "pmp, pmp_grad")


def test_an_unknown_opsdk_simd_is_a_clear_error(portable):
    proc = run_at(portable, "sse9")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert re.search(r"pmp: OPSDK_SIMD is 'sse9'; set it to baseline, avx2 or avx512", proc.stdout), \
        proc.stdout


def test_the_native_build_runs_the_widest_vectors_of_this_machine():
    """The checkout's own build (-march=native) compiles one path: the machine's widest."""
    from opsdk import ops

    flags = cpu_flags()
    if not flags:
        pytest.skip("no /proc/cpuinfo to say what this CPU has")
    native_bytes = 64 if "avx512f" in flags else (32 if "avx" in flags else 16)
    data = _inputs()
    x, y = data["f0_float32_x"], data["f0_float32_y"]
    z = ops.pairwise_manhattan(x, y)
    np.testing.assert_array_equal(z, lane_order_sums(x, y, native_bytes // 4))
