"""Given outputs of the CPU glue, compiled with g++ and called: the kernel writes into the arrays
the caller gives (one per output, a list for a list output), which must be writeable,
C-contiguous, of the declared dtype and shape, and apart from every input the output's `inplace`
does not name."""

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

INCLUDE = Path(render.__file__).resolve().parents[1] / "include"

GIVEN_OP = """
    op: given_op
    summary: y = 2 x + w, and x's columns as a list.
    type_attrs:
      T: [float32, float64]
    attrs:
      N: {type: int, default: 2, min: 1}
    inputs:
      x: {dtype: T, shape: [n, k]}
      w: {dtype: T, shape: [n, k]}
    outputs:
      y: {dtype: T, shape: [n, k], inplace: [x]}
      cols: {dtype: T, shape: [n], list: N}
    gradient: null
    kernels:
      cpu: given_op_cpu.cc
"""

KERNEL = """
    #include "given_op_op.h"

    namespace opsdk_op_given_op {

    template <typename T>
    void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
        OPSDK_REQUIRE(dims.k == attrs.N, "k must equal N");
        for (int64_t j = 0; j < attrs.N; ++j)  // before y, which may be x's own buffer
            for (int64_t r = 0; r < dims.n; ++r) out.cols[j][r] = in.x[r * dims.k + j];
        for (int64_t i = 0; i < dims.n * dims.k; ++i) out.y[i] = T(2) * in.x[i] + in.w[i];
    }

    }  // namespace opsdk_op_given_op
"""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cpu(tmp_path_factory):
    root = write_workspace(tmp_path_factory.mktemp("given_ws"), {"given_op": GIVEN_OP},
                           {"given_op_cpu.cc": KERNEL})
    spec = parse_one(root, "given_op")
    cpp = root / "generated" / "cpp"
    cpp.mkdir(parents=True)
    (cpp / "given_op_op.h").write_text(render.render_op_header(spec))
    (cpp / "given_op_binding.cc").write_text(render.render_binding(spec))
    (cpp / "given_op_kernel.cc").write_text(render.render_kernel_unit(spec))
    target = root / f"_given_glue{sysconfig.get_config_var('EXT_SUFFIX')}"
    command = ["g++", "-O1", "-std=c++17", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
               "-DOPSDK_MODULE_NAME=_given_glue", f"-I{root}", f"-I{cpp}", f"-I{INCLUDE}",
               f"-I{pybind11.get_include()}", f"-I{sysconfig.get_paths()['include']}",
               str(cpp / "given_op_binding.cc"), str(cpp / "given_op_kernel.cc"), "-o", str(target)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    module_spec = importlib.util.spec_from_file_location("_given_glue", target)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    assert module.given_outputs is True
    return module.cpu


def _inputs(dtype=np.float64):
    rng = np.random.default_rng(2)
    return rng.standard_normal((4, 3)).astype(dtype), rng.standard_normal((4, 3)).astype(dtype)


def test_given_outputs_are_written_and_returned(cpu):
    x, w = _inputs()
    want_y, want_cols = cpu(x, w, 3)
    y, cols = np.empty_like(x), [np.empty(4) for _ in range(3)]
    got_y, got_cols = cpu(x, w, 3, y, cols)
    assert got_y is y and all(a is b for a, b in zip(got_cols, cols))
    np.testing.assert_array_equal(y, want_y)
    for a, b in zip(cols, want_cols):
        np.testing.assert_array_equal(a, b)


def test_an_output_may_be_written_into_an_input_its_inplace_names(cpu):
    x, w = _inputs()
    want_y, _ = cpu(x, w, 3)
    buf = x.copy()
    y, _ = cpu(buf, w, 3, buf, [np.empty(4) for _ in range(3)])
    assert y is buf
    np.testing.assert_array_equal(buf, want_y)


def test_wrong_given_outputs_are_errors_naming_op_and_output(cpu):
    x, w = _inputs()
    cols = [np.empty(4) for _ in range(3)]
    with pytest.raises(ValueError, match=r"^given_op: output 'y' shares memory with input 'w', "
                                         r"which the op does not declare inplace for it$"):
        cpu(x, w, 3, w, cols)
    with pytest.raises(ValueError, match=r"^given_op: output 'cols' must be a C-contiguous "
                                         r"float64 array of shape \(4,\), got float32 \(4,\)$"):
        cpu(x, w, 3, np.empty_like(x), [np.empty(4), np.empty(4, np.float32), np.empty(4)])
    with pytest.raises(TypeError, match=r"^given_op: output 'cols' must be given as a list of 3 "
                                        r"arrays, got list$"):
        cpu(x, w, 3, np.empty_like(x), cols[:2])
    with pytest.raises(TypeError, match=r"^given_op: given outputs must be all 2 of them "
                                        r"\(y, cols\), after the inputs and attrs, or none; got 1$"):
        cpu(x, w, 3, np.empty_like(x))
    with pytest.raises(ValueError, match=r"^given_op: output 'y' must be .*\(not C-contiguous\)$"):
        cpu(x, w, 3, np.empty((4, 6))[:, ::2], cols)
