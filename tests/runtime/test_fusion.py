"""Fusion: elementwise regions become one generated kernel; results equal the unfused graph's
(hypothesis over random elementwise graphs, broadcasting and dtypes included); the pass can be
switched off, says why it cannot run, runs unfused while compiling, and fuses gradients too."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from opsdk.registry.elementwise import FusedKernel, evaluate, parse_expression
from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.compile.pipeline import compile_program, new_program
from opsdk.runtime.compile.program import PlanOptions
from opsdk.runtime.exec.session import Session, SessionConfig
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import Graph, device, placeholder
from opsdk.runtime.kernels import fused
from opsdk.runtime.kernels.fused import compile_activity, fusion_compiler, set_fusion_compiler, \
    wait_for_fused_kernels

pytestmark = pytest.mark.skipif(fusion_compiler() is None or fusion_compiler().problem(),
                                reason="no fusion compiler here (needs g++ and pip install -e .)")

N = 5000  # above the size under which regions stay unfused
# These tests are about the CPU's fused kernels: every graph is built under this scope, since
# without one the nodes go to the GPU wherever CuPy sees one (the CUDA path has its own tests).
CPU = "/cpu:0"
UNARY = ("neg", "exp", "tanh", "sigmoid", "abs", "square", "relu")
BINARY = ("add", "sub", "mul", "maximum", "minimum")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSDK_FUSION_CACHE", str(tmp_path / "fused"))
    set_fusion_compiler(None)
    yield
    set_fusion_compiler(None)


def _run(graph, fetch, feeds, fuse: bool):
    off = frozenset() if fuse else frozenset({"fuse"})
    with Session(graph, SessionConfig(passes_off=off)) as sess:
        sess.run(fetch, feeds)
        assert wait_for_fused_kernels(300)
        return sess.run(fetch, feeds), sess.explain(fetch, {k: None for k in feeds}, show=False)


def _gelu(registry, x, dtype):
    def op(name, *args):
        return apply_op(registry, name, list(args), {})
    c = dtype.type
    inner = op("mul", c(0.7978845608), op("add", x, op("mul", c(0.044715), op("mul", x, op("mul", x, x)))))
    return op("mul", op("mul", c(0.5), x), op("add", c(1.0), op("tanh", inner)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_is_one_fused_kernel_with_the_unfused_result(registry, dtype):
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder(np.dtype(dtype).name, [N], name="x")
        y = _gelu(registry, x, np.dtype(dtype))
    value = np.random.default_rng(0).normal(size=N).astype(dtype) * 4
    got, explanation = _run(g, y, {x: value}, fuse=True)
    want, plain = _run(g, y, {x: value}, fuse=False)
    lines = explanation.lines_of("fuse")
    assert len(lines) == 1 and "-> mul_5/fused" in lines[0] and ".cc)" in lines[0]
    assert plain.lines_of("fuse") == ("off",)
    assert [op.type for op in explanation.partitions and []] == []
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


def test_a_fused_kernel_flushes_subnormals_as_the_compiled_kernels_do(registry):
    # opsdk/include/opsdk/float_mode.h. The unfused graph's NumPy kernels keep them.
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder("float32", [N], name="x")
        y = apply_op(registry, "add", [apply_op(registry, "mul", [x, np.float32(1.0)], {}), x], {})
    tiny = np.full(N, 1e-39, np.float32)  # subnormal: the smallest normal float32 is 1.2e-38
    fused_value, explanation = _run(g, y, {x: tiny}, fuse=True)
    plain_value, _ = _run(g, y, {x: tiny}, fuse=False)
    assert "/fused" in explanation.lines_of("fuse")[0]
    assert not fused_value.any()
    np.testing.assert_allclose(plain_value, 2e-39, rtol=1e-3)


def test_the_generated_source_is_where_explain_says(registry):
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder("float32", [N], name="x")
        y = _gelu(registry, x, np.dtype(np.float32))
    _, explanation = _run(g, y, {x: np.ones(N, np.float32)}, fuse=True)
    path = explanation.lines_of("fuse")[0].rsplit("source ", 1)[1].rstrip(")")
    with open(path) as f:
        text = f.read()
    assert "Do not edit" in text and "opsdk_tanh" in text


@st.composite
def _graphs(draw):
    """A random elementwise graph: a few inputs (full arrays or single values), unary and
    binary builtin ops over earlier values, and one or two fetched values."""
    dtype = draw(st.sampled_from(["float32", "float64"]))
    n_inputs = draw(st.integers(1, 3))
    scalars = [draw(st.booleans()) and i > 0 for i in range(n_inputs)]
    program = []
    for _ in range(draw(st.integers(2, 7))):
        if draw(st.booleans()):
            program.append((draw(st.sampled_from(UNARY)), (draw(st.integers(0, 50)),)))
        else:
            program.append((draw(st.sampled_from(BINARY)),
                            (draw(st.integers(0, 50)), draw(st.integers(0, 50)))))
    fetch_two = draw(st.booleans())
    seed = draw(st.integers(0, 2 ** 16))
    return dtype, scalars, program, fetch_two, seed


def random_graph(registry, case, where: str):
    """The graph a `_graphs` case describes, on device `where`: (graph, every value, feeds)."""
    dtype, scalars, program, _, seed = case
    rng = np.random.default_rng(seed)
    g = Graph()
    feeds = {}
    with g.as_default(), device(where):
        values = []
        for i, scalar in enumerate(scalars):
            shape = [1] if scalar else [N]
            x = placeholder(dtype, shape, name=f"x{i}")
            feeds[x] = rng.normal(size=shape).astype(dtype)
            values.append(x)
        for op_name, picks in program:
            args = [values[p % len(values)] for p in picks]
            if all(a.shape == (1,) for a in args):  # keep every node of the region's shape
                args[0] = values[0]
            values.append(apply_op(registry, op_name, args, {}))
    return g, values, feeds


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(_graphs())
def test_random_elementwise_graphs_fused_equal_unfused(registry, case):
    dtype, scalars, program, fetch_two, seed = case
    g, values, feeds = random_graph(registry, case, CPU)
    fetches = [values[-1], values[len(values) // 2 + len(scalars) // 2]] if fetch_two else \
        values[-1]
    with np.errstate(all="ignore"):
        got, _ = _run(g, fetches, feeds, fuse=True)
        want, _ = _run(g, fetches, feeds, fuse=False)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for a, b in zip(np.atleast_1d(got) if not fetch_two else got,
                    np.atleast_1d(want) if not fetch_two else want):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, equal_nan=True)


def test_gradients_of_a_fused_region_are_fused_and_equal(registry):
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder("float64", [N], name="x")
        y = apply_op(registry, "tanh", [apply_op(registry, "sigmoid", [
            apply_op(registry, "mul", [x, x], {})], {})], {})
        (dx,) = gradients([y], [x])
    value = np.linspace(-3, 3, N)
    got, explanation = _run(g, dx, {x: value}, fuse=True)
    want, _ = _run(g, dx, {x: value}, fuse=False)
    assert any("_grad" in line for line in explanation.lines_of("fuse"))
    np.testing.assert_allclose(got, want, rtol=1e-12)


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(_graphs())
def test_gradients_of_random_elementwise_graphs_fused_equal_unfused(registry, case):
    """The gradients of binary ops (mul_grad, div_grad, ...: one formula per output) join
    regions where neither input is broadcast; where one is (a single value), its gradient is a
    sum and that node stays apart. Fused or not, the gradients agree."""
    dtype, scalars, program, _, seed = case
    g, values, feeds = random_graph(registry, case, CPU)
    with g.as_default(), device(CPU):
        loss = apply_op(registry, "reduce_sum", [values[-1]], {})
        grads = [d for d in gradients([loss], list(feeds)) if d is not None]
    if not grads:
        return
    with np.errstate(all="ignore"):
        got, _ = _run(g, grads, feeds, fuse=True)
        want, _ = _run(g, grads, feeds, fuse=False)
    rtol = 1e-4 if dtype == "float32" else 1e-11
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, equal_nan=True)


@pytest.mark.parametrize("batch", [N, None])
def test_binary_gradients_fuse_with_their_region(registry, batch):
    """d/dx and d/dy of exp(x * y) / (x - y): mul_grad, div_grad and sub_grad have a formula per
    output, so the backward pass is one region with the elementwise gradients around them."""
    def op(name, *args):
        return apply_op(registry, name, list(args), {})
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder("float64", [batch], name="x")
        y = placeholder("float64", [batch], name="y")
        z = op("div", op("exp", op("mul", x, y)), op("sub", x, y))
        dx, dy = gradients([z], [x, y])
    rng = np.random.default_rng(2)
    feeds = {x: rng.uniform(-1, 1, N), y: rng.uniform(2, 3, N)}
    got, explanation = _run(g, [dx, dy], feeds, fuse=True)
    want, _ = _run(g, [dx, dy], feeds, fuse=False)
    grads = [line.split(" (kernel")[0] for line in explanation.lines_of("fuse")
             if "_grad" in line.split(" (kernel")[0]]
    assert len(grads) == 1 and all(f"{name}_grad" in grads[0] for name in ("mul", "div", "sub")), \
        explanation.lines_of("fuse")
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    if batch is None:  # a batch of 1 for x broadcasts at run time: the region runs unfused
        short = {x: feeds[x][:1], y: feeds[y]}
        got, _ = _run(g, [dx, dy], short, fuse=True)
        want, _ = _run(g, [dx, dy], short, fuse=False)
        assert got[0].shape == (1,) and got[1].shape == (N,)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-12)


def test_without_a_compiler_the_graph_runs_unfused_and_says_why_once(registry, caplog):
    class NoCompiler:
        def problem(self):
            return "no C++ compiler (g++ not found on PATH)"
    set_fusion_compiler(NoCompiler())
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder("float32", [N], name="x")
        y = _gelu(registry, x, np.dtype(np.float32))
    fused._said.clear()
    with caplog.at_level(logging.WARNING, logger="opsdk.fusion"):
        for _ in range(2):
            with Session(g) as sess:
                sess.run(y, {x: np.ones(N, np.float32)})
                explanation = sess.explain(y, {x: None}, show=False)
    assert explanation.lines_of("fuse") == ("nothing fused: no C++ compiler (g++ not found on "
                                            "PATH)",)
    said = [r for r in caplog.records if "run unfused" in r.getMessage()]
    assert len(said) == 1


def test_while_the_kernel_compiles_the_region_runs_unfused(registry):
    release = threading.Event()
    real = fusion_compiler()

    class SlowCompiler:
        def problem(self):
            return None

        def cached(self, kernel):
            return None

        def source_path(self, kernel):
            return real.source_path(kernel)

        def compile(self, kernel):
            release.wait(60)
            return real.compile(kernel)
    set_fusion_compiler(SlowCompiler())
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder("float64", [N], name="x")
        y = _gelu(registry, x, np.dtype(np.float64))
    value = np.linspace(-2, 2, N)
    assert wait_for_fused_kernels(120)  # (any compile an earlier test began)
    started, finished = compile_activity()
    assert started == finished
    with Session(g) as sess:
        before = sess.run(y, {x: value})  # not compiled yet: the members run one by one
        assert compile_activity() == (started + 1, finished)  # what a step's timing is told
        release.set()
        assert wait_for_fused_kernels(120)
        after = sess.run(y, {x: value})
    np.testing.assert_allclose(before, after, rtol=1e-13)
    assert compile_activity() == (started + 1, finished + 1)


def test_a_second_process_finds_the_compiled_kernel_at_once(registry, tmp_path):
    kernel = FusedKernel("float32", ("array",), (("t0", parse_expression(
        "tanh(in0) * 2", frozenset({"in0"}))),), ("t0",))
    fusion_compiler().compile(kernel)
    script = textwrap.dedent(f"""
        from opsdk.registry.elementwise import FusedKernel, parse_expression
        from opsdk.runtime.kernels.fused import fused_call
        kernel = FusedKernel("float32", ("array",), (("t0", parse_expression(
            "tanh(in0) * 2", frozenset({{"in0"}}))),), ("t0",))
        call = fused_call(kernel)
        print("ready" if call.ready and call.future is None else "compiling")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "ready", out.stderr


