"""Fused regions that end in a reduction: a sum or mean over trailing axes joins the region on the
host, the region's last value is summed as it is computed, and results equal the unfused graph's
(within float tolerance: the fused kernel sums in double); a reduction over a leading axis, or a
value read after the reduction is left out. GPU regions ending in a reduction:
tests/runtime/test_fusion_cuda_reductions.py and tests/codegen/test_fused_cuda_rows.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from opsdk.registry.elementwise import Apply, FusedKernel, Var, kernel_problem
from opsdk.codegen.fused import render_fused_cpu, render_fused_cuda
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import Graph, device, placeholder

# _own_cache (autouse): each test's own kernel cache; pytestmark: skipped without a compiler
from test_fusion import CPU, _graphs, _own_cache, _run, pytestmark, random_graph  # noqa: F401

SHAPE = (30, 20, 50)


def _mean_square(registry, dtype: str, reduction: str, axes: list, keepdims: bool,
                 shape=SHAPE):
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder(dtype, [None, *shape[1:]], name="x")
        y = placeholder(dtype, [None, *shape[1:]], name="y")
        d = apply_op(registry, "sub", [x, y], {}, name="d")
        r = apply_op(registry, reduction, [apply_op(registry, "square", [d], {}, name="sq")],
                     {"axes": axes, "keepdims": keepdims}, name="r")
    rng = np.random.default_rng(7)
    feeds = {x: rng.normal(size=shape).astype(dtype), y: rng.normal(size=shape).astype(dtype)}
    return g, r, d, feeds


def _close(got, want, dtype: str, summed: int) -> None:
    # A sum of `summed` positive terms: bound the error by the terms' total, not the result.
    eps = 1e-6 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(got, want, rtol=eps * 10, atol=eps * summed)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction, axes, keepdims, inner", [
    ("reduce_sum", [], False, 30 * 20 * 50), ("reduce_mean", [], True, 30 * 20 * 50),
    ("reduce_sum", [-1], True, 50), ("reduce_mean", [2], False, 50),
    ("reduce_sum", [1, -1], False, 20 * 50), ("reduce_mean", [-2, -1], True, 20 * 50)])
def test_a_sum_or_mean_over_trailing_axes_ends_the_fused_region(registry, dtype, reduction,
                                                                 axes, keepdims, inner):
    g, r, d, feeds = _mean_square(registry, dtype, reduction, axes, keepdims)
    (got, got_d), explanation = _run(g, [r, d], feeds, fuse=True)
    (want, want_d), _ = _run(g, [r, d], feeds, fuse=False)
    assert explanation.lines_of("fuse")[0].startswith("d, sq, r -> r/fused (kernel ")
    assert got.shape == want.shape and got.dtype == want.dtype
    _close(got, want, dtype, inner if reduction == "reduce_sum" else 1)
    np.testing.assert_array_equal(got_d, want_d)  # a member read outside is still written


def test_a_reduction_over_a_leading_axis_is_left_out(registry):
    g, r, _, feeds = _mean_square(registry, "float64", "reduce_sum", [0], False)
    (got,), explanation = _run(g, [r], feeds, fuse=True)
    (want,), _ = _run(g, [r], feeds, fuse=False)
    assert explanation.lines_of("fuse")[0].startswith("d, sq -> sq/fused (kernel ")
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_a_value_computed_from_the_reduction_starts_a_new_region(registry):
    g, r, _, feeds = _mean_square(registry, "float64", "reduce_mean", [-1], True)
    with g.as_default(), device(CPU):
        z = apply_op(registry, "exp", [apply_op(registry, "neg", [r], {})], {}, name="z")
    (got,), explanation = _run(g, [z], feeds, fuse=False)
    (fused_z,), explanation = _run(g, [z], feeds, fuse=True)
    lines = explanation.lines_of("fuse")
    assert lines[0].startswith("d, sq, r -> r/fused") and "-> z/fused" not in lines[0]
    np.testing.assert_allclose(fused_z, got, rtol=1e-12)


def test_both_kernel_paths_agree_rows_shared_and_a_row_shared(registry):
    # Many rows: the threads share rows; one row (a sum of everything): they share its elements.
    for axes in ([-1], []):
        g, r, _, feeds = _mean_square(registry, "float32", "reduce_sum", axes, False,
                                      shape=(4, 1, 40000))
        (got,), _ = _run(g, [r], feeds, fuse=True)
        (want,), _ = _run(g, [r], feeds, fuse=False)
        _close(got, want, "float32", 160000)


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=_graphs(), mean=st.booleans())
def test_random_regions_ending_in_a_reduction_equal_unfused(registry, case, mean):
    check_random_region_ending_in_a_reduction(registry, case, mean, CPU)


def check_random_region_ending_in_a_reduction(registry, case, mean, where):
    """A `_graphs` region on `where` ending in a sum or mean: fused equals unfused, within the
    rounding of its terms."""
    dtype = case[0]
    g, values, feeds = random_graph(registry, case, where)
    with g.as_default(), device(where):
        r = apply_op(registry, "reduce_mean" if mean else "reduce_sum", [values[-1]], {})
    with np.errstate(all="ignore"):
        (got,), explanation = _run(g, [r], feeds, fuse=True)
        (want,), _ = _run(g, [r], feeds, fuse=False)
    if any(line.endswith("nothing fused") for line in explanation.lines_of("fuse")):
        return  # a one-node region: nothing to compare
    # The terms may cancel: bound the error by their total (unfused, in float64).
    (terms,), _ = _run(g, [values[-1]], feeds, fuse=False)
    with np.errstate(all="ignore"):
        scale = float(np.sum(np.abs(terms.astype(np.float64))))
    if not np.isfinite(scale):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        return
    scale /= terms.size if mean else 1
    eps = 1e-6 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(got, want, rtol=0, atol=eps * (scale + 1))


def _kernel(reduction) -> FusedKernel:
    square = Apply("*", (Var("in0"), Var("in0")))
    return FusedKernel("float32", ("array",), (("t0", square),), ("t0", "t1"), reduction)


def test_a_reduction_kernel_is_checked_and_rendered_for_both_targets():
    good = _kernel(("mean", "t0"))
    assert kernel_problem(good) is None
    source = render_fused_cpu(good)
    assert "opsdk_fused_rows" in source and "1.0 / static_cast<double>(inner)" in source
    assert kernel_problem(_kernel(("max", "t0"))) == \
        "reduction 'max': fused reductions are sum, mean"
    assert kernel_problem(_kernel(("sum", "t5"))) == \
        "the reduction reads t5, which no step computes"
    assert "opsdk_fused_rows(" in render_fused_cuda(good)
    with pytest.raises(ValueError, match="reduction 'max'"):
        render_fused_cuda(_kernel(("max", "t0")))
