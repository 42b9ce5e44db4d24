"""The executor: independent nodes run at the same time, chains run inline, a failure stops the
step, and Session.run is safe from several threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from opsdk.registry.errors import OpError, OpsdkError
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.exec.executor import StepContext, execute
from opsdk.runtime.ir.graph import placeholder
from opsdk.runtime.exec.session import Session, SessionConfig

# What these tests check is the host's plans: unscoped nodes stay on the host on a GPU machine too.
pytestmark = pytest.mark.usefixtures("host_default")


def test_independent_nodes_run_concurrently(graph, registry, hooks):
    # Each rendezvous node waits at a 2-party barrier: the step can only finish when both run at
    # once (run one after the other, the first would time out after 10 s and fail the test).
    x = placeholder("float32", [2], name="x")
    left = apply_op(registry, "rendezvous", [x], {}, name="left")
    right = apply_op(registry, "rendezvous", [x], {}, name="right")
    total = apply_op(registry, "add", [left, right], {})
    with Session(graph) as sess:
        assert not sess.plan_for([total], (x,)).serial
        np.testing.assert_array_equal(sess.run(total, {x: [1, 2]}), [2, 4])


def test_chain_is_serial_and_runs_on_the_calling_thread(graph, registry):
    x = placeholder("float64", [1], name="x")
    t = x
    for _ in range(20):
        t = apply_op(registry, "add", [t, x], {})
    with Session(graph) as sess:
        plan = sess.plan_for([t], (x,))
        assert plan.serial and len(plan.steps) == 20
        np.testing.assert_array_equal(sess.run(t, {x: [1.0]}), [21.0])
        assert sess._pool is None  # no thread pool was ever needed


def test_failure_in_a_wide_graph_stops_the_step(graph, registry, hooks):
    x = placeholder("float32", [2], name="x")
    branches = [apply_op(registry, "counted_add", [x, x], {}, name=f"ok{i}") for i in range(4)]
    boom = apply_op(registry, "explode", [x], {}, name="boom")
    after = apply_op(registry, "counted_add", [boom, x], {}, name="after")
    with Session(graph, config=SessionConfig(constant_folding=False, cse=False)) as sess:
        assert not sess.plan_for([*branches, after], (x,)).serial
        for _ in range(20):  # whatever order the threads take, the error is the same
            with pytest.raises(OpError, match=r"^explode \(node 'boom'\): ValueError: bad input"):
                sess.run([*branches, after], {x: [1, 2]})
        assert hooks["calls"]["counted_add"] <= 4 * 20  # 'after' never ran


def test_session_run_from_many_threads(graph, registry):
    x = placeholder("float64", [3], name="x")
    a = apply_op(registry, "mul", [x, x], {})
    b = apply_op(registry, "add", [x, x], {})
    out = apply_op(registry, "sub", [a, b], {})
    with Session(graph) as sess:
        def one(k: int) -> bool:
            value = np.arange(3, dtype=np.float64) + k
            got = sess.run(out, {x: value})
            return bool(np.array_equal(got, value * value - 2 * value))
        with ThreadPoolExecutor(8) as pool:
            assert all(pool.map(one, range(200)))
        assert sess.stats.plans_built == 1


# ---- 0-d float chains on NumPy scalars (kernels' scalar_form, passes.scalar_slots) ------------

def _scalar_chain(registry, dtype):
    x = placeholder(dtype, [], name="x")
    y = placeholder(dtype, [], name="y")
    a = apply_op(registry, "add", [x, y], {}, name="a")
    b = apply_op(registry, "mul", [a, y], {}, name="b")
    c = apply_op(registry, "sub", [b, x], {}, name="c")
    d = apply_op(registry, "div", [c, y], {}, name="d")
    e = apply_op(registry, "neg", [d], {}, name="e")
    return x, y, [a, b, c, d, e]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_scalar_chain_gives_the_bits_of_the_array_kernels(graph, registry, dtype):
    x, y, nodes = _scalar_chain(registry, dtype)
    rng = np.random.default_rng(3)
    xv, yv = (np.asarray(v, dtype) for v in rng.uniform(0.5, 2.0, 2))
    a = np.add(xv, yv)
    b = np.multiply(np.asarray(a), yv)
    c = np.subtract(np.asarray(b), xv)
    d = np.divide(np.asarray(c), yv)
    want = np.negative(np.asarray(d))
    with Session(graph) as sess:
        got = sess.run(nodes[-1], {x: xv, y: yv})
        inner = sess.run(nodes, {x: xv, y: yv})
    assert type(got) is np.ndarray and got.dtype == dtype and got.shape == ()
    assert got.tobytes() == np.asarray(want).tobytes()
    for value, ref in zip(inner, (a, b, c, d, want)):  # fetched: 0-d arrays, as the kernels give
        assert type(value) is np.ndarray and value.tobytes() == np.asarray(ref).tobytes()


def test_scalar_values_reach_only_scalar_steps(graph, registry):
    x, y, nodes = _scalar_chain(registry, "float32")
    grown = apply_op(registry, "exp", [nodes[1]], {}, name="grown")  # exp reads b
    feeds = {x: np.asarray(np.float32(1)), y: np.asarray(np.float32(2))}
    with Session(graph) as sess:
        plan = sess.plan_for([nodes[-1], grown], (x, y))
        # The steps run by hand, without the executor's releases, to see every slot's value.
        values = list(plan.template)
        for tensor, slot in plan.feed_slots:
            values[slot] = feeds[tensor]
        for run in plan.runs:
            run(values, StepContext(sess.variables, sess))
        np.testing.assert_allclose(sess.run(grown, feeds), np.exp(6.0), rtol=1e-6)
    # a = 3, b = 6, c = 5, d = 2.5, e = -2.5: a, c and d stay NumPy scalars between steps; b
    # feeds exp (not a scalar step) and e is fetched, so both are arrays.
    scalars = sorted(float(v) for v in values if isinstance(v, np.generic))
    assert scalars == [2.5, 3.0, 5.0]
    assert all(type(v) is np.ndarray for v in values if not isinstance(v, np.generic))


def test_scalar_steps_keep_the_errors_of_the_kernels(graph, registry):
    x = placeholder("float32", [], name="x")
    y = placeholder("float32", [], name="y")
    ratio = apply_op(registry, "div", [x, y], {}, name="ratio")
    with Session(graph) as sess, np.errstate(divide="raise"):
        with pytest.raises(OpError, match=r"^div \(node 'ratio'\): FloatingPointError: divide by "
                                          r"zero encountered"):
            sess.run(ratio, {x: 1.0, y: 0.0})


def _wide(registry):
    x = placeholder("float64", [3], name="x")
    return x, [apply_op(registry, "counted_add", [x, x], {}, name=f"b{i}") for i in range(3)]


def test_auto_step_mode_times_both_ways_then_keeps_one(graph, registry, hooks):
    """With no fused kernel compiling beside the trials, the first choice is final: a second
    round of trials would run the losing mode's steps again, at its pace."""
    from opsdk.runtime.exec.step_mode import RECHECK_AFTER, TRIALS
    from opsdk.runtime.kernels.fused import wait_for_fused_kernels
    x, outs = _wide(registry)

    def run():
        for got in sess.run(outs, {x: [1.0, 2.0, 3.0]}):
            np.testing.assert_array_equal(got, [2.0, 4.0, 6.0])
    # (a fused kernel an earlier test of this process left compiling would make it a first
    # choice only, by design: the second test below)
    assert wait_for_fused_kernels(300)
    with Session(graph, config=SessionConfig(constant_folding=False, cse=False)) as sess:
        plan = sess.plan_for(outs, (x,))
        assert not plan.inline
        mode = sess._modes[id(plan)]
        for _ in range(1 + 2 * TRIALS):  # a warm-up run, then each way TRIALS times
            assert mode.decided is None
            run()
        assert mode.decided in (True, False) and mode.final
        assert sess._pool is not None  # the concurrent runs used it
        choice = mode.decided
        for _ in range(2 * RECHECK_AFTER):
            run()
        assert mode.decided is choice


