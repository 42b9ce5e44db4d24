"""Fused elementwise kernels for the GPU without a GPU: the generated CUDA source of a region
(codegen.fused.render_fused_cuda) compiles with NVRTC through the `cuda` fusion compiler
(opsdk.build.fusion_cuda), which caches it by content; and the same source, compiled as host
C++ with CUDA's built-in variables stood in for, computes the language's values for any grid
(the indexing: grid-stride loop, vectors, the tail). Needs NVRTC (the gpu extra) and g++;
skipped with the reason otherwise. The GPU runs are tests/runtime/test_fusion_cuda.py."""

from __future__ import annotations

import ctypes
import re
import subprocess

import numpy as np
import pytest

from opsdk.build import fusion_cuda
from opsdk.build.nvrtc import nvrtc_problem
from opsdk.build.toolchain import find_toolchain
from opsdk.codegen.fused import render_fused_cuda
from opsdk.registry.elementwise import FusedKernel, Var, evaluate, parse_expression, substitute

NVRTC_MISSING = nvrtc_problem()
needs_nvrtc = pytest.mark.skipif(NVRTC_MISSING is not None, reason=NVRTC_MISSING or "")

GELU = "0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))"


def _kernel(text: str, dtype: str, kinds=("array",), names=("x",), steps: int = 1) -> FusedKernel:
    """A kernel of `steps` chained copies of `text` over inputs `names` (kinds: array/scalar);
    each step after the first reads the previous step in place of the first input."""
    expr = substitute(parse_expression(text, frozenset(names)),
                      {n: Var(f"in{i}") for i, n in enumerate(names)})
    chain = [("t0", expr)]
    for k in range(1, steps):
        chain.append((f"t{k}", substitute(expr, {"in0": Var(f"t{k - 1}")})))
    outputs = ("t0", f"t{steps - 1}") if steps > 1 else ("t0",)
    return FusedKernel(dtype, tuple(kinds), tuple(chain), outputs)


def _broadcasting(dtype: str) -> FusedKernel:
    """x * s + max(y, s) - sigmoid(x / s): two full arrays and one single value, two outputs."""
    return _kernel("x * s + max(y, s) - sigmoid(x / s)", dtype, ("array", "array", "scalar"),
                   ("x", "y", "s"), steps=2)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSDK_FUSION_CACHE", str(tmp_path / "fused"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_source_is_one_pointer_per_value_and_the_same_bytes_each_time(dtype):
    kernel = _broadcasting(dtype)
    source = render_fused_cuda(kernel)
    assert source == render_fused_cuda(_broadcasting(dtype))
    head = source.split('extern "C" __global__ void opsdk_fused(', 1)[1].split(")", 1)[0]
    assert [p.split()[-1] for p in head.split(",")] == ["in0", "in1", "in2", "out0", "out1",
                                                        "n", "vectorised"]
    ctype, vector = ("float", "float4") if dtype == "float32" else ("double", "double2")
    assert f"using T = {ctype};" in source and f"using Vec = {vector};" in source
    assert source.count("const T v_in2 = in2[0];") == 1  # the single value, read once
    assert "Do not edit" in source and kernel.key() in source


@needs_nvrtc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("make", [lambda d: _kernel(GELU, d), _broadcasting],
                         ids=["gelu", "broadcast"])
def test_nvrtc_compiles_a_region_for_the_gpu(make, dtype):
    kernel = make(dtype)
    compiler = fusion_cuda.COMPILER
    assert compiler.problem() is None and compiler.cached(kernel, 90) is None
    binary = compiler.compile(kernel, 90)
    assert binary.suffix == ".cubin" and binary.stat().st_size > 1000
    assert b"opsdk_fused" in binary.read_bytes()
    assert compiler.cached(kernel, 90) == binary
    assert compiler.source_path(kernel).read_text() == render_fused_cuda(kernel)


@needs_nvrtc
@pytest.mark.parametrize("dtype, load", [("float32", r"ld\.global\.nc\.v4\.[bf]32"),
                                         ("float64", r"ld\.global\.nc\.v2\.[bf]64")])
def test_contiguous_arrays_move_as_16_byte_vectors(dtype, load):
    from cupy.cuda import nvrtc

    newest = max(nvrtc.getSupportedArchs())
    ptx = fusion_cuda.COMPILER.compile(_kernel(GELU, dtype), newest + 1)  # newer than NVRTC
    assert ptx.suffix == ".ptx"
    assert re.search(load, ptx.read_text(errors="replace"))


