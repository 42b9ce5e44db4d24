"""Eager calls with device="cuda": the generated CUDA binding's calling convention, Python
kernels with xp=cupy, results left on the device, and the errors without CuPy or a GPU.

Two kinds of tests:
* everywhere: the no-CuPy / no-GPU errors, and the plumbing (argument order, allocation, list
  outputs, which kernel runs) against a NumPy-backed stand-in for CuPy and a recording stand-in
  for the built binding;
* marked gpu (skipped with the reason when CuPy or a GPU is missing): pairwise_manhattan and its
  gradient on the real cuda kernels (`opsdk build --cuda on`) against NumPy.
"""

from __future__ import annotations

import sys
import textwrap
import types

import numpy as np
import pytest

from opsdk.registry import BUILTIN_ROOT, Registry, load_registry, parse_opdef
from opsdk.registry.errors import OpError, OpsdkError
from opsdk.runtime.kernels import loader
from opsdk.runtime.frontend.api import apply_op

LOCAL = "/job:localhost/replica:0/task:0"  # the session's default task


# ------------------------------------------------------------------------ without CuPy or GPU
def test_without_cupy_device_cuda_says_so(registry, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError
    with pytest.raises(OpsdkError) as info:
        apply_op(registry, "exp", [np.ones(2)], {}, device="cuda")
    assert str(info.value) == ("exp: device='cuda' needs CuPy, which is not installed "
                               "(pip install '.[gpu]'), and a CUDA GPU")


@pytest.mark.parametrize("count, words", [
    (lambda: 0, "CuPy sees no GPU on this machine"),
    (lambda: (_ for _ in ()).throw(RuntimeError("cudaErrorNoDevice")),
     "CuPy cannot reach one (RuntimeError: cudaErrorNoDevice)"),
])
def test_without_a_gpu_device_cuda_says_so(registry, monkeypatch, count, words):
    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=count))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(OpsdkError) as info:
        apply_op(registry, "exp", [np.ones(2)], {}, device="cuda")
    assert str(info.value) == f"exp: device='cuda' needs a CUDA GPU; {words}"


# ------------------------------------------------------------- stand-ins for CuPy and the glue
class DeviceArray(np.ndarray):
    """A NumPy array that claims to live on a GPU (what the runtime checks for CuPy arrays)."""

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (0, False), "version": 3}


class FakeCupy(types.ModuleType):
    """NumPy dressed as CuPy: arrays become DeviceArrays; records the functions kernels call."""

    def __init__(self) -> None:
        super().__init__("cupy")
        self.called: list[str] = []
        self.ndarray = DeviceArray
        stream = types.SimpleNamespace(ptr=12345)
        self.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=lambda: 1),
                                          get_current_stream=lambda: stream)

    def asarray(self, value, dtype=None):
        return np.asarray(value, dtype=dtype).view(DeviceArray)

    def empty(self, shape, dtype):
        return np.full(shape, np.nan, dtype=dtype).view(DeviceArray)  # NaN: unwritten shows

    def __getattr__(self, name):
        self.called.append(name)
        return getattr(np, name)


@pytest.fixture
def fake_cupy(monkeypatch) -> FakeCupy:
    fake = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


def test_a_python_kernel_runs_with_xp_cupy_and_results_stay_on_the_device(registry, fake_cupy):
    out = apply_op(registry, "exp", [np.array([0.0, 1.0])], {}, device="cuda")
    assert isinstance(out, DeviceArray) and "exp" in fake_cupy.called
    np.testing.assert_allclose(np.asarray(out), np.exp([0.0, 1.0]))
    # A device array given with no device runs there too; a Python number takes its dtype.
    x = fake_cupy.asarray(np.ones(3, np.float32))
    total = apply_op(registry, "add", [x, 2], {})
    assert isinstance(total, DeviceArray) and total.dtype == np.float32
    grad_y = fake_cupy.asarray(np.arange(6.0, dtype=np.float32))
    pieces = apply_op(registry, "concat_grad", [[x, x], grad_y], {}, device="cuda")
    assert isinstance(pieces, list) and all(isinstance(p, DeviceArray) for p in pieces)
    np.testing.assert_array_equal(np.asarray(pieces[1]), [3.0, 4.0, 5.0])