class _Compiles:
    """A stand-in for kernels.fused.compile_activity: (started, finished) as a test sets it."""

    def __init__(self, started: int, finished: int):
        self.now = (started, finished)

    def __call__(self) -> tuple[int, int]:
        return self.now


def _trials(mode, during=None):
    """The warm-up run and one round of trials (inline slower), `during()` called midway."""
    from opsdk.runtime.exec.step_mode import TRIALS
    mode.record(False, 1.0)
    for i in range(2 * TRIALS):
        if i == TRIALS and during is not None:
            during()
        inline = mode.inline()
        mode.record(inline, 2.0 if inline else 1.0)


@pytest.mark.parametrize("at_start, later", [((1, 0), (1, 1)), ((0, 0), (1, 0)), ((2, 2), (3, 3))],
                         ids=["compiling-then-done", "started-during", "one-ran-between"])
def test_trials_beside_a_background_compile_are_made_again(at_start, later):
    from opsdk.runtime.exec.step_mode import RECHECK_AFTER, TRIALS, StepMode
    compiles = _Compiles(*at_start)
    mode = StepMode(activity=compiles)

    def move_on():
        compiles.now = later
    _trials(mode, move_on)
    assert mode.decided is False and not mode.final  # concurrent, for now
    for _ in range(RECHECK_AFTER):
        mode.record(False, 1.0)
    assert mode.decided is None  # trials again, both ways, no warm-up run: inline wins now
    for _ in range(2 * TRIALS):
        assert mode.decided is None
        inline = mode.inline()
        mode.record(inline, 1.0 if inline else 3.0)
    assert mode.decided is True and mode.final


def test_quiet_trials_are_final():
    from opsdk.runtime.exec.step_mode import StepMode
    mode = StepMode(activity=_Compiles(4, 4))
    _trials(mode)
    assert mode.decided is False and mode.final


