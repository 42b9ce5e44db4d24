"""Fused GPU kernels of regions ending in a reduction, without a GPU: the generated rows kernels
(codegen.fused.render_fused_cuda, templates/fused/fused_cuda.cu.j2) compile with NVRTC, and the
same source, built for the host with a block's threads run as concurrent threads (warp shuffles
and __syncthreads stood in for), sums every row for each launch the runtime chooses
(kernels/fused_cuda.py:rows_launch), called through the runtime's own launcher. Needs NVRTC (the
gpu extra) and g++; skipped with the reason otherwise. The GPU runs are
tests/runtime/test_fusion_cuda_reductions.py."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from opsdk.build import fusion_cuda
from opsdk.codegen.fused import render_fused_cuda
from opsdk.registry.elementwise import FusedKernel, Var, parse_expression, substitute
# _own_cache (autouse): each test's own kernel cache
from test_fused_cuda import (_own_cache, _pointers, host_toolchain_and_pointers,  # noqa: F401
                             needs_nvrtc)


def _mean_square(dtype: str, kind: str) -> FusedKernel:
    """d = x - y (written out) and the sum or mean of d * d per row (never written)."""
    d = substitute(parse_expression("x - y", frozenset({"x", "y"})), {"x": Var("in0"),
                                                                     "y": Var("in1")})
    square = substitute(parse_expression("d * d", frozenset({"d"})), {"d": Var("t0")})
    return FusedKernel(dtype, ("array", "array"), (("t0", d), ("t1", square)), ("t0", "t2"),
                       (kind, "t1"))


def _scaled_sum(dtype: str, kind: str) -> FusedKernel:
    """tanh(x) * s summed per row: one full array and one single value, only the reduction out."""
    expr = substitute(parse_expression("tanh(x) * s", frozenset({"x", "s"})),
                      {"x": Var("in0"), "s": Var("in1")})
    return FusedKernel(dtype, ("array", "scalar"), (("t0", expr),), ("t1",), (kind, "t0"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["sum", "mean"])
def test_a_region_ending_in_a_reduction_renders_two_row_kernels(dtype, kind):
    source = render_fused_cuda(_mean_square(dtype, kind))
    assert source == render_fused_cuda(_mean_square(dtype, kind))
    head = source.split('extern "C" __global__ void opsdk_fused_rows(', 1)[1].split(")", 1)[0]
    assert [p.split()[-1] for p in head.split(",")] == [
        "in0", "in1", "out0", "out1", "rows", "inner", "chunk", "parts", "group", "partial"]
    assert 'extern "C" __global__ void opsdk_fused_rows_finish(' in source
    assert "void opsdk_fused(" not in source
    assert "out0[i] = v_t0;" in source and "out1[i]" not in source  # the sum is never an array
    assert "acc += static_cast<double>(v_t1);" in source
    assert ("1.0 / static_cast<double>(inner)" in source) == (kind == "mean")


@needs_nvrtc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("make", [_mean_square, _scaled_sum], ids=["mean_square", "scaled"])
@pytest.mark.parametrize("kind", ["sum", "mean"])
def test_nvrtc_compiles_a_region_ending_in_a_reduction(make, kind, dtype):
    kernel = make(dtype, kind)
    binary = fusion_cuda.COMPILER.compile(kernel, 90)
    assert binary.suffix == ".cubin" and fusion_cuda.COMPILER.cached(kernel, 90) == binary
    data = binary.read_bytes()
    assert b"opsdk_fused_rows" in data and b"opsdk_fused_rows_finish" in data


# The generated source on the host again, but a block's threads now talk (warp shuffles, shared
# memory, __syncthreads): each block's threads run as concurrent std::threads, a warp's shuffle
# and the block's barrier are barriers of 32 threads and of the block. A barrier waits at most
# 20 s, then every barrier opens and the run reports a hang (a kernel whose threads do not all
# reach a barrier) rather than stopping the test process.
ROWS_PRELUDE = """
#include <math.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
struct Dim3 { unsigned x, y, z; };
static thread_local Dim3 blockIdx, threadIdx;
static Dim3 blockDim, gridDim;
struct float4 { float x, y, z, w; };
struct double2 { double x, y; };
static std::atomic<bool> hung{false};
struct Barrier {
  std::mutex m; std::condition_variable cv; unsigned count = 0, arrived = 0, generation = 0;
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    const unsigned gen = generation;
    if (++arrived == count) { arrived = 0; ++generation; cv.notify_all(); return; }
    if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return gen != generation || hung; }))
      hung = true;
  }
};
static Barrier block_barrier;
static Barrier warp_barrier[32];
static double exchange[1024];
inline void __syncthreads() { block_barrier.wait(); }
inline double __shfl_xor_sync(unsigned, double v, int d) {
  const unsigned t = threadIdx.x;
  exchange[t] = v;
  warp_barrier[t / 32].wait();
  const double other = exchange[t ^ d];
  warp_barrier[t / 32].wait();
  return other;
}
template <typename F> static int grid(unsigned blocks, unsigned threads, F kernel) {
  gridDim.x = blocks; blockDim.x = threads; hung = false;
  block_barrier.count = threads;
  for (auto& b : warp_barrier) b.count = 32;
  for (unsigned b = 0; b < blocks && !hung; ++b) {
    std::vector<std::thread> team;
    for (unsigned t = 0; t < threads; ++t)
      team.emplace_back([=] { blockIdx.x = b; threadIdx.x = t; kernel(); });
    for (auto& th : team) th.join();
  }
  return hung ? 1 : 0;
}
"""


def _host_rows_kernel(kernel: FusedKernel, folder):
    """The rows kernels of `kernel` built as a host library: `rows(in, out, rows, inner, chunk,
    parts, group, partial, blocks, threads)` and `finish(partial, out, rows, inner, parts,
    blocks, threads)`, each returning 1 when the threads hung."""
    tc, args = host_toolchain_and_pointers(kernel)
    driver = f"""
