"""Fused GPU regions that end in a reduction: a sum or mean over trailing axes of a GPU region's
value, placed where the region is, ends it (compile/fuse.py), and the generated rows kernels
(templates/fused/fused_cuda.cu.j2, launched as kernels/fused_cuda.py:rows_launch says) give the
unfused graph's results. Without a GPU (CI): the pass with placement told a GPU is there, and the
launches chosen; the kernels themselves run on the host in tests/codegen/test_fused_cuda_rows.py.
The tests marked gpu need CuPy and a CUDA device (the `cupy` fixture skips them otherwise); the
CPU's fused reductions are tests/runtime/test_fusion_reductions.py's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from opsdk.registry.elementwise import FusedKernel, Var, parse_expression, substitute
from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.devices.cuda import CudaDevice
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import Graph, device, placeholder
from opsdk.runtime.kernels.fused import fusion_compiler, wait_for_fused_kernels
from test_fusion import _graphs, _run
from test_fusion_reductions import check_random_region_ending_in_a_reduction
# _own_cache (autouse): each test's own kernel cache; pretend_gpu: placement sees a GPU
from test_fusion_cuda import GPU, _fused_program, _own_cache, pretend_gpu  # noqa: F401


def _mean_square(registry, dtype, shape, reduction="reduce_mean", axes=(-1,), keepdims=False,
                 where=GPU):
    """d = x - y, sq = d * d and r = reduce(sq) on the GPU (the reduction under `where`)."""
    g = Graph()
    with g.as_default(), device(GPU):
        x = placeholder(np.dtype(dtype).name, list(shape), name="x")
        y = placeholder(np.dtype(dtype).name, list(shape), name="y")
        d = apply_op(registry, "sub", [x, y], {}, name="d")
        sq = apply_op(registry, "square", [d], {}, name="sq")
        with device(where):
            r = apply_op(registry, reduction, [sq], {"axes": list(axes), "keepdims": keepdims},
                         name="r")
    return g, x, y, d, sq, r


needs_cuda_compiler = pytest.mark.skipif(
    fusion_compiler("cuda") is None or fusion_compiler("cuda").problem(),
    reason="no cuda fusion compiler here (needs CuPy with NVRTC: pip install '.[gpu]' and pip "
           "install -e .)")


@needs_cuda_compiler
@pytest.mark.parametrize("reduction, axes, keepdims, k", [
    ("reduce_sum", [], False, 3), ("reduce_mean", [-1], True, 1), ("reduce_sum", [1, 2], True, 2),
    ("reduce_mean", [-2, -1], False, 2)])
def test_a_gpu_region_ends_in_a_sum_or_mean_over_trailing_axes(registry, pretend_gpu,
                                                              reduction, axes, keepdims, k):
    g, x, y, d, sq, r = _mean_square(registry, np.float32, (30, 20, 50), reduction, axes,
                                     keepdims)
    program, nodes = _fused_program(g, r, [x, y])
    (node,) = nodes
    assert node.attrs["target"] == "cuda" and isinstance(program.device[node], CudaDevice)
    assert [op.name for op in node.attrs["region"]] == ["d", "sq", "r"]
    assert node.attrs["reduced"] == (k, keepdims)
    kernel = node.attrs["kernel"]
    assert kernel.reduction == ("sum" if reduction == "reduce_sum" else "mean", "t1")
    assert kernel.outputs == ("t2",)  # the squares are summed as computed, never written
    assert node.outputs[0].shape == r.shape
    assert program.report["fuse"][0].startswith("d, sq, r -> r/fused (kernel ")


@needs_cuda_compiler
def test_a_gpu_region_read_outside_still_writes_that_value(registry, pretend_gpu):
    g, x, y, d, sq, r = _mean_square(registry, np.float64, (8, 4096))
    program, (node,) = _fused_program(g, [r, d], [x, y])
    assert node.attrs["kernel"].outputs == ("t0", "t2") and node.attrs["reduced"] == (1, False)


@needs_cuda_compiler
@pytest.mark.parametrize("where, axes", [("/cpu:0", [-1]), (GPU, [0])],
                         ids=["reduction-on-the-host", "leading-axis"])
def test_a_reduction_elsewhere_or_over_a_leading_axis_stays_a_node_of_its_own(
        registry, pretend_gpu, where, axes):
    """A reduction placed on the host reads the GPU region's value and runs on the host (the
    GPU's kernel must not take it over); one over a leading axis sums no contiguous rows."""
    g, x, y, d, sq, r = _mean_square(registry, np.float32, (30, 50), axes=axes, where=where)
    program, (node,) = _fused_program(g, r, [x, y])
    assert [op.name for op in node.attrs["region"]] == ["d", "sq"]
    assert node.attrs["reduced"] is None and node.attrs["kernel"].reduction is None
    (reader,) = [op for op in program.ops if op.name == "r"]
    assert program.device[reader].is_host == (where == "/cpu:0")