def test_a_device_array_with_a_host_device_is_refused(registry, fake_cupy):
    x = fake_cupy.asarray(np.ones(2))
    with pytest.raises(OpsdkError, match=r"^exp: input 'x' is a GPU array; call with "
                                         r"device='cuda', or copy it to the host first"):
        apply_op(registry, "exp", [x], {}, device="python")


SCALED = """
op: scaled
summary: Each of xs times a, on the GPU only.
type_attrs:
  T: [float32, float64]
  OutT: {allowed: [float32, float64], default: float64}
attrs:
  a: {type: float, default: 2.0}
inputs:
  xs: {dtype: T, shape: [n], list: N}
outputs:
  ys: {dtype: OutT, shape: [n], list: N}
  total: {dtype: OutT, shape: []}
kernels:
  cuda: scaled_cuda.cu
---
op: host_only
summary: A copy of x, with a CPU kernel only.
type_attrs:
  T: [float64]
inputs:
  x: {dtype: T, shape: [n]}
outputs:
  y: {dtype: T, shape: [n]}
kernels:
  cpu: host_only_cpu.cc
"""


@pytest.fixture
def gpu_registry(registry, tmp_path) -> Registry:
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "scaled.yaml").write_text(textwrap.dedent(SCALED))
    for kernel in ("scaled_cuda.cu", "host_only_cpu.cc"):
        (tmp_path / "opdefs" / kernel).write_text("// not compiled by these tests\n")
    specs = {name: registry.get(name) for name in registry.names()}
    specs.update({s.name: s for s in parse_opdef(tmp_path / "opdefs" / "scaled.yaml", tmp_path)})
    return Registry(specs)


def test_the_cuda_binding_gets_inputs_attrs_type_names_outputs_and_stream(
        gpu_registry, fake_cupy, monkeypatch):
    seen: list[tuple] = []

    def binding(xs, a, n, out_t, ys, total, stream):
        seen.append((xs, a, n, out_t, ys, total, stream))
        for x, y in zip(xs, ys):
            y[...] = x * a
        total[...] = sum(float(x.sum()) for x in xs) * a
        return None  # the glue returns None: results are the preallocated outputs

    monkeypatch.setattr(loader, "load_kernel", lambda spec, device: binding)
    xs = [np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)]
    ys, total = apply_op(gpu_registry, "scaled", [xs], {"a": 3.0, "OutT": "float32"},
                         device="cuda")
    (args,) = seen
    assert all(isinstance(x, DeviceArray) for x in args[0]) and args[1:4] == (3.0, 2, "float32")
    assert [y.shape for y in args[4]] == [(2,), (2,)] and args[5].shape == ()
    assert all(y.dtype == np.float32 for y in args[4]) and args[6] == 12345
    assert ys[0] is args[4][0] and ys[1] is args[4][1] and total is args[5]
    np.testing.assert_array_equal(np.asarray(ys[1]), [9.0, 12.0])
    assert float(total) == 30.0


def test_a_failing_cuda_binding_is_one_error_naming_the_op(gpu_registry, fake_cupy, monkeypatch):
    def binding(*args):
        raise ValueError("scaled: input 'xs[1]' has 3 elements but xs[0] has 2 (dim n)")

    monkeypatch.setattr(loader, "load_kernel", lambda spec, device: binding)
    with pytest.raises(OpError) as info:
        apply_op(gpu_registry, "scaled", [[np.ones(2), np.ones(2)]], {}, device="cuda")
    assert str(info.value) == "scaled: input 'xs[1]' has 3 elements but xs[0] has 2 (dim n)"


