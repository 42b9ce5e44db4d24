"""The glue of free dims (`_`) and of input dims given by expressions, compiled and run: it checks
what graph-time inference checks, with the same words, and hands free dims to the kernel."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.build.driver import build_workspace
from opsdk.codegen.render import render_binding, render_cuda_binding
from opsdk.registry import load_registry
from opsdk.registry.errors import OpError
from opsdk.registry.infer import infer_outputs
from opsdk.runtime.kernels.loader import load_kernel

from codegen_fixtures import parse_one, write_workspace

pytestmark = pytest.mark.slow

STACK = """
    op: stack_rows
    summary: Per batch, row r of y is m copies of xs[0]'s free dim plus r (a kernel that reads its dims).
    attrs:
      k: {type: int, default: 2, min: 1}
    inputs:
      xs: {dtype: float64, shape: [..., "k + 1", _], list: N}
      s: {dtype: float64, shape: ["m * k"]}
      w: {dtype: float64, shape: [m]}
    outputs:
      y: {dtype: float64, shape: [..., "k + 1", m]}
    kernels: {cpu: stack_rows_cpu.cc}
    """

KERNEL = """
    #include "stack_rows_op.h"

    namespace opsdk_op_stack_rows {

    void cpu(const Inputs& in, Outputs& out, const Dims& dims, const Attrs& attrs) {
        int64_t batch = 1;
        for (int64_t b : dims.batch) batch *= b;
        const int64_t rows = attrs.k + 1;
        for (int64_t b = 0; b < batch; ++b)
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < dims.m; ++j) out.y[(b * rows + r) * dims.m + j] = double(dims.xs_1 + r);
        (void)in;
    }

    }  // namespace opsdk_op_stack_rows
    """


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = write_workspace(tmp_path_factory.mktemp("computed"), {"stack_rows": STACK},
                           {"stack_rows_cpu.cc": KERNEL})
    build_workspace(root, jobs=1, progress=False)
    spec = load_registry(root).get("stack_rows")
    return spec, load_kernel(spec, "cpu")


def _call(built, xs, s, w, k=2):
    spec, kernel = built
    return kernel(xs, s, w, k, len(xs))


def _infer_message(built, xs, s, w, k=2) -> str:
    spec, _ = built
    with pytest.raises(OpError) as info:
        infer_outputs(spec, [[x.shape for x in xs], s.shape, w.shape], ["float64"] * 3, {"k": k, "N": len(xs)})
    return str(info.value)


def test_free_dims_reach_the_kernel_and_outputs_use_the_expressions(built):
    xs = [np.zeros((2, 3, 5)), np.zeros((2, 3, 5))]
    y = _call(built, xs, np.zeros(8), np.zeros(4))
    assert y.shape == (2, 3, 4)
    np.testing.assert_array_equal(y[1, :, 0], [5, 6, 7])
    assert _call(built, [np.zeros((4, 1))], np.zeros(3), np.zeros(1), k=3).shape == (4, 1)


@pytest.mark.parametrize("xs, s, w, expected", [
    ([np.zeros((2, 3, 5)), np.zeros((2, 4, 5))], np.zeros(8), np.zeros(4),
     "stack_rows: input 'xs[1]' must have size 3 in axis 1 (k + 1), got 4"),
    ([np.zeros((2, 3, 5))], np.zeros(6), np.zeros(4), "stack_rows: input 's' must have size 8 in axis 0 (m * k), got 6"),
    ([np.zeros((2, 3, 5)), np.zeros((2, 3, 6))], np.zeros(8), np.zeros(4),
     "stack_rows: input 'xs[1]' has size 6 in axis 2 but xs[0] has 5 (dim xs_1)"),
    ([np.zeros((3,))], np.zeros(8), np.zeros(4), "stack_rows: input 'xs[0]' must have rank >= 2 ([..., k + 1, _]), "
                                                 "got rank 1"),
])
def test_the_glue_and_inference_refuse_alike(built, xs, s, w, expected):
    with pytest.raises(ValueError) as info:
        _call(built, xs, s, w)
    assert str(info.value) == expected
    assert _infer_message(built, xs, s, w) == expected


def test_only_ops_with_computed_input_dims_get_the_late_check(tmp_path):
    plain = STACK.replace("stack_rows", "plain").replace('"k + 1"', "r").replace('["m * k"]', "[q]")
    root = write_workspace(tmp_path, {"stack_rows": STACK, "plain": plain})
    for render in (render_binding, render_cuda_binding):
        text = render(parse_one(root, "stack_rows"))
        assert text.index("check_computed(a, dims, attrs);") > text.index("const Attrs attrs{")
        assert "if (arg.shape[0] != (dims.m * attrs.k))" in text
        assert "check_computed" not in render(parse_one(root, "plain"))


HALVES = """
    op: halves
    summary: The first n // k elements of x (an attr divides a dim; it has no min).
    attrs:
      k: {type: int, default: 2}
    inputs:
      x: {dtype: float64, shape: [n]}
    outputs:
      y: {dtype: float64, shape: ["n // k"]}
    kernels: {cpu: halves_cpu.cc}
    """

HALVES_KERNEL = """
    #include "halves_op.h"

    namespace opsdk_op_halves {

    void cpu(const Inputs& in, Outputs& out, const Dims&, const Attrs&) {
        for (int64_t i = 0; i < out.y.size(); ++i) out.y[i] = in.x[i];
    }

    }  // namespace opsdk_op_halves
    """


def test_a_zero_divisor_in_a_dim_expression_is_an_error_not_a_crash(tmp_path):
    root = write_workspace(tmp_path, {"halves": HALVES}, {"halves_cpu.cc": HALVES_KERNEL})
    build_workspace(root, jobs=1, cuda="off", progress=False)
    spec = load_registry(root).get("halves")
    kernel = load_kernel(spec, "cpu")
    np.testing.assert_array_equal(kernel(np.arange(5.0), 2), [0.0, 1.0])
    with pytest.raises(ValueError, match=r"^division by zero in a dim expression$"):
        kernel(np.arange(5.0), 0)  # the binding called directly: before, SIGFPE ended the process
    with pytest.raises(OpError, match=r"^halves: output 'y': division by zero in 'n // k'$"):
        infer_outputs(spec, [(5,)], ["float64"], {"k": 0})
