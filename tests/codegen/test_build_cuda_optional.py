"""An op with an optional input compiles with nvcc (its CUDA glue takes None and hands the kernel
an empty std::optional; a declared launch passes a null pointer), and runs on a GPU with the
input given and absent where one is.

Needs nvcc (not a GPU) for the build; the run needs a GPU and CuPy."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from opsdk.build.driver import build_workspace
from opsdk.registry import load_registry
from opsdk.runtime.frontend.api import apply_op

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("nvcc") is None,
                                 reason="needs nvcc (the CUDA toolkit) to compile CUDA kernels")]

DECLARATION = """\
op: optsum
summary: Row sums of x weighted by an optional w.
type_attrs: {T: [float32, float64]}
inputs:
  x: {dtype: T, shape: [n, p]}
  w: {dtype: T, shape: [p], optional: true}
outputs:
  y: {dtype: T, shape: [n]}
kernels:
  cpu: optsum_cpu.cc
  cuda: optsum_cuda.cu
"""

CPU = """\
#include "optsum_op.h"
namespace opsdk_op_optsum {
template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs&) {
    const T* w = in.w ? in.w->data : nullptr;
    for (int64_t i = 0; i < dims.n; ++i) {
        T s = 0;
        for (int64_t j = 0; j < dims.p; ++j) s += in.x.data[i * dims.p + j] * (w ? w[j] : T(1));
        out.y.data[i] = s;
    }
}
}  // namespace opsdk_op_optsum
"""

CUDA = """\
#include "optsum_op.h"
namespace opsdk_op_optsum {
namespace detail {
template <typename T>
__global__ void rows(const T* x, const T* w, T* y, int64_t n, int64_t p) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    T s = 0;
    for (int64_t j = 0; j < p; ++j) s += x[i * p + j] * (w ? w[j] : T(1));
    y[i] = s;
}
}  // namespace detail
template <typename T>
void cuda(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs&, cudaStream_t stream) {
    if (dims.n == 0) return;
    const T* w = in.w ? in.w->data : nullptr;
    detail::rows<T><<<(dims.n + 127) / 128, 128, 0, stream>>>(in.x.data, w, out.y.data, dims.n, dims.p);
}
}  // namespace opsdk_op_optsum
"""


LAUNCHED = """\
op: optlaunch
summary: The same through a declared launch.
type_attrs: {T: [float32, float64]}
inputs:
  x: {dtype: T, shape: [n, p]}
  w: {dtype: T, shape: [p], optional: true}
outputs:
  y: {dtype: T, shape: [n]}
kernels:
  cpu: optlaunch_cpu.cc
  cuda:
    source: optlaunch_cuda.cu
    launch:
      - {kernel: "rows<T>", grid: ["(n + 127) // 128"], block: [128], args: [x, w, y, n, p]}
"""

LAUNCHED_CUDA = """\
#include "opsdk/device.h"
namespace opsdk_op_optlaunch {
template <typename T>
__global__ void rows(const T* x, const T* w, T* y, int64_t n, int64_t p) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    T s = 0;
    for (int64_t j = 0; j < p; ++j) s += x[i * p + j] * (w != nullptr ? w[j] : T(1));
    y[i] = s;
}
}  // namespace opsdk_op_optlaunch
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("optional_cuda")
    (root / "opdefs").mkdir()
    (root / "opdefs" / "optsum.yaml").write_text(DECLARATION)
    (root / "opdefs" / "optsum_cpu.cc").write_text(CPU)
    (root / "opdefs" / "optsum_cuda.cu").write_text(CUDA)
    (root / "opdefs" / "optlaunch.yaml").write_text(LAUNCHED)
    (root / "opdefs" / "optlaunch_cpu.cc").write_text(CPU.replace("optsum", "optlaunch"))
    (root / "opdefs" / "optlaunch_cuda.cu").write_text(LAUNCHED_CUDA)
    return root


def test_an_optional_input_compiles_in_the_cuda_glue(ws, monkeypatch):
    monkeypatch.setenv("OPSDK_CUDA_ARCHS", "80")  # one arch: the sources' errors, not a fat binary
    report = build_workspace(ws, jobs=2, cuda="on", progress=False)
    assert sorted((r.op, r.device) for r in report.results) == [
        ("optlaunch", "cpu"), ("optlaunch", "cuda"), ("optsum", "cpu"), ("optsum", "cuda")]
    launched = (ws / "generated" / "cuda" / "optlaunch_cuda_kernel.cu").read_text()
    assert "(in.w ? in.w->data : nullptr)" in launched
    x = np.arange(6.0).reshape(2, 3)
    registry = load_registry(ws)
    np.testing.assert_array_equal(apply_op(registry, "optsum", [x, None], {}, device="cpu"), [3.0, 12.0])


@pytest.mark.gpu
def test_the_cuda_kernel_gets_the_input_or_none(ws, cupy):
    build_workspace(ws, jobs=2, cuda="on", progress=False)
    registry = load_registry(ws)
    x = cupy.arange(6.0).reshape(2, 3)
    w = cupy.asarray([1.0, 0.0, 2.0])
    for op in ("optsum", "optlaunch"):
        np.testing.assert_array_equal(apply_op(registry, op, [x, None], {}, device="cuda").get(), [3.0, 12.0])
        np.testing.assert_array_equal(apply_op(registry, op, [x, w], {}, device="cuda").get(), [4.0, 13.0])