extern "C" int rows(const void* const* in, void* const* out, long long rows, long long inner,
                    long long chunk, int parts, int group, double* partial, unsigned blocks,
                    unsigned threads) {{
  return grid(blocks, threads, [=] {{
    opsdk_fused_rows({", ".join(args)}, rows, inner, chunk, parts, group, partial); }});
}}
extern "C" int finish(const double* partial, void* out, long long rows, long long inner,
                      int parts, unsigned blocks, unsigned threads) {{
  return grid(blocks, threads, [=] {{
    opsdk_fused_rows_finish(partial, static_cast<T*>(out), rows, inner, parts); }});
}}
"""
    source = folder / "rows.cc"
    source.write_text(ROWS_PRELUDE + render_fused_cuda(kernel) + driver)
    library = folder / "rows.so"
    proc = subprocess.run([*tc.command, "-std=c++17", "-O1", "-fPIC", "-shared", "-pthread",
                           str(source), "-o", str(library)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    lib = ctypes.CDLL(str(library))
    lib.rows.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong,
                         ctypes.c_longlong, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                         ctypes.c_uint, ctypes.c_uint)
    lib.finish.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                           ctypes.c_longlong, ctypes.c_int, ctypes.c_uint, ctypes.c_uint)
    return lib


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["sum", "mean"])
def test_the_rows_kernels_sum_every_row_for_the_launches_chosen(dtype, kind, tmp_path):
    """Each row's sum (or mean) and the elementwise output, for the launch the runtime chooses
    (kernels/fused_cuda.py, rows_launch) on GPUs of 1 and 3 SMs, run with blocks of 64 threads
    (two warps: the block sum's shared memory is used; fewer threads keep the host run short):
    short rows by warps, long rows by blocks, and rows split across blocks then finished."""
    from opsdk.runtime.kernels.fused_cuda import rows_launch

    kernel = _mean_square(dtype, kind)
    lib = _host_rows_kernel(kernel, tmp_path)
    rng = np.random.default_rng(3)
    threads = 64
    seen = set()
    for rows, inner, sms in ((5, 7, 1), (3, 1, 3), (2, 0, 1), (1, 1000, 1), (40, 1025, 1),
                             (3, 5000, 1), (1, 100_003, 3), (2, 9000, 1)):
        launch = rows_launch(rows, inner, sms, threads)
        seen.add((launch.group == 32, launch.parts > 1))
        x, y = (rng.normal(size=(rows, inner)).astype(dtype) for _ in range(2))
        d = np.full_like(x, np.nan)
        got = np.full(rows, np.nan, dtype)
        partial = np.full(max(1, rows * launch.parts), np.nan)
        case = f"{rows} rows of {inner}, {launch}"
        assert lib.rows(_pointers([x, y]), _pointers([d, got]), rows, inner, launch.chunk,
                        launch.parts, launch.group, partial.ctypes.data, launch.blocks,
                        threads) == 0, f"hung: {case}"
        if launch.parts > 1:
            assert lib.finish(partial.ctypes.data, got.ctypes.data, rows, inner, launch.parts,
                              min(rows, 4), threads) == 0, f"finish hung: {case}"
        np.testing.assert_array_equal(d, x - y, err_msg=case)
        want = ((x - y) * (x - y)).astype(np.float64).sum(axis=1)
        if kind == "mean":
            with np.errstate(invalid="ignore"):
                want = want / inner  # the mean of an empty row is NaN, as NumPy's
        eps = 1e-6 if dtype == "float32" else 1e-13
        np.testing.assert_allclose(got, want, rtol=eps, atol=eps, err_msg=case)
    assert seen == {(True, False), (False, False), (False, True)}  # every kind of launch ran


class _HostCupy:
    """The part of CuPy a fused GPU call uses, over NumPy arrays, its "GPU" of `sms` SMs running
    the kernels built by _host_rows_kernel: the runtime's launcher (kernels/fused_cuda.py) then
    runs end to end without a GPU, its arguments passed as the kernels declare them."""

    def __init__(self, lib, kernel: FusedKernel, sms: int):
        from types import SimpleNamespace

        self.lib, self.kernel, self.launches = lib, kernel, []
        gpu = SimpleNamespace(id=0, attributes={"MultiProcessorCount": sms})
        self.cuda = SimpleNamespace(Device=lambda: gpu)
        self.asarray, self.ascontiguousarray, self.empty = np.asarray, np.ascontiguousarray, \
            np.empty

    def RawModule(self, path):  # noqa: N802 - CuPy's name
        from types import SimpleNamespace

        return SimpleNamespace(get_function=lambda name: self._function(name))

    def _function(self, name: str):
        n_in, n_out = len(self.kernel.inputs), len(self.kernel.outputs)

        def launch(grid, block, args):
            self.launches.append((name, grid[0]))
            if name == "opsdk_fused_rows":
                ins, outs, (rows, inner, chunk, parts, group, partial) = \
                    args[:n_in], args[n_in:n_in + n_out], args[n_in + n_out:]
                hung = self.lib.rows(_pointers(ins), _pointers(outs), int(rows), int(inner),
                                     int(chunk), int(parts), int(group), partial.ctypes.data,
                                     grid[0], block[0])
            else:
                partial, out, rows, inner, parts = args
                hung = self.lib.finish(partial.ctypes.data, out.ctypes.data, int(rows),
                                       int(inner), int(parts), grid[0], block[0])
            assert hung == 0, f"{name} hung"
        return launch


@pytest.mark.parametrize("shape, reduced", [((3, 2, 5), (2, True)), ((1, 20000), (1, False)),
                                            ((4, 0), (1, False)), ((0, 7), (1, True)),
                                            ((2, 3), (2, False))])
def test_the_runtime_s_launch_of_a_reduction_computes_each_row(tmp_path, shape, reduced):
    """kernels/fused_cuda.py's CudaFusedCall on the host's stand-in for CuPy: the output shapes,
    the arguments of both kernels, and the finishing launch for a row split across blocks."""
    from types import SimpleNamespace

    from opsdk.runtime.kernels.fused import rows_of
    from opsdk.runtime.kernels.fused_cuda import CudaFusedCall, rows_launch

    kernel = _scaled_sum("float64", "mean")
    lib = _host_rows_kernel(kernel, tmp_path)
    host = _HostCupy(lib, kernel, sms=1)
    call = CudaFusedCall(kernel, 90)
    call.load(tmp_path / "rows.so")
    x = np.random.default_rng(5).normal(size=shape)
    (total,) = call(SimpleNamespace(xp=host), [x, 0.25], 1, reduced)
    rows, inner, _ = rows_of(shape, reduced)
    axes = tuple(range(len(shape) - reduced[0], len(shape)))
    with np.errstate(invalid="ignore"):  # the mean of an empty row is NaN, as NumPy's
        want = np.sum(np.tanh(x) * 0.25, axis=axes, keepdims=reduced[1]) / inner
    assert total.shape == want.shape
    np.testing.assert_allclose(total, want, rtol=1e-13, atol=1e-15)
    split = rows_launch(rows, inner, 1).parts > 1
    assert [name for name, _ in host.launches] == (
        [] if rows == 0 else ["opsdk_fused_rows"] + ["opsdk_fused_rows_finish"] * split)
    assert split == (shape == (1, 20000))
