"""Fusion on the GPU: elementwise regions placed on a GPU become one generated CUDA kernel
(compiled through NVRTC by the `cuda` fusion compiler), whose results equal the unfused GPU
graph's. Without a GPU (CI) the pass is checked as far as placement allows: GPU-placed regions
are marked for the cuda compiler, and where it is missing they run unfused and say why once.
The tests marked gpu need CuPy and a CUDA device (the `cupy` fixture skips them otherwise); the
CPU's fused kernels are tests/runtime/test_fusion.py's."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from opsdk.registry.elementwise import FusedKernel, Var, parse_expression, substitute
from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.compile.pipeline import compile_program, new_program
from opsdk.runtime.compile.program import PlanOptions
from opsdk.runtime.devices.cuda import CudaDevice
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import Graph, device, placeholder
from opsdk.runtime.kernels import fused
from opsdk.runtime.kernels.fused import fusion_compiler, set_fusion_compiler, \
    wait_for_fused_kernels
from test_fusion import N, _graphs, _run, random_graph

GPU = "/gpu:0"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSDK_FUSION_CACHE", str(tmp_path / "fused"))
    set_fusion_compiler(None, "cpu")
    set_fusion_compiler(None, "cuda")
    yield
    set_fusion_compiler(None, "cpu")
    set_fusion_compiler(None, "cuda")


def _gelu(registry, x, dtype):
    def op(name, *args):
        return apply_op(registry, name, list(args), {})
    c = np.dtype(dtype).type
    cube = op("mul", x, op("mul", x, x))
    inner = op("mul", c(0.7978845608), op("add", x, op("mul", c(0.044715), cube)))
    return op("mul", op("mul", c(0.5), x), op("add", c(1.0), op("tanh", inner)))


def _gelu_graph(registry, dtype, shape=(N,)):
    g = Graph()
    with g.as_default(), device(GPU):
        x = placeholder(np.dtype(dtype).name, list(shape), name="x")
        y = _gelu(registry, x, dtype)
    return g, x, y


# -- without a GPU: the pass, with placement told a GPU is there --------------------------------
@pytest.fixture
def pretend_gpu(monkeypatch):
    """Placement sees a usable GPU (nothing runs on it: these tests stop before lowering)."""
    monkeypatch.setattr(CudaDevice, "unavailable", lambda self: None)


def _fused_program(graph, fetch, feeds):
    fetches = fetch if isinstance(fetch, list) else [fetch]
    with graph.as_default():
        program = compile_program(new_program(fetches, feeds, PlanOptions()))
    return program, [op for op in program.ops if op.type == "_fused"]


@pytest.mark.skipif(fusion_compiler("cuda") is None or fusion_compiler("cuda").problem(),
                    reason="no cuda fusion compiler here (needs CuPy with NVRTC: pip install "
                           "'.[gpu]' and pip install -e .)")
def test_the_pass_marks_gpu_regions_for_the_cuda_compiler(registry, pretend_gpu):
    g, x, y = _gelu_graph(registry, np.float32)
    program, nodes = _fused_program(g, y, [x])
    assert len(nodes) == 1 and nodes[0].attrs["target"] == "cuda"
    assert isinstance(program.device[nodes[0]], CudaDevice)
    assert len(nodes[0].attrs["region"]) == 9
    (line,) = program.report["fuse"]
    source = line.rsplit("source ", 1)[1].rstrip(")")
    assert source.endswith(".cu") and source == str(
        fusion_compiler("cuda").source_path(nodes[0].attrs["kernel"]))


def test_without_the_cuda_compiler_gpu_regions_run_unfused_and_say_why_once(
        registry, pretend_gpu, caplog):
    class NoNvrtc:
        def problem(self):
            return "NVRTC needs CuPy, which is not installed (fake)"
    set_fusion_compiler(NoNvrtc(), "cuda")
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [N], name="x")
        with device(GPU):
            on_gpu = _gelu(registry, x, np.float32)
        with device("/cpu:0"):
            on_cpu = _gelu(registry, on_gpu, np.float32)
    fused._said.clear()
    with caplog.at_level(logging.WARNING, logger="opsdk.fusion"):
        for _ in range(2):
            program, nodes = _fused_program(g, on_cpu, [x])
    assert [n.attrs["target"] for n in nodes] == ["cpu"]  # the CPU's region is fused still
    assert program.report["fuse"][0] == ("nothing fused on /device:GPU:0: NVRTC needs CuPy, "
                                         "which is not installed (fake)")
    said = [r.getMessage() for r in caplog.records if "run unfused" in r.getMessage()]
    assert said == ["elementwise regions on /device:GPU:0 run unfused: NVRTC needs CuPy, which "
                    "is not installed (fake)"]


# -- on a GPU ------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_is_one_fused_gpu_kernel_with_the_unfused_result(registry, cupy, dtype):
    g, x, y = _gelu_graph(registry, dtype)
    value = np.random.default_rng(0).normal(size=N).astype(dtype) * 4
    got, explanation = _run(g, y, {x: value}, fuse=True)
    want, plain = _run(g, y, {x: value}, fuse=False)
    (line,) = explanation.lines_of("fuse")
    assert "-> mul_5/fused" in line and line.endswith(".cu)"), line
    assert explanation.placement["mul_5"].endswith("GPU:0") and plain.lines_of("fuse") == ("off",)
    path = line.rsplit("source ", 1)[1].rstrip(")")
    with open(path) as f:
        assert "__global__ void opsdk_fused" in f.read()
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(), (3,)])
def test_small_gpu_regions_are_fused_too_and_keep_their_shape(registry, cupy, shape):
    """On a GPU every unfused op is a launch of its own: regions of any size are fused."""
    g, x, y = _gelu_graph(registry, np.float32, shape)
    value = np.full(shape, 0.75, np.float32)
    got, explanation = _run(g, y, {x: value}, fuse=True)
    want, _ = _run(g, y, {x: value}, fuse=False)
    assert "-> mul_5/fused" in explanation.lines_of("fuse")[0]
    assert got.shape == shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.gpu
def test_gradients_of_a_fused_gpu_region_are_fused_and_equal(registry, cupy):
    g = Graph()
    with g.as_default(), device(GPU):
        x = placeholder("float64", [N], name="x")
        y = apply_op(registry, "tanh", [apply_op(registry, "sigmoid", [
            apply_op(registry, "mul", [x, x], {})], {})], {})
        (dx,) = gradients([y], [x])
    value = np.linspace(-3, 3, N)
    got, explanation = _run(g, dx, {x: value}, fuse=True)
    want, _ = _run(g, dx, {x: value}, fuse=False)
    assert any("_grad" in line and line.endswith(".cu)") for line in explanation.lines_of("fuse"))
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [0, 1])
def test_a_fused_gpu_call_reads_views_and_single_values(cupy, offset):
    """Arrays at an offset (not 16-byte aligned: no vector loads) and a single value given as a
    host scalar, n not a whole number of vectors."""
    from opsdk.runtime.devices import get_device
    from opsdk.runtime.kernels.fused_cuda import cuda_fused_call

    expr = substitute(parse_expression("max(x, s) * y - sigmoid(x)", frozenset({"x", "y", "s"})),
                      {"x": Var("in0"), "y": Var("in1"), "s": Var("in2")})
    kernel = FusedKernel("float32", ("array", "array", "scalar"), (("t0", expr),), ("t0",))
    gpu = get_device(GPU)
    call = cuda_fused_call(kernel, gpu)
    assert wait_for_fused_kernels(300) and call.ready, call.failed
    rng = np.random.default_rng(1)
    x = cupy.asarray(rng.normal(size=N + 3).astype(np.float32))[offset:offset + N - 1]
    y = cupy.asarray(rng.normal(size=N + 3).astype(np.float32))[offset:offset + N - 1]
    (out,) = call(gpu, [x, y, np.float32(0.25)], 1)
    xs, ys = cupy.asnumpy(x), cupy.asnumpy(y)
    want = np.maximum(xs, np.float32(0.25)) * ys - 1 / (1 + np.exp(-xs))
    np.testing.assert_allclose(cupy.asnumpy(out), want, rtol=1e-6, atol=1e-6)
    assert call(gpu, [x, y[:-1], np.float32(0.25)], 1) is None  # shapes that do not fit one pass


@pytest.mark.gpu
def test_while_the_gpu_kernel_compiles_the_region_runs_unfused(registry, cupy):
    release = threading.Event()
    real = fusion_compiler("cuda")

    class SlowCompiler:
        def problem(self):
            return None

        def cached(self, kernel, arch):
            return None

        def source_path(self, kernel):
            return real.source_path(kernel)

        def compile(self, kernel, arch):
            release.wait(60)
            return real.compile(kernel, arch)
    set_fusion_compiler(SlowCompiler(), "cuda")
    g, x, y = _gelu_graph(registry, np.float64)
    value = np.linspace(-2, 2, N)
    with Session(g) as sess:
        before = sess.run(y, {x: value})  # not compiled yet: the members run one by one
        (call,) = fused._calls.values()
        assert not call.ready
        release.set()
        assert wait_for_fused_kernels(300) and call.ready, call.failed
        after = sess.run(y, {x: value})
    np.testing.assert_allclose(before, after, rtol=1e-13)


@pytest.mark.gpu
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=_graphs())
def test_random_elementwise_graphs_on_the_gpu_fused_equal_unfused(registry, cupy, case):
    dtype, scalars, program, fetch_two, seed = case
    g, values, feeds = random_graph(registry, case, GPU)
    fetches = [values[-1], values[len(values) // 2]] if fetch_two else [values[-1]]
    with np.errstate(all="ignore"):
        got, _ = _run(g, fetches, feeds, fuse=True)
        want, _ = _run(g, fetches, feeds, fuse=False)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, equal_nan=True)