def test_an_op_with_only_a_cpu_kernel_cannot_run_on_cuda(gpu_registry, fake_cupy):
    with pytest.raises(OpsdkError) as info:
        apply_op(gpu_registry, "host_only", [np.ones(2)], {}, device="cuda")
    assert str(info.value) == ("op 'host_only': no cuda or python kernel declared, so it cannot "
                               "run on /device:GPU:0 (kernels: cpu)")


def test_a_graph_on_the_gpu_copies_in_runs_there_and_fetches_numpy(gpu_registry, fake_cupy,
                                                                    monkeypatch):
    from opsdk.runtime.exec.session import Session
    from opsdk.runtime.ir.graph import Graph, device, placeholder

    streams: list = []

    def binding(xs, a, n, out_t, ys, total, stream):
        assert all(isinstance(x, DeviceArray) for x in xs)  # the copies put them on the GPU
        streams.append(stream)
        for x, y in zip(xs, ys):
            y[...] = x * a
        total[...] = sum(float(x.sum()) for x in xs) * a

    monkeypatch.setattr(loader, "load_kernel", lambda spec, device: binding)
    fake_cupy.asnumpy = lambda a: np.array(a).view(np.ndarray)
    g = Graph()
    with g.as_default():
        x0 = placeholder("float64", [2], name="x0")
        x1 = placeholder("float64", [2], name="x1")
        with device("/gpu:0"):
            ys, total = apply_op(gpu_registry, "scaled", [[x0, x1]], {"a": 2.0}, name="s")
            e = apply_op(gpu_registry, "exp", [total], {}, name="e")  # xp=cupy
    with Session(g) as sess:
        explanation = sess.explain([ys[1], e], {x0: None, x1: None}, show=False)
        got_y, got_e = sess.run([ys[1], e], {x0: np.ones(2), x1: np.full(2, 2.0)})
    assert type(got_y) is np.ndarray and type(got_e) is np.ndarray  # fetched back to the host
    assert got_y.tolist() == [4.0, 4.0] and np.isclose(got_e, np.exp(12.0))
    assert streams == [12345] and "exp" in fake_cupy.called
    assert explanation.placement["s"] == explanation.placement["e"] == LOCAL + "/device:GPU:0"
    assert sorted(c[0] for c in explanation.copies) == ["e:0", "s:1", "x0:0", "x1:0"]


# ------------------------------------------------------------------------------ on a real GPU


def _built_registry() -> Registry:
    registry = load_registry(BUILTIN_ROOT)
    for name in ("pairwise_manhattan", "pairwise_manhattan_grad"):
        if not loader.manifest_path(registry.get(name), "cuda").is_file():
            pytest.skip(f"the cuda kernel of {name} is not built; run `opsdk build --cuda on`")
    return registry


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-5), (np.float64, 1e-12)])
def test_pairwise_manhattan_and_its_gradient_on_cuda_match_numpy(cupy, dtype, rtol):
    cp = cupy
    registry = _built_registry()
    rng = np.random.default_rng(7)
    x = rng.normal(size=(37, 19)).astype(dtype)
    y = rng.normal(size=(23, 19)).astype(dtype)
    grad_z = rng.normal(size=(37, 23)).astype(dtype)
    z = apply_op(registry, "pairwise_manhattan", [x, y], {}, device="cuda")  # NumPy in
    assert isinstance(z, cp.ndarray) and z.dtype == dtype and z.shape == (37, 23)
    want = np.abs(x[:, None, :] - y[None, :, :]).sum(-1)
    np.testing.assert_allclose(cp.asnumpy(z), want, rtol=rtol, atol=rtol)
    gx, gy = apply_op(registry, "pairwise_manhattan_grad",
                      [cp.asarray(x), cp.asarray(y), cp.asarray(grad_z)], {})  # CuPy in
    assert isinstance(gx, cp.ndarray) and isinstance(gy, cp.ndarray)
    sign = np.sign(x[:, None, :] - y[None, :, :])
    want_gx = (grad_z[:, :, None] * sign).sum(1)
    want_gy = -(grad_z[:, :, None] * sign).sum(0)
    np.testing.assert_allclose(cp.asnumpy(gx), want_gx, rtol=rtol * 10, atol=rtol * 10)
    np.testing.assert_allclose(cp.asnumpy(gy), want_gy, rtol=rtol * 10, atol=rtol * 10)
    cpu = apply_op(registry, "pairwise_manhattan_grad", [x, y, grad_z], {}, device="cpu")
    np.testing.assert_allclose(cp.asnumpy(gx), cpu[0], rtol=rtol * 10, atol=rtol * 10)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("n, m, p", [(300, 70, 33), (129, 200, 8), (5, 0, 4), (0, 3, 4), (4, 3, 0)])
