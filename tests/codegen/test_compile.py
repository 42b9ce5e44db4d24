"""A generated binding compiled with g++ and called: the checks, the dispatch and kernel errors.

The glue's messages are compared with those of opsdk.registry.infer_outputs for the same bad
inputs, so the compiled checks and the graph-time checks say the same thing.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sysconfig
from pathlib import Path

import numpy as np
import pybind11
import pytest

from codegen_fixtures import parse_one, write_workspace
from opsdk.codegen import render
from opsdk.registry import OpError, infer_outputs

INCLUDE = Path(render.__file__).resolve().parents[1] / "include"

TINY = """
    op: tiny
    summary: Pairwise L1 distance plus a row sum over leading dims.
    type_attrs:
      T: [float32, float64]
    attrs:
      mode: {type: str, default: run, choices: [run, todo, fail]}
    inputs:
      x: {dtype: T, shape: [n, p]}
      y: {dtype: T, shape: [m, p]}
      w: {dtype: T, shape: [..., 3]}
    outputs:
      z: {dtype: T, shape: [n, m]}
      s: {dtype: T, shape: [..., "p + 1"]}
    gradient: null
    kernels:
      cpu: tiny_cpu.cc
"""

KERNEL = """
    #include "tiny_op.h"

    #include <cmath>

    namespace opsdk_op_tiny {

    template <typename T>
    void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
        if (attrs.mode == "todo") OPSDK_NOT_IMPLEMENTED();
        OPSDK_REQUIRE(attrs.mode != "fail", "mode fail with p = " << dims.p);
        for (int64_t i = 0; i < dims.n; ++i)
            for (int64_t j = 0; j < dims.m; ++j) {
                T acc = 0;
                for (int64_t k = 0; k < dims.p; ++k) acc += std::abs(in.x[i * dims.p + k] - in.y[j * dims.p + k]);
                out.z[i * dims.m + j] = acc;
            }
        int64_t rows = 1;
        for (int64_t b : dims.batch) rows *= b;
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < dims.p + 1; ++c)
                out.s[r * (dims.p + 1) + c] = in.w[r * 3] + in.w[r * 3 + 1] + in.w[r * 3 + 2];
    }

    }  // namespace opsdk_op_tiny
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = write_workspace(tmp_path_factory.mktemp("tiny_ws"), {"tiny": TINY}, {"tiny_cpu.cc": KERNEL})
    spec = parse_one(root, "tiny")
    cpp = root / "generated" / "cpp"
    cpp.mkdir(parents=True)
    (cpp / "tiny_op.h").write_text(render.render_op_header(spec))
    (cpp / "tiny_binding.cc").write_text(render.render_binding(spec))
    (cpp / "tiny_kernel.cc").write_text(render.render_kernel_unit(spec))
    target = root / f"_tiny_glue{sysconfig.get_config_var('EXT_SUFFIX')}"
    command = ["g++", "-O1", "-std=c++17", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
               "-DOPSDK_MODULE_NAME=_tiny_glue", f"-I{root}", f"-I{cpp}", f"-I{INCLUDE}",
               f"-I{pybind11.get_include()}", f"-I{sysconfig.get_paths()['include']}",
               str(cpp / "tiny_binding.cc"), str(cpp / "tiny_kernel.cc"), "-o", str(target)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    module_spec = importlib.util.spec_from_file_location("_tiny_glue", target)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return spec, module


def _inputs(dtype=np.float32, n=3, m=4, p=5, batch=(2,)):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, p)).astype(dtype)
    y = rng.standard_normal((m, p)).astype(dtype)
    w = rng.standard_normal(batch + (3,)).astype(dtype)
    return x, y, w


pytestmark = pytest.mark.slow


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_runs_and_dispatches(built, dtype):
    _, module = built
    x, y, w = _inputs(dtype)
    z, s = module.cpu(x, y, w, "run")
    assert z.dtype == dtype and s.dtype == dtype
    np.testing.assert_allclose(z, np.abs(x[:, None] - y[None]).sum(-1), rtol=1e-5)
    assert s.shape == (2, 6)
    np.testing.assert_allclose(s, np.repeat(w.sum(-1, keepdims=True), 6, axis=1), rtol=1e-5)
    assert z.flags.writeable and z.flags.c_contiguous


def _same_as_infer(spec, module, x, y, w):
    """The glue raises the error infer_outputs raises, with the same text."""
    with pytest.raises(OpError) as expected:
        infer_outputs(spec, [x.shape, y.shape, w.shape], [x.dtype, y.dtype, w.dtype], {"mode": "run"})
    with pytest.raises((ValueError, TypeError)) as got:
        module.cpu(x, y, w, "run")
    assert str(got.value) == str(expected.value)
    return got


def test_bound_dim_message(built):
    spec, module = built
    x, y, w = _inputs()
    got = _same_as_infer(spec, module, x, y[:, :4], w)
    assert str(got.value) == "tiny: input 'y' has 4 columns but x has 5 (dim p)"


def test_rank_messages(built):
    spec, module = built
    x, y, w = _inputs()
    got = _same_as_infer(spec, module, x[None], y, w)
    assert str(got.value) == "tiny: input 'x' must have rank 2 ([n, p]), got rank 3"
    _same_as_infer(spec, module, x, y, np.zeros((), np.float32))


def test_const_dim_and_ellipsis_messages(built):
    spec, module = built
    x, y, w = _inputs()
    _same_as_infer(spec, module, x, y, w[:, :2].copy())  # rank 2 at run time: "2 columns"
    _same_as_infer(spec, module, x, y, np.zeros((2, 2, 4), np.float32))  # "size 4 in axis 2"


def test_dtype_messages(built):
    spec, module = built
    x, y, w = _inputs()
    with pytest.raises(TypeError, match=r"^tiny: input 'x' has dtype int64; expected float32 or float64 "
                                        r"\(type attr T\)$"):
        module.cpu(x.astype(np.int64), y, w, "run")
    with pytest.raises(TypeError, match=r"^tiny: inputs 'x' and 'y' share type attr T but have float32 "
                                        r"and float64$"):
        module.cpu(x, y.astype(np.float64), w, "run")
    with pytest.raises(TypeError, match="must be a numpy.ndarray, got list"):
        module.cpu(x.tolist(), y, w, "run")


def test_contiguity_message(built):
    _, module = built
    x, y, w = _inputs()
    with pytest.raises(ValueError, match=r"^tiny: input 'x' is not C-contiguous; pass "
                                         r"np.ascontiguousarray\(x\)$"):
        module.cpu(np.asfortranarray(x), y, w, "run")


def test_kernel_errors(built):
    _, module = built
    x, y, w = _inputs()
    with pytest.raises(NotImplementedError) as todo:
        module.cpu(x, y, w, "todo")
    assert str(todo.value) == "op 'tiny': kernel body not written yet (opdefs/tiny_cpu.cc)"
    with pytest.raises(ValueError) as fail:
        module.cpu(x, y, w, "fail")
    line = next(i for i, text in enumerate(KERNEL.strip().splitlines(), 1) if "OPSDK_REQUIRE" in text)
    assert str(fail.value) == f"tiny: mode fail with p = 5 (opdefs/tiny_cpu.cc:{line})"


def test_empty_dims(built):
    _, module = built
    x, y, w = _inputs(n=0, m=0, batch=(0, 2))
    z, s = module.cpu(x, y, w, "run")
    assert z.shape == (0, 0) and s.shape == (0, 2, 6)
