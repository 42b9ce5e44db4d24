"""Fixtures shared by every test package."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from hypothesis import settings

# `make test` (and so CI) loads the "ci" profile: every hypothesis test draws the same examples on
# every run, so a red CI run is the code's doing and reruns the same. A plain `pytest` draws fresh
# examples each run (and remembers failures in .hypothesis/), which is how new bugs are found.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])

# On a GPU machine JAX takes 75% of the GPU's memory when it first runs there, and the runtime's
# CuPy arrays (and other test processes) then run out of it: tests share the GPU, so JAX takes
# what it uses. (A program mixing JAX and opsdk on one GPU wants the same: docs/gpu.md.)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def pytest_addoption(parser):
    # Declared at the root so it exists however pytest is started (tests/codegen uses it).
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/codegen/golden/ from the current templates")


TESTS = Path(__file__).resolve().parent

# Folders whose tests share one session-wide fixture that takes minutes to make: all their tests go
# to one worker under pytest-xdist.
ONE_WORKER = {"dist": "Ray's embedded instance (tests/dist/conftest.py)",
              "packaging": "a wheel built and installed in a venv (tests/packaging/conftest.py)"}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marks
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`make test` runs `-n 2 --dist loadgroup`) a test file goes to one
    worker as a whole, and so do the folders of ONE_WORKER: a fixture of a module or a session is
    then made once, as in a run of one process, not once per worker (the flagship's 14 mutant
    builds took twice the CPU when both workers made them)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        try:
            where = item.path.relative_to(TESTS)
        except ValueError:  # a test file named from outside tests/
            where = item.path
        group = where.parts[0] if where.parts[0] in ONE_WORKER else where.as_posix()
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True)
def _jax_ffi_only_where_tested(request, monkeypatch):
    """Workspaces built by tests compile no JAX FFI handlers (8-10 s per op on 2 cores) unless
    the test is about JAX: the handlers have their own tests (tests/codegen/test_build_jax_ffi.py,
    tests/frameworks/test_jax.py), and every other build would only pay for them."""
    if "jax" not in request.node.module.__name__:
        monkeypatch.setenv("OPSDK_JAX_FFI", "0")


@pytest.fixture(autouse=True)
def _default_graph_left_open():
    """A test whose monitored session, Supervisor or Scaffold finalized the process's default
    graph leaves it finalized, as TensorFlow does; the next test in the same worker would then
    fail to add a node. Such a graph is replaced after the test, whatever order xdist picks."""
    yield
    import sys

    if "opsdk" in sys.modules:  # a test that never imported the runtime has no graph to replace
        import opsdk

        if opsdk.get_default_graph().finalized:
            opsdk.reset_default_graph()


@pytest.fixture
def host_default(monkeypatch):
    """Nodes with no device scope go to the host, as on a machine without a GPU: for tests of what
    the host's plans do (buffer pool, in-place writes, partitions between the host and the test
    device). On a GPU machine placement would put those nodes on the GPU instead."""
    from opsdk.runtime.devices.cuda import CudaDevice

    monkeypatch.setattr(CudaDevice, "auto", False)


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C (`_thread.interrupt_main`) raises KeyboardInterrupt in the main thread during the
    test. A process started in the background by a non-interactive shell (`make test &`) begins
    with SIGINT ignored, Python then installs no handler, and interrupt_main does nothing: a test
    of what Ctrl-C stops would wait forever."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def cupy():
    """CuPy with a usable CUDA device, or the test is skipped saying which of the two is missing."""
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("CuPy is not installed (pip install '.[gpu]')")
    import cupy

    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        pytest.skip(f"no usable CUDA device: {exc}")
    return cupy


# -- CUDA kernels with declared launches (tests/codegen/test_nvrtc.py, tests/runtime/test_cuda_jit.py)
WS_YAML = """
op: cu_scale
summary: y = scale * x on the GPU, with a grid-stride loop.
type_attrs:
  T: [float32, float64]
attrs:
  scale: {type: float, default: 2.0}
  flip: {type: bool, default: false}
inputs:
  x: {dtype: T, shape: [n, p]}
outputs:
  y: {dtype: T, shape: [n, p]}
kernels:
  cuda:
    source: cu_scale_cuda.cu
    launch:
      - kernel: scale<T>
        grid: ["min((n * p + 255) // 256, 1024)"]
        block: [256]
        args: [x, y, "n * p", scale, flip]
reference: "scale * x"
"""
WS_SOURCE = """#include "opsdk/device.h"
#include "cu_scale_helpers.h"

namespace opsdk_op_cu_scale {
template <typename T>
__global__ void scale(const T* x, T* y, int64_t size, double factor, bool flip) {
    for (int64_t i = opsdk::cuda::first(); i < size; i += opsdk::cuda::stride()) {
        y[i] = helpers::signed_times(x[i], factor, flip);
    }
}
}  // namespace opsdk_op_cu_scale
"""
WS_HEADER = """namespace helpers {
template <typename T> __device__ T signed_times(T v, double f, bool flip) {
    return static_cast<T>(flip ? -f * v : f * v);
}
}  // namespace helpers
"""


class LaunchWorkspace:
    """A workspace whose one op, cu_scale, declares its launch; its kernel includes a header."""

    yaml, source, header = WS_YAML.lstrip(), WS_SOURCE, WS_HEADER
    launch_line = 16  # `- kernel: scale<T>` in opdefs/cu_scale.yaml

    def __init__(self, root: Path):
        self.root = root
        (root / "opdefs").mkdir(parents=True)
        (root / "opdefs" / "cu_scale.yaml").write_text(self.yaml)
        (root / "opdefs" / "cu_scale_cuda.cu").write_text(self.source)
        (root / "opdefs" / "cu_scale_helpers.h").write_text(self.header)

    def spec(self):
        from opsdk.registry import load_registry
        return load_registry(self.root).get("cu_scale")


@pytest.fixture
def launch_ws(tmp_path) -> LaunchWorkspace:
    return LaunchWorkspace(tmp_path / "ws")


@pytest.fixture(scope="module")
def flagship():
    """The flagship's two specs, as this repository declares them."""
    from opsdk.registry import BUILTIN_ROOT, load_registry
    registry = load_registry(BUILTIN_ROOT)
    return registry.get("pairwise_manhattan"), registry.get("pairwise_manhattan_grad")