@needs_nvrtc
def test_a_second_compile_is_served_by_the_cache(monkeypatch):
    kernel = _kernel(GELU, "float32")
    first = fusion_cuda.COMPILER.compile(kernel, 80)

    def no_compile(*args):
        raise AssertionError("compiled again")
    monkeypatch.setattr(fusion_cuda, "_nvrtc", no_compile)
    assert fusion_cuda.COMPILER.compile(kernel, 80) == first
    with pytest.raises(AssertionError, match="compiled again"):  # another arch: a new binary
        fusion_cuda.COMPILER.compile(kernel, 90)


def test_without_nvrtc_the_compiler_says_why(monkeypatch):
    monkeypatch.setattr(fusion_cuda, "nvrtc_problem", lambda: "NVRTC needs CuPy (fake)")
    assert fusion_cuda.COMPILER.problem() == "NVRTC needs CuPy (fake)"
    with pytest.raises(Exception, match="cannot compile a fused GPU kernel: NVRTC needs CuPy"):
        fusion_cuda.COMPILER.compile(_kernel(GELU, "float32"), 90)


# -- the generated source on the host: CUDA's built-ins stood in for, every thread run in turn
HOST_PRELUDE = """
#include <math.h>
#define __global__
#define __device__
#define __forceinline__ inline
struct Dim3 { unsigned x, y, z; };
static Dim3 blockIdx, threadIdx, blockDim, gridDim;
struct float4 { float x, y, z, w; };
struct double2 { double x, y; };
"""


def host_toolchain_and_pointers(kernel: FusedKernel):
    """The host's C++ toolchain (skips without one) and the kernel's arguments taken from the
    `in`/`out` pointer arrays of a host driver."""
    tc = find_toolchain("cpu")
    if tc is None:
        pytest.skip("no C++ compiler")
    args = [f"static_cast<const T*>(in[{i}])" for i in range(len(kernel.inputs))]
    args += [f"static_cast<T*>(out[{j}])" for j in range(len(kernel.outputs))]
    return tc, args


def _host_kernel(kernel: FusedKernel, folder):
    """The kernel's CUDA source built as a host library with `run(in, out, n, vectorised,
    blocks, threads)`, which runs every (block, thread) of that grid in turn."""
    tc, args = host_toolchain_and_pointers(kernel)
    driver = f"""
extern "C" void run(const void* const* in, void* const* out, long long n, int vectorised,
                    unsigned blocks, unsigned threads) {{
  gridDim.x = blocks; blockDim.x = threads;
  for (unsigned b = 0; b < blocks; ++b)
    for (unsigned t = 0; t < threads; ++t) {{
      blockIdx.x = b; threadIdx.x = t;
      opsdk_fused({", ".join(args)}, n, vectorised);
    }}
}}
"""
    source = folder / "host.cc"
    source.write_text(HOST_PRELUDE + render_fused_cuda(kernel) + driver)
    library = folder / "host.so"
    proc = subprocess.run([*tc.command, "-std=c++17", "-O1", "-fPIC", "-shared", str(source),
                           "-o", str(library)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    run = ctypes.CDLL(str(library)).run
    run.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int,
                    ctypes.c_uint, ctypes.c_uint)
    return run


def _pointers(arrays) -> ctypes.Array:
    return (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_source_computes_the_formula_for_every_grid(dtype, tmp_path):
    """Every element is written once with the formula's value, whatever the grid (fewer threads
    than elements, more, a tail that is no whole vector), vectorised or not."""
    kernel = _broadcasting(dtype)
    run = _host_kernel(kernel, tmp_path)
    rng = np.random.default_rng(0)
    n = 1003  # not a multiple of a vector's lanes
    x, y = rng.normal(size=n).astype(dtype), rng.normal(size=n).astype(dtype)
    s = np.array([1.5], dtype)
    env = {"in0": x, "in1": y, "in2": s}
    t0 = evaluate(kernel.steps[0][1], env, np)
    want = [t0, evaluate(kernel.steps[1][1], {**env, "t0": t0}, np)]
    rtol = 1e-6 if dtype == "float32" else 1e-14
    for blocks, threads, vectorised in ((1, 1, 1), (3, 7, 1), (3, 7, 0), (64, 32, 1), (2, 5, 0)):
        outs = [np.full(n, np.nan, dtype) for _ in want]
        run(_pointers([x, y, s]), _pointers(outs), n, vectorised, blocks, threads)
        for got, expected in zip(outs, want):
            np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol,
                                       err_msg=f"grid {blocks}x{threads}, vectorised {vectorised}")