@pytest.mark.parametrize("rows, inner, sms", [(1, 1 << 24, 132), (1 << 24, 1, 132),
                                              (4096, 4096, 132), (7, 3000, 80), (1, 1, 1),
                                              (3, 0, 2), (5000, 2000, 132), (2, 4097, 4)])
def test_every_launch_covers_each_row_once_and_keeps_the_gpu_busy(rows, inner, sms):
    from opsdk.runtime.kernels.fused_cuda import BLOCK, BLOCKS_PER_SM, MIN_CHUNK, WARP, \
        WARP_ROW, rows_launch

    launch = rows_launch(rows, inner, sms)
    full = sms * BLOCKS_PER_SM
    assert 1 <= launch.blocks <= full and launch.parts >= 1
    # The segments of a row cover it exactly: none empty, none past its end.
    assert launch.chunk * (launch.parts - 1) < max(inner, 1) <= launch.chunk * launch.parts
    if inner <= WARP_ROW:
        assert launch.group == WARP and launch.parts == 1
        assert launch.blocks == min(-(-rows // (BLOCK // WARP)), full)
    else:
        assert launch.group == BLOCK
        assert launch.blocks == min(rows * launch.parts, full)
        if launch.parts > 1:
            assert launch.chunk >= MIN_CHUNK and rows < full
    if (rows, inner) == (1, 1 << 24):  # one long row fills the GPU, not one block
        assert launch.blocks == full and launch.parts == full


# -- on a GPU: regions ending in a reduction ------------------------------------------------------
def _feeds(x, y, shape, dtype, seed=7):
    rng = np.random.default_rng(seed)
    return {x: rng.normal(size=shape).astype(dtype), y: rng.normal(size=shape).astype(dtype)}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction, axes, keepdims, inner", [
    ("reduce_sum", [], False, 30 * 20 * 50), ("reduce_mean", [], True, 30 * 20 * 50),
    ("reduce_sum", [-1], True, 50), ("reduce_mean", [2], False, 50),
    ("reduce_sum", [1, -1], False, 20 * 50), ("reduce_mean", [-2, -1], True, 20 * 50)])
def test_a_fused_gpu_reduction_equals_the_unfused_one(registry, cupy, dtype, reduction, axes,
                                                       keepdims, inner):
    """The CPU's cases (tests/runtime/test_fusion_reductions.py) and its tolerances, on the GPU;
    the difference, read outside, is still written elementwise."""
    shape = (30, 20, 50)
    g, x, y, d, sq, r = _mean_square(registry, dtype, shape, reduction, axes, keepdims)
    feeds = _feeds(x, y, shape, dtype)
    (got, got_d), explanation = _run(g, [r, d], feeds, fuse=True)
    (want, want_d), _ = _run(g, [r, d], feeds, fuse=False)
    line = explanation.lines_of("fuse")[0]
    assert line.startswith("d, sq, r -> r/fused (kernel ") and line.endswith(".cu)"), line
    assert explanation.placement["r"].endswith("GPU:0")
    assert got.shape == want.shape and got.dtype == want.dtype
    eps = 1e-6 if dtype == "float32" else 1e-13
    summed = inner if reduction == "reduce_sum" else 1
    np.testing.assert_allclose(got, want, rtol=eps * 10, atol=eps * summed)
    np.testing.assert_array_equal(got_d, want_d)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, reduction, keepdims", [("float32", "reduce_mean", True),
                                                        ("float64", "reduce_sum", False)])
@pytest.mark.parametrize("shape, axes", [
    ((1, 1 << 24), [-1]), ((1 << 24, 1), [-1]), ((4096, 4096), [-1]), ((7, 3, 1000), [-2, -1]),
    ((100, 1000), [-1]), ((1,), [])],
    ids=["1-row-of-16M", "16M-rows-of-1", "4096-rows-of-4096", "7-rows-of-3000",
         "100-rows-of-1000", "one-element"])