def test_each_mode_is_judged_by_its_second_fastest_run():
    """Other work only adds time: concurrent runs of 2 s, most of them disturbed (50 s), still
    beat steady inline runs of 3 s, where a median would have chosen inline."""
    from opsdk.runtime.exec.step_mode import TRIALS, StepMode
    mode = StepMode()
    mode.record(False, 1.0)  # the warm-up run
    for i in range(TRIALS):
        assert mode.inline() is False
        mode.record(False, 50.0 if i <= TRIALS // 2 else 2.0)
        assert mode.inline() is True
        mode.record(True, 3.0)
    assert mode.decided is False


def test_one_lucky_run_does_not_choose_a_mode():
    """The trials of an LSTM step (ms): one concurrent run at 38.7 among 46-48, against inline
    runs of 40-47. Its fastest run chose concurrent, which then ran 44-48 against 40-42."""
    from opsdk.runtime.exec.step_mode import TRIALS, StepMode
    assert TRIALS == 5
    mode = StepMode()
    mode.record(False, 1.0)  # the warm-up run
    for concurrent, inline in zip([47.1, 46.2, 48.2, 47.3, 38.7], [46.7, 42.7, 43.9, 40.9, 40.1]):
        assert mode.inline() is False
        mode.record(False, concurrent)
        assert mode.inline() is True
        mode.record(True, inline)
    assert mode.decided is True


@pytest.mark.parametrize("step_mode, pool_used", [("inline", False), ("concurrent", True)])
def test_a_fixed_step_mode_is_kept(graph, registry, hooks, step_mode, pool_used):
    x, outs = _wide(registry)
    config = SessionConfig(constant_folding=False, cse=False, step_mode=step_mode)
    with Session(graph, config=config) as sess:
        for _ in range(10):
            sess.run(outs, {x: [1.0, 2.0, 3.0]})
        assert (sess._pool is not None) == pool_used


def test_an_unknown_step_mode_is_refused(graph):
    with pytest.raises(OpsdkError, match="step_mode must be one of auto, concurrent, inline"):
        Session(graph, config=SessionConfig(step_mode="fast"))


def test_only_the_read_outputs_of_a_partial_kernel_are_computed(graph, registry, monkeypatch):
    # The gradient of w in loss(x @ w): matmul_grad's grad_x (for the placeholder) is read by
    # nobody, so the kernel computes x^T @ grad_z alone.
    from opsdk.runtime.autodiff.gradients import gradients
    from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
    from opsdk.runtime.kernels.choice import choose_kernel
    calls = []
    kernel_globals = choose_kernel(registry.get("matmul_grad"), kind="python").fn.__globals__
    grad_x = kernel_globals["_grad_x"]
    monkeypatch.setitem(kernel_globals, "_grad_x", lambda *a: calls.append(1) or grad_x(*a))
    x = placeholder("float64", [2, 3], name="x")
    w = Variable(np.arange(12.0).reshape(3, 4), name="w")
    loss = apply_op(registry, "reduce_sum", [x @ w], {})
    (gw,) = gradients(loss, [w])
    xs = np.arange(6.0).reshape(2, 3)
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        np.testing.assert_allclose(sess.run(gw, {x: xs}), xs.T @ np.ones((2, 4)))
        assert calls == []
        (gx,) = gradients(loss, [x])  # now grad_x is read: the full kernel
        np.testing.assert_allclose(sess.run(gx, {x: xs}),
                                   np.ones((2, 4)) @ np.arange(12.0).reshape(3, 4).T)
        assert calls == [1]


@pytest.mark.parametrize("op, unread", [("pow", "_pow_grad_y"), ("mul", "_mul_grad_y"),
                                        ("div", "_div_y_of")])
def test_a_binary_gradient_skips_the_half_of_a_constant(graph, registry, monkeypatch, op,
                                                          unread):
    # d/dc of x ** c (the log term), x * c or x / c, for a constant c: read by nobody, so not
    # computed (the autoencoder's tf.pow(x - h, 2) spent a quarter of its step on it).
    from opsdk.runtime.autodiff.gradients import gradients
    from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
    from opsdk.runtime.kernels.choice import choose_kernel
    calls = []
    kernel_globals = choose_kernel(registry.get(f"{op}_grad"), kind="python").fn.__globals__
    half = kernel_globals[unread]
    monkeypatch.setitem(kernel_globals, unread, lambda *a: calls.append(1) or half(*a))
    x = placeholder("float64", [2, 3], name="x")
    w = Variable(np.linspace(0.5, 2.0, 6).reshape(2, 3), name="w")
    c = np.full((2, 3), 2.0)
    z = apply_op(registry, op, [w - x, apply_op(registry, "identity", [c], {})], {})
    (gw,) = gradients(apply_op(registry, "reduce_sum", [z], {}), [w])
    xs = np.full((2, 3), 0.25)
    d = np.linspace(0.5, 2.0, 6).reshape(2, 3) - xs
    want = {"pow": 2 * d, "mul": c, "div": 1 / c}[op]
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        np.testing.assert_allclose(sess.run(gw, {x: xs}), want)
    assert calls == []
