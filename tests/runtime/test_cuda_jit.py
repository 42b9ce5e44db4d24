"""CUDA kernels with declared launches run by the cuda device (cuda_jit), compiled through NVRTC at
first use by the compiler it finds (opsdk.build.nvrtc; its own tests are tests/codegen/test_nvrtc.py).

Three kinds of tests:
* everywhere: the launch arithmetic (grid, block, limits, empty grids) and the arguments' types;
* where CuPy can load NVRTC (no GPU needed; CI installs it): the cuda device running the declared
  launches of NVRTC-compiled kernels against a NumPy stand-in for CuPy whose kernel functions
  emulate the flagship's kernels from the arguments they are handed;
* marked gpu: the NVRTC-compiled flagship on a real GPU against NumPy.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest

from opsdk.build import nvrtc as nvrtc_build
from opsdk.registry import BUILTIN_ROOT, KernelNotBuiltError, OpError, OpsdkError, load_registry
from opsdk.runtime.devices import cuda_jit
from opsdk.runtime.frontend.api import apply_op

NVRTC_MISSING = nvrtc_build.nvrtc_problem()
needs_nvrtc = pytest.mark.skipif(NVRTC_MISSING is not None, reason=NVRTC_MISSING or "")
if NVRTC_MISSING is None:
    from cupy.cuda import nvrtc  # noqa: F401 - imported before any test stands in a fake `cupy`


# -------------------------------------------------------------------- everywhere: the launches
def test_the_grid_follows_the_sizes_and_an_empty_grid_skips_the_launch(flagship):
    forward, grad = flagship
    (launch,) = forward.kernel("cuda").launches
    assert cuda_jit.launch_shapes(forward, launch, {"n": 200, "m": 130, "p": 7}) == (
        (3, 2, 2), (16, 16, 1), 0)
    assert cuda_jit.launch_shapes(forward, launch, {"n": 0, "m": 130, "p": 7}) is None
    (both,) = grad.kernel("cuda").launches  # grad_x and grad_y in one launch, the grid's z
    assert cuda_jit.launch_shapes(grad, both, {"n": 5, "m": 200, "p": 65})[0] == (2, 4, 2)
    assert cuda_jit.launch_shapes(grad, both, {"n": 200, "m": 0, "p": 65})[0] == (2, 4, 2)
    assert cuda_jit.launch_shapes(grad, both, {"n": 5, "m": 200, "p": 0}) is None
    assert cuda_jit.launch_shapes(grad, both, {"n": 0, "m": 0, "p": 3}) is None


def test_a_launch_past_cudas_limits_is_an_error_naming_the_op_and_kernel(flagship):
    forward, _ = flagship
    (launch,) = forward.kernel("cuda").launches
    with pytest.raises(OpError, match=r"^pairwise_manhattan: launch of detail::forward_kernel<T>: "
                                      r"grid y is 65536; CUDA allows 0 to 65535$"):
        cuda_jit.launch_shapes(forward, launch, {"n": 65535 * 128 + 1, "m": 1, "p": 1})


def test_arguments_are_passed_as_typed_scalars_in_the_declared_order(launch_ws):
    spec = launch_ws.spec()
    (launch,) = spec.kernel("cuda").launches
    x, y = object(), object()
    args = cuda_jit.launch_args(spec, launch, {"x": x, "y": y}, {"n": 3, "p": 5}, {"flip": True})
    assert args[:2] == (x, y)
    assert [(type(a), a) for a in args[2:]] == [(np.int64, 15), (np.float64, 2.0), (np.bool_, True)]


# ------------------------------------ the cuda device running declared launches (stand-in CuPy)
class DeviceArray(np.ndarray):
    """A NumPy array that claims to live on a GPU."""

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (0, False), "version": 3}


class EmulatedKernel:
    """A loaded kernel function: records each launch and computes what the flagship's kernel
    computes, from the arguments exactly as handed over (pointers as arrays, sizes as int64)."""

    def __init__(self, name: str, launches: list):
        self.name, self.launches = name, launches

    def __call__(self, grid, block, args, *, shared_mem=0):  # RawKernel's documented signature
        self.launches.append((self.name, grid, block, shared_mem, args))
        if "forward_kernel" in self.name:
            x, y, z, n, m, p = args
            z[...] = np.abs(x[:, None, :] - y[None, :, :]).sum(-1)
            assert (n, m, p) == (*z.shape, x.shape[1]) and type(n) is np.int64
        else:  # grad_kernel<T>: grad_x at blockIdx.z 0, grad_y at 1; sum_b w[a, b] * sign(a - b)
            x, y, w, grad_x, grad_y, n, m, p = args
            grad_x[...] = (w[:, :, None] * np.sign(x[:, None, :] - y[None, :, :])).sum(1)
            grad_y[...] = (w.T[:, :, None] * np.sign(y[:, None, :] - x[None, :, :])).sum(1)
            assert (n, m, p) == (*w.shape, x.shape[1]) and type(n) is np.int64


class FakeCupy(types.ModuleType):
    """NumPy dressed as CuPy, with RawModule and Device as the NVRTC path uses them."""

    def __init__(self) -> None:
        super().__init__("cupy")
        self.ndarray = DeviceArray
        self.modules: list[str] = []
        self.launches: list[tuple] = []
        self.stream = types.SimpleNamespace(ptr=777)
        device = types.SimpleNamespace(id=0, compute_capability="90")
        self.cuda = types.SimpleNamespace(
            runtime=types.SimpleNamespace(getDeviceCount=lambda: 1),
            get_current_stream=lambda: self.stream, Device=lambda *a: device)

    def RawModule(self, path):  # noqa: N802 - CuPy's name
        assert Path(path).suffix == ".cubin" and Path(path).stat().st_size > 0
        self.modules.append(path)
        return types.SimpleNamespace(get_function=lambda name: EmulatedKernel(name, self.launches))

    def asarray(self, value, dtype=None):
        return np.ascontiguousarray(value, dtype=dtype).view(DeviceArray)

    def asnumpy(self, value):
        return np.asarray(value)

    def ascontiguousarray(self, value):
        return np.ascontiguousarray(value).view(DeviceArray)

    def empty(self, shape, dtype):
        return np.full(shape, np.nan, dtype=dtype).view(DeviceArray)  # NaN: unwritten shows

    def __getattr__(self, name):
        return getattr(np, name)


@needs_nvrtc
def test_the_cuda_device_runs_the_declared_launches_of_an_nvrtc_compiled_kernel(
        flagship, tmp_path, monkeypatch):
    fake = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setenv("OPSDK_CUDA_JIT", "always")  # even where nvcc built the kernel
    monkeypatch.setattr(nvrtc_build, "cache_folder", lambda spec: tmp_path)
    monkeypatch.setattr(cuda_jit, "_kernels", {})
    registry = load_registry(BUILTIN_ROOT)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(70, 9)), rng.normal(size=(130, 9))
    z = apply_op(registry, "pairwise_manhattan", [fake.asarray(x), fake.asarray(y)], {}, device="cuda")
    assert isinstance(z, DeviceArray)
    np.testing.assert_allclose(np.asarray(z), np.abs(x[:, None] - y[None]).sum(-1), rtol=1e-12)
    ((name, grid, block, shared, _),) = fake.launches
    assert "forward_kernel" in name and (grid, block, shared) == ((3, 1, 2), (16, 16, 1), 0)
    g = rng.normal(size=(70, 130))
    gx, gy = apply_op(registry, "pairwise_manhattan_grad",
                      [fake.asarray(x), fake.asarray(y), fake.asarray(g)], {}, device="cuda")
    sign = np.sign(x[:, None] - y[None])
    np.testing.assert_allclose(np.asarray(gx), (g[:, :, None] * sign).sum(1), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gy), -(g[:, :, None] * sign).sum(0), rtol=1e-12)
    assert [launch[1] for launch in fake.launches[1:]] == [(1, 3, 2)]  # both outputs, one launch
    # Loaded once per op and dtype; a second call reuses the module, a new dtype compiles anew.
    apply_op(registry, "pairwise_manhattan", [fake.asarray(x), fake.asarray(y)], {}, device="cuda")
    apply_op(registry, "pairwise_manhattan", [fake.asarray(x[:0]), fake.asarray(y)], {}, device="cuda")
    assert len(fake.modules) == 2 and len(fake.launches) == 3  # the empty grid launched nothing
    apply_op(registry, "pairwise_manhattan", [fake.asarray(x, np.float32), fake.asarray(y, np.float32)],
             {}, device="cuda")
    assert len(fake.modules) == 3


@needs_nvrtc
def test_a_strided_input_reaches_the_launches_as_a_contiguous_copy(flagship, tmp_path, monkeypatch):
    # The runtime copies the views it is handed (as the host's calls do); a kernel called
    # directly still refuses one (check_inputs). A transposed GPU input was refused on an H100.
    fake = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setenv("OPSDK_CUDA_JIT", "always")
    monkeypatch.setattr(nvrtc_build, "cache_folder", lambda spec: tmp_path)
    monkeypatch.setattr(cuda_jit, "_kernels", {})
    registry = load_registry(BUILTIN_ROOT)
    x = fake.asarray(np.arange(24.0).reshape(4, 6))[:, ::2]
    y = fake.asarray(np.ones((2, 3)))
    with pytest.raises(OpsdkError, match=r"input 'x' is not C-contiguous; pass "
                                         r"cupy.ascontiguousarray\(x\)"):
        cuda_jit.check_inputs(registry.get("pairwise_manhattan"), [x, y])
    z = apply_op(registry, "pairwise_manhattan", [x, y], {}, device="cuda")
    want = np.abs(np.asarray(x)[:, None] - np.ones((1, 2, 3))).sum(-1)
    np.testing.assert_allclose(np.asarray(z), want)
    assert len(fake.launches) == 1


def test_a_compiled_kernel_that_is_a_link_or_misnamed_is_not_loaded(flagship, tmp_path, monkeypatch):
    fake = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    real = tmp_path / "outside.cubin"
    real.write_bytes(b"cubin")
    link = tmp_path / "k.cubin"
    link.symlink_to(real)
    handed = {"path": link, "lowered": ("_Z1kv",)}

    class Handing:
        def problem(self):
            return None

        def compile(self, spec, dtypes, arch):
            return types.SimpleNamespace(**handed)

    monkeypatch.setattr(cuda_jit, "_compiler", Handing())
    monkeypatch.setattr(cuda_jit, "_looked_up", True)
    forward = flagship[0]
    with pytest.raises(OpsdkError, match=r"pairwise_manhattan: the compiled cuda kernel .*k\.cubin "
                                         r"is not a regular file \(a link or missing\)"):
        cuda_jit.JitKernel(forward).functions({"T": "float32"}, fake)
    handed.update(path=real, lowered=("_Z1kv", "_Z1jv"))
    with pytest.raises(OpsdkError, match=r"expected 1 name\(s\), one per declared launch"):
        cuda_jit.JitKernel(forward).functions({"T": "float32"}, fake)
    assert fake.modules == []


def test_the_runtime_finds_the_nvrtc_compiler_through_the_packages_entry_point(monkeypatch):
    monkeypatch.setattr(cuda_jit, "_compiler", None)
    monkeypatch.setattr(cuda_jit, "_looked_up", False)
    assert cuda_jit.compiler() is nvrtc_build.COMPILER  # pyproject.toml's opsdk.kernel_compilers


def test_with_nvrtc_off_and_nothing_built_the_error_says_both(launch_ws, monkeypatch):
    ws = launch_ws.root
    fake = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setenv("OPSDK_CUDA_JIT", "never")
    with pytest.raises(KernelNotBuiltError) as info:
        apply_op(load_registry(ws), "cu_scale", [fake.asarray(np.ones((2, 2)))], {}, device="cuda")
    assert str(info.value).endswith("no built cuda kernel; run `opsdk build` in "
                                    f"{ws.resolve()}; nor can it compile at first use: "
                                    "OPSDK_CUDA_JIT=never")
    monkeypatch.setenv("OPSDK_CUDA_JIT", "sometimes")
    with pytest.raises(OpsdkError, match=r"OPSDK_CUDA_JIT='sometimes'; use one of auto, always, never"):
        apply_op(load_registry(ws), "cu_scale", [fake.asarray(np.ones((2, 2)))], {}, device="cuda")


# ------------------------------------------------------------------------------ on a real GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-5), ("float64", 1e-12)])
def test_the_nvrtc_compiled_flagship_agrees_with_numpy_on_the_gpu(cupy, monkeypatch, tmp_path,
                                                                   dtype, rtol):
    monkeypatch.setenv("OPSDK_CUDA_JIT", "always")
    monkeypatch.setattr(nvrtc_build, "cache_folder", lambda spec: tmp_path)
    monkeypatch.setattr(cuda_jit, "_kernels", {})
    registry = load_registry(BUILTIN_ROOT)
    rng = np.random.default_rng(1)
    for n, m, p in ((0, 3, 4), (1, 1, 0), (65, 130, 17), (200, 70, 300)):
        x, y = rng.normal(size=(n, p)).astype(dtype), rng.normal(size=(m, p)).astype(dtype)
        g = rng.normal(size=(n, m)).astype(dtype)
        z = apply_op(registry, "pairwise_manhattan", [cupy.asarray(x), cupy.asarray(y)], {},
                     device="cuda")
        gx, gy = apply_op(registry, "pairwise_manhattan_grad",
                          [cupy.asarray(x), cupy.asarray(y), cupy.asarray(g)], {}, device="cuda")
        sign = np.sign(x[:, None].astype(np.float64) - y[None])
        np.testing.assert_allclose(cupy.asnumpy(z), np.abs(x[:, None] - y[None]).sum(-1), rtol=rtol,
                                   atol=rtol * max(p, 1))
        np.testing.assert_allclose(cupy.asnumpy(gx), (g[:, :, None] * sign).sum(1), rtol=rtol,
                                   atol=rtol * max(m, 1))
        np.testing.assert_allclose(cupy.asnumpy(gy), -(g[:, :, None] * sign).sum(0), rtol=rtol,
                                   atol=rtol * max(n, 1))
