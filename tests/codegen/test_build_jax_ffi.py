"""JAX FFI handlers built by `opsdk build` (opsdk/build/jax_ffi.py): jax.jit calls the compiled
kernel with attrs of every kind, and a kernel edit relinks the handler the next trace uses."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX not installed: pip install 'opsdk[jax]'")

from opsdk.build.driver import build_workspace  # noqa: E402
from opsdk.build.jax_ffi import ffi_include_dir  # noqa: E402

pytestmark = pytest.mark.slow

YAML = """\
op: ffi_mix
summary: y = x * scale + k + flag + (x if mode is twice) + sum(offsets) + len(axes), batched.
type_attrs: {T: [float32, float64]}
attrs:
  k: {type: int, default: 1}
  scale: {type: float, default: 2.0}
  flag: {type: bool, default: false}
  mode: {type: str, default: once, choices: [once, twice]}
  offsets: {type: list(float), default: [0.5]}
  axes: {type: list(int), default: []}
inputs:
  x: {dtype: T, shape: [..., n]}
outputs:
  y: {dtype: T, shape: [..., n]}
kernels:
  cpu: ffi_mix_cpu.cc
"""

KERNEL = """\
#include "ffi_mix_op.h"

namespace opsdk_op_ffi_mix {
template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
    double extra = attrs.k + (attrs.flag ? 1.0 : 0.0) + static_cast<double>(attrs.axes.size());
    for (double o : attrs.offsets) extra += o;
    int64_t total = dims.n;
    for (int64_t b : dims.batch) total *= b;
    for (int64_t i = 0; i < total; ++i) {
        double x = in.x[i];
        out.y[i] = static_cast<T>(x * attrs.scale * FACTOR + extra + (attrs.mode == "twice" ? x : 0.0));
    }
}
}  // namespace opsdk_op_ffi_mix
"""


def expected(x, k=1, scale=2.0, flag=False, mode="once", offsets=(0.5,), axes=(), factor=1):
    return (x * scale * factor + k + flag + sum(offsets) + len(axes)
            + (x if mode == "twice" else 0))


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    if ffi_include_dir() is None:
        pytest.skip("jaxlib's FFI headers are not installed")
    root = tmp_path_factory.mktemp("ffi_ws")
    (root / "opdefs").mkdir()
    (root / "opdefs" / "ffi_mix.yaml").write_text(YAML)
    (root / "opdefs" / "ffi_mix_cpu.cc").write_text(KERNEL.replace("FACTOR", "1"))
    build_workspace(root, jobs=2, progress=False)
    return root


def _ops(root):
    from opsdk.jax import load_ops

    return load_ops(root)


def test_jit_runs_the_handler_with_attrs_of_every_kind(ws):
    with jax.enable_x64(True):
        x = np.arange(6.0).reshape(2, 3)
        for attrs in ({}, {"k": 3, "scale": 0.5, "flag": True, "mode": "twice",
                           "offsets": [1.0, 2.0], "axes": [0, 1, 2]}):
            fn = jax.jit(lambda a, attrs=attrs: _ops(ws).ffi_mix(a, **attrs))
            assert "custom_call @opsdk_ffi_mix_" in fn.lower(x).as_text()
            np.testing.assert_allclose(fn(x), expected(x, **attrs))


def test_a_kernel_edit_relinks_the_handler(ws):
    (ws / "opdefs" / "ffi_mix_cpu.cc").write_text(KERNEL.replace("FACTOR", "10"))
    build_workspace(ws, jobs=2, progress=False)
    x = np.arange(3.0, dtype=np.float32)
    np.testing.assert_allclose(jax.jit(lambda a: _ops(ws).ffi_mix(a, k=2))(x),
                               expected(x, k=2, factor=10))