@pytest.mark.parametrize("text", ["exp(x)", "tanh(x)", "sigmoid(x)", "sqrt(abs(x))",
                                  "max(x, y)", "min(x, y)", "where(x > y, x, y * 2)",
                                  "(x <= y) - (x != y) + (x == y)", "-x / (y * y + 1)"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_each_function_of_the_language_matches_its_numpy_meaning(text, dtype):
    """The generated C++ against `evaluate` (the language's executable meaning), on values
    that include zeros, huge and tiny magnitudes, infinities and NaN."""
    expr = parse_expression(text, frozenset({"x", "y"}))
    from opsdk.registry.elementwise import substitute, Var
    kernel = FusedKernel(dtype, ("array", "array"),
                         (("t0", substitute(expr, {"x": Var("in0"), "y": Var("in1")})),),
                         ("t0",))
    special = [0.0, -0.0, 1e-30, -1e-30, 0.01, 0.5, 1.0, 20.0, 88.0, 700.0, 720.0, -750.0,
               np.inf, -np.inf, np.nan]
    rng = np.random.default_rng(1)
    x = np.concatenate([special, rng.normal(size=4096) * 10]).astype(dtype)
    y = np.concatenate([special[::-1], rng.normal(size=4096)]).astype(dtype)
    call = fused.FusedCall(kernel)
    call.load(fusion_compiler().compile(kernel))
    out = np.empty_like(x)
    call([x, y], [out], x.size, 1)
    with np.errstate(all="ignore"):
        want = np.asarray(evaluate(expr, {"x": x.astype(np.float64), "y": y.astype(np.float64)},
                                   np), dtype=np.float64).astype(dtype)
    rtol = 2e-7 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(out, want, rtol=rtol, atol=1e-300, equal_nan=True)


def test_two_regions_that_would_feed_each_other_are_not_both_fused(registry):
    """A = {a1, a2} and B = {b2, b1}, each of unconnected members: a1 -> matmul -> b1 and
    b2 -> matmul -> a2. Each region alone has no path out and back, but fused together they
    would feed each other: a cycle, which once dropped nodes from the step (a TF1 VAE program's
    fetched loss had no slot). One of the two stays unfused, and every fetch is computed."""
    def op(name, *args):
        return apply_op(registry, name, list(args), {})
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder("float32", [64, 64], name="x")
        w = placeholder("float32", [64, 64], name="w")
        a1 = op("exp", x)
        b2 = op("tanh", x)
        m1 = op("matmul", a1, w)
        m2 = op("matmul", b2, w)
        b1 = op("add", b2, m1)
        a2 = op("add", a1, m2)
        total = op("reduce_sum", op("add", a2, b1))
    rng = np.random.default_rng(0)
    feeds = {x: rng.normal(size=(64, 64)).astype(np.float32) * 0.1,
             w: rng.normal(size=(64, 64)).astype(np.float32) * 0.1}
    got, explanation = _run(g, [a2, b1, total], feeds, fuse=True)
    want, _ = _run(g, [a2, b1, total], feeds, fuse=False)
    for g_, w_ in zip(got, want):
        np.testing.assert_allclose(g_, w_, rtol=1e-5, atol=1e-5)
    assert any("/fused" in line for line in explanation.lines_of("fuse")), explanation.lines_of("fuse")


def test_a_region_member_fetched_as_an_operation_or_waited_for_runs_fused(registry):
    """A member run for itself (fetched as an operation) or read through a control edge is an
    output of the fused node, which stands for it: the region once had no output at all, and
    its kernel failed to render ("an output that no step computes")."""
    def op(name, *args):
        return apply_op(registry, name, list(args), {})
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder("float32", [N], name="x")
        w = placeholder("float32", [N], name="w")
        inner = op("tanh", op("mul", x, x))
        y = op("exp", inner)
        with g.control_dependencies([inner]):
            z = op("add", w, w)
    feeds = {x: np.full(N, 0.5, np.float32), w: np.ones(N, np.float32)}
    for fetch in (y.op, [y.op, z]):
        _, explanation = _run(g, fetch, feeds, fuse=True)
        (line,) = explanation.lines_of("fuse")
        assert "mul, tanh, exp -> exp/fused" in line, line
    got, _ = _run(g, [z, y], feeds, fuse=True)
    np.testing.assert_allclose(got[1], np.exp(np.tanh(np.float32(0.25))), rtol=1e-6)
    program = compile_program(new_program([y.op], [x], PlanOptions()))
    (part,) = program.partitions.values()
    exported = part.to_graph()  # a task's graph names the member it must run
    assert exported.targets == ("exp",)
    assert [o.type for o in exported.graph.operations].count("exp") == 1


def test_a_region_starts_only_at_a_node_whose_inputs_one_pass_can_read(registry):
    # A column ([n, 1] over [n, C]) is neither the region's shape, one value nor its trailing
    # axes. Such an input once started a region whose kernel read it as one value: every step
    # then found the shapes unfit and ran the region unfused after all.
    def op(name, *args):
        return apply_op(registry, name, list(args), {})
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder("float32", [512, 32], name="x")
        b = placeholder("float32", [512, 1], name="b")
        y = op("exp", op("relu", op("add", x, b)))
    rng = np.random.default_rng(0)
    feeds = {x: rng.normal(size=(512, 32)).astype(np.float32),
             b: rng.normal(size=(512, 1)).astype(np.float32)}
    got, explanation = _run(g, y, feeds, fuse=True)
    want, _ = _run(g, y, feeds, fuse=False)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    lines = explanation.lines_of("fuse")
    assert len(lines) == 1 and lines[0].startswith("relu, exp -> exp/fused"), lines


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, bias", [
    ((50, 28, 28, 32), (32,)),       # a conv layer's bias add
    ((37, 33), (33,)),               # a period that does not divide a block, a ragged tail
    ((5, 7, 3), (7, 3)),             # two trailing axes
    ((300, 3), (1, 3)),              # leading 1s
    ((3, 4096), (4096,)),            # the longest period kept
])
def test_a_bias_of_the_trailing_axes_is_read_in_the_fused_pass(registry, dtype, shape, bias):
    def op(name, *args):
        return apply_op(registry, name, list(args), {})
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder(dtype, [None, *shape[1:]], name="x")  # the batch known only at run time
        b = placeholder(dtype, list(bias), name="b")
        h = op("relu", op("add", x, b))
        y = op("mul", op("sub", h, b), op("tanh", h))
        total = apply_op(registry, "reduce_sum", [op("square", op("add", y, b))],
                         {"axes": [-1], "keepdims": False})
    rng = np.random.default_rng(1)
    feeds = {x: rng.normal(size=shape).astype(dtype), b: rng.normal(size=bias).astype(dtype)}
    got, explanation = _run(g, [y, total], feeds, fuse=True)
    want, _ = _run(g, [y, total], feeds, fuse=False)
    lines = explanation.lines_of("fuse")
    assert len(lines) == 1 and "add, relu" in lines[0] and "/fused" in lines[0], lines
    tol = 1e-5 if dtype == "float32" else 1e-12
    for g_, w_ in zip(got, want):
        np.testing.assert_allclose(g_, w_, rtol=tol, atol=tol)