def test_fused_gpu_reductions_of_rows_from_one_to_many(registry, cupy, dtype, reduction,
                                                       keepdims, shape, axes):
    """Every launch (a warp per short row, a block per long one, long rows split across blocks
    and finished): each row's sum within float32's (float64's) rounding of the exact sum of the
    very terms the unfused graph computes, and of the unfused result within the error a float32
    accumulation (CuPy's) may have. (Every kind, keepdims and dtype: the test above; here two of
    their combinations, so 16M-element cases stay few.)"""
    g, x, y, d, sq, r = _mean_square(registry, dtype, shape, reduction, axes, keepdims)
    feeds = _feeds(x, y, shape, dtype)
    got, explanation = _run(g, r, feeds, fuse=True)
    want, _ = _run(g, r, feeds, fuse=False)
    terms, _ = _run(g, sq, feeds, fuse=False)
    assert "d, sq, r -> r/fused" in explanation.lines_of("fuse")[0]
    k = len(axes) if axes else len(shape)
    exact = terms.astype(np.float64).sum(axis=tuple(range(len(shape) - k, len(shape))),
                                         keepdims=keepdims)
    if reduction == "reduce_mean":
        exact = exact / int(np.prod(shape[len(shape) - k:]))
    assert got.shape == want.shape == exact.shape and got.dtype == np.dtype(dtype)
    eps = 1e-6 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(got, exact, rtol=eps, atol=0)  # summed in double: one rounding
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == "float32" else 1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("keepdims", [False, True])
def test_gradients_through_a_fused_gpu_reduction_equal_the_unfused_ones(registry, cupy,
                                                                        keepdims):
    """loss = mean over rows of (tanh(x) - y)^2, summed: reduce_mean's gradient broadcasts back
    over the row; the forward's difference is read by the gradient, so the fused kernel writes it
    besides the row means."""
    shape = (64, 3000)
    g = Graph()
    with g.as_default(), device(GPU):
        x = placeholder("float64", list(shape), name="x")
        y = placeholder("float64", list(shape), name="y")
        diff = apply_op(registry, "sub", [apply_op(registry, "tanh", [x], {}), y], {}, name="diff")
        means = apply_op(registry, "reduce_mean", [apply_op(registry, "square", [diff], {})],
                         {"axes": [-1], "keepdims": keepdims}, name="means")
        loss = apply_op(registry, "reduce_sum", [means], {}, name="loss")
        (dx,) = gradients([loss], [x])
    feeds = _feeds(x, y, shape, "float64")
    (got, got_dx), explanation = _run(g, [loss, dx], feeds, fuse=True)
    (want, want_dx), _ = _run(g, [loss, dx], feeds, fuse=False)
    assert any("-> means/fused" in line for line in explanation.lines_of("fuse"))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got_dx, want_dx, rtol=1e-12, atol=1e-15)


@pytest.mark.gpu
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=_graphs(), mean=st.booleans())
def test_random_gpu_regions_ending_in_a_reduction_equal_unfused(registry, cupy, case, mean):
    """The CPU's hypothesis test on the GPU: one row of N elements, split across blocks and
    finished."""
    check_random_region_ending_in_a_reduction(registry, case, mean, GPU)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["sum", "mean"])
def test_a_fused_gpu_reduction_call_reads_views_single_values_and_empty_rows(cupy, kind):
    """The rows kernel called directly: a view at an offset, a single value given as a host
    scalar, rows over one and two trailing axes, no rows at all and rows of no elements (a sum
    of nothing is 0, a mean NaN, as NumPy's); shapes that do not fit one pass give None."""
    from opsdk.runtime.devices import get_device
    from opsdk.runtime.kernels.fused_cuda import cuda_fused_call

    expr = substitute(parse_expression("tanh(x) * s", frozenset({"x", "s"})),
                      {"x": Var("in0"), "s": Var("in1")})
    kernel = FusedKernel("float32", ("array", "scalar"), (("t0", expr),), ("t0", "t1"),
                         (kind, "t0"))
    gpu = get_device(GPU)
    call = cuda_fused_call(kernel, gpu)
    assert wait_for_fused_kernels(300) and call.ready, call.failed
    s = np.float32(0.5)
    flat = cupy.asarray(np.random.default_rng(2).normal(size=6 * 7 * 3001 + 1).astype(np.float32))
    for x, reduced in ((flat[1:].reshape(6, 7, 3001), (1, False)),
                       (flat[1:].reshape(6, 7, 3001), (2, True)),
                       (cupy.ones((0, 5), cupy.float32), (1, False)),
                       (cupy.ones((3, 0), cupy.float32), (1, True))):
        values, total = call(gpu, [x, s], 2, reduced)
        terms = np.tanh(cupy.asnumpy(x)) * s
        np.testing.assert_allclose(cupy.asnumpy(values), terms, rtol=1e-6, atol=1e-6)
        axes = tuple(range(x.ndim - reduced[0], x.ndim))
        want = terms.astype(np.float64).sum(axis=axes, keepdims=reduced[1])
        # The terms have both signs and NumPy's tanh may differ from CUDA's by an ulp: bound
        # the error by the terms' total, not the (possibly cancelling) sum.
        scale = np.abs(terms).astype(np.float64).sum(axis=axes, keepdims=reduced[1])
        if kind == "mean":
            count = int(np.prod(x.shape[x.ndim - reduced[0]:]))
            with np.errstate(invalid="ignore"):
                want, scale = want / count, scale / max(count, 1)
        assert total.shape == want.shape and total.dtype == np.float32
        got = cupy.asnumpy(total)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        known = ~np.isnan(want)
        error = np.abs(got - want)[known]
        assert np.all(error <= 1e-6 * (scale + np.abs(want))[known]), (reduced, error.max())
    x = flat[1:].reshape(6, 7, 3001)
    assert call(gpu, [x, cupy.ones(2, cupy.float32)], 2, (1, False)) is None