def test_the_flagship_kernels_cover_every_tile_and_edge(cupy, dtype, rtol, n, m, p):
    """Shapes across several blocks with remainders (the forward's 128 x 64 tiles, the gradient's
    grid sized by the longer of n and m), and empty sizes, where an output must still be zeros."""
    cp = cupy
    registry = _built_registry()
    rng = np.random.default_rng(n * 1000 + m)
    x, y = rng.normal(size=(n, p)).astype(dtype), rng.normal(size=(m, p)).astype(dtype)
    grad_z = rng.normal(size=(n, m)).astype(dtype)
    z = apply_op(registry, "pairwise_manhattan", [x, y], {}, device="cuda")
    np.testing.assert_allclose(cp.asnumpy(z), np.abs(x[:, None, :] - y[None, :, :]).sum(-1),
                               rtol=rtol, atol=rtol * max(p, 1))
    gx, gy = apply_op(registry, "pairwise_manhattan_grad", [x, y, grad_z], {}, device="cuda")
    sign = np.sign(x[:, None, :].astype(np.float64) - y[None, :, :])
    np.testing.assert_allclose(cp.asnumpy(gx), (grad_z[:, :, None] * sign).sum(1), rtol=rtol,
                               atol=rtol * max(m, 1))
    np.testing.assert_allclose(cp.asnumpy(gy), -(grad_z[:, :, None] * sign).sum(0), rtol=rtol,
                               atol=rtol * max(n, 1))


@pytest.mark.gpu
def test_cuda_errors_and_streams(cupy):
    cp = cupy
    registry = _built_registry()
    with pytest.raises(OpError, match=r"^pairwise_manhattan: input 'y' has 3 columns but x has 4"):
        apply_op(registry, "pairwise_manhattan", [np.ones((2, 4)), np.ones((5, 3))], {},
                 device="cuda")
    x = cp.asarray(np.arange(12.0).reshape(4, 3))
    with cp.cuda.Stream(non_blocking=True) as stream:  # the kernel runs on the current stream
        z = apply_op(registry, "pairwise_manhattan", [x, x], {})
        stream.synchronize()
    np.testing.assert_allclose(cp.asnumpy(z), np.abs(np.arange(4)[:, None] -
                                                     np.arange(4)[None, :]) * 9.0)


@pytest.mark.gpu
def test_builtin_python_kernels_on_cuda_return_cupy(cupy):
    cp = cupy
    registry = load_registry(None)
    out = apply_op(registry, "softmax", [np.array([[1.0, 2.0, 3.0]])], {}, device="cuda")
    assert isinstance(out, cp.ndarray)
    e = np.exp([1.0, 2.0, 3.0])
    np.testing.assert_allclose(cp.asnumpy(out)[0], e / e.sum(), rtol=1e-12)
    parts = apply_op(registry, "stack_grad", [[cp.ones(2), cp.ones(2)],
                                              cp.asarray([[1.0, 2.0], [3.0, 4.0]])], {})
    assert isinstance(parts, list) and all(isinstance(p, cp.ndarray) for p in parts)
    np.testing.assert_array_equal(cp.asnumpy(parts[1]), [3.0, 4.0])