def test_a_bias_longer_than_the_kept_period_is_not_fused(registry):
    from opsdk.runtime.compile.fuse import MAX_PERIOD
    def op(name, *args):
        return apply_op(registry, name, list(args), {})
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder("float32", [2, MAX_PERIOD + 1], name="x")
        b = placeholder("float32", [MAX_PERIOD + 1], name="b")
        y = op("exp", op("relu", op("add", x, b)))
    feeds = {x: np.ones((2, MAX_PERIOD + 1), np.float32), b: np.ones(MAX_PERIOD + 1, np.float32)}
    got, explanation = _run(g, y, feeds, fuse=True)
    assert explanation.lines_of("fuse")[0].startswith("relu, exp -> exp/fused")
    np.testing.assert_allclose(got, np.exp(2.0), rtol=1e-6)


@pytest.mark.parametrize("reduced", [False, True])
def test_the_extension_and_ctypes_call_a_kernel_alike(registry, monkeypatch, reduced):
    # kernels/_fusedcall.c reads the arrays' pointers through the buffer protocol, where ctypes
    # read each through `__array_interface__`: both calls give the same values, bit for bit
    if fused._native is None:
        pytest.skip("the _fusedcall extension was not compiled at install (no C compiler): "
                    "fused kernels are called through ctypes, which the other tests check")
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder("float32", [80, 64], name="x")  # (a region under 4096 stays unfused)
        y = _gelu(registry, x, np.dtype("float32"))
        if reduced:
            y = apply_op(registry, "reduce_sum", [y], {"axes": [-1], "keepdims": False})
    value = {x: np.random.default_rng(3).normal(size=(80, 64)).astype(np.float32)}
    native, explanation = _run(g, y, value, fuse=True)
    (line,) = explanation.lines_of("fuse")
    assert "/fused (kernel" in line
    calls = [c for c in fused._calls.values() if c.fn is not None]
    assert [c.rows for c in calls] == [reduced]
    monkeypatch.setattr(fused, "_native", None)
    through_ctypes, _ = _run(g, y, value, fuse=True)
    np.testing.assert_array_equal(native, through_ctypes)


def test_the_extension_refuses_arrays_a_kernel_cannot_take(registry):
    # a strided view has no pointer to its elements in order, a read-only array no place for
    # the results: refused before the kernel runs, never written around
    if fused._native is None:
        pytest.skip("the _fusedcall extension was not compiled at install (no C compiler)")
    g = Graph()
    with g.as_default(), device(CPU):
        x = placeholder("float64", [80, 64], name="x")
        y = apply_op(registry, "tanh", [apply_op(registry, "exp", [x], {})], {})
    _run(g, y, {x: np.ones((80, 64))}, fuse=True)
    (call,) = [c for c in fused._calls.values() if c.fn is not None and
               c.kernel.dtype == "float64" and c.kernel.reduction is None][-1:]
    assert call.kernel.inputs == ("array",)
    out = np.zeros(8)
    with pytest.raises(ValueError, match="not C-contiguous"):  # NumPy's BufferError
        fused._native.call(call.address, False, [np.ones(16)[::2]], [out], 8, 0)
    with pytest.raises(ValueError, match="read-only"):
        read_only = np.zeros(8)
        read_only.flags.writeable = False
        fused._native.call(call.address, False, [np.ones(8)], [read_only], 8, 0)
    with pytest.raises(TypeError, match="takes 2 or 3 sizes"):
        fused._native.call(call.address, False, [np.ones(8)], [out], 8)
    assert not out.any()
    fused._native.call(call.address, False, [np.ones(8)], [out], 8, 0)
    np.testing.assert_allclose(out, np.tanh(np.full(8, np.e)), rtol=1e-13)
