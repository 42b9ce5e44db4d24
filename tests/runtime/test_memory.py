"""The memory planner: a kernel writes into a dead input's buffer where its op declares
`inplace`; fed values, fetched values, variables and shared buffers are never written."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.registry import OpDefErrors, load_callable, load_registry, parse_opdef
from opsdk.registry.errors import OpsdkError
from opsdk.registry.spec import EllipsisDim
from opsdk.runtime.exec.session import Session, SessionConfig
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph, placeholder

# What these tests check is the host's plans: unscoped nodes stay on the host on a GPU machine too.
pytestmark = pytest.mark.usefixtures("host_default")

UNFUSED = SessionConfig(passes_off=frozenset({"fuse"}))
INPLACE_OPS = sorted(n for n in load_registry().names()
                     if any(o.inplace for o in load_registry().get(n).outputs))


def _elementwise(spec) -> bool:
    """Declares a fusion formula, or every input and the output are `[...]` of one dtype attr."""
    same = [t for t in (*spec.inputs, *spec.outputs) if t.shape == (EllipsisDim(),) and t.dtype == "T"]
    return bool(spec.elementwise) or len(same) == len(spec.inputs) + len(spec.outputs)


# The optimizers' updates (several outputs, scalar hyperparameters) are checked in
# tests/runtime/test_optimizers.py; these are the graph's elementwise ops, each with every input
# its output may be written into.
ELEMENTWISE_INPLACE = [(n, donor) for n in INPLACE_OPS
                       if len(load_registry().get(n).outputs) == 1 and not n.startswith("apply_")
                       and _elementwise(load_registry().get(n))
                       for donor in load_registry().get(n).outputs[0].inplace]


def test_the_builtin_arithmetic_declares_inplace_outputs():
    assert {"add", "sub", "mul", "div", "neg", "exp", "square", "tanh"} <= set(INPLACE_OPS)
    # gradients whose NumPy kernels would otherwise allocate temporaries of their size
    assert {"square_grad", "sigmoid_grad", "tanh_grad", "reduce_mean_grad", "sqrt_grad",
            "abs_grad", "dropout_grad", "softmax", "log_softmax", "softmax_grad",
            "log_softmax_grad"} <= set(INPLACE_OPS)


def _in_place_and_not(g, y, first, feed):
    """(the plan's explanation, y in place, y with `first` fetched so that nothing is donated)."""
    with Session(g, UNFUSED) as sess:
        explanation = sess.explain(y, {t: None for t in feed}, show=False)
        got = sess.run(y, feed)
    with Session(g, SessionConfig(passes_off=frozenset({"fuse", "fold_cse"}))) as sess:
        want = sess.run([first, y], feed)[1]
    return explanation, got, want


@pytest.mark.parametrize("attrs", [{}, {"axes": [1]}, {"axes": [0], "keepdims": True}])
def test_reduce_mean_grad_gives_the_same_result_in_place_and_not(registry, attrs):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [6, 5], name="x")
        first = apply_op(registry, "exp", [x], {}, name="first")  # a buffer of the step's own
        mean = apply_op(registry, "reduce_mean", [x], attrs, name="mean")
        y = apply_op(registry, "reduce_mean_grad", [first, apply_op(registry, "neg", [mean], {})],
                     attrs, name="y")
    value = np.random.default_rng(1).uniform(0.5, 1.5, (6, 5))
    explanation, got, want = _in_place_and_not(g, y, first, {x: value})
    assert "y" in explanation.donated
    np.testing.assert_array_equal(got, want)


def test_the_elementwise_functions_and_their_gradients_declare_inplace_outputs():
    names = {name for name, _ in ELEMENTWISE_INPLACE}
    assert {"relu", "sigmoid", "sqrt", "log", "abs", "sign", "sin", "cos", "tan", "asin", "acos",
            "atan", "sinh", "cosh", "expm1", "log1p", "floor", "ceil", "round"} <= names
    assert {"exp_grad", "log_grad", "neg_grad", "sin_grad", "cos_grad", "tan_grad", "asin_grad",
            "acos_grad", "atan_grad", "sinh_grad", "cosh_grad", "expm1_grad",
            "log1p_grad"} <= names


@pytest.mark.parametrize("name, donor", ELEMENTWISE_INPLACE)
def test_each_inplace_op_gives_the_same_result_in_place_and_not(registry, name, donor):
    """The output written into each input its declaration names (the others fed, so never
    donated) equals the output of a run that donates nothing."""
    spec = registry.get(name)
    g = Graph()
    rng = np.random.default_rng(0)
    with g.as_default():
        x = placeholder("float64", [64], name="x")
        first = apply_op(registry, "square", [x], {}, name="first")  # a buffer of the step's own
        args = [first if t.name == donor else x for t in spec.inputs]
        y = apply_op(registry, name, args, {}, name="y")
    value = rng.uniform(0.1, 0.9, 64)  # squared or not, inside every function's domain
    explanation, got, want = _in_place_and_not(g, y, first, {x: value})
    assert explanation.donated == ("y",)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmax_grad", "log_softmax_grad"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_the_softmaxes_give_the_same_result_in_place_and_not(registry, name, axis):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [6, 5], name="x")
        first = apply_op(registry, "exp", [x], {}, name="first")  # a buffer of the step's own
        if name.endswith("_grad"):
            forward = apply_op(registry, name[:-len("_grad")], [x], {"axis": axis})
            args = [first, forward, apply_op(registry, "neg", [x], {})]
        else:
            args = [first]
        y = apply_op(registry, name, args, {"axis": axis}, name="y")
    value = np.random.default_rng(3).uniform(-2, 2, (6, 5))
    explanation, got, want = _in_place_and_not(g, y, first, {x: value})
    assert "y" in explanation.donated
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("grow, index", [(False, 2), (True, 1), (True, 7)])
def test_write_row_gives_the_same_result_in_place_and_not(registry, grow, index):
    # a TensorArray's write (opsdk/v1/tensor_array.py): in place when the buffer dies there; a
    # buffer that may grow has rows known only at run time, so its kernel (marked
    # out_any_shape) is handed the buffer and writes there only when no row is added
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [6, 5], name="x")
        first = apply_op(registry, "exp", [x], {}, name="first")  # a buffer of the step's own
        i_fed = placeholder("int32", [], name="i")
        i = apply_op(registry, "cast", [i_fed], {"DstT": "int64"})
        row = apply_op(registry, "neg", [apply_op(registry, "reduce_sum", [x], {"axes": [0]})],
                       {})
        y = apply_op(registry, "write_row", [first, i, row], {"grow": grow}, name="y")
    value = np.random.default_rng(4).uniform(-1, 1, (6, 5))
    explanation, got, want = _in_place_and_not(g, y, first, {x: value, i_fed: index})
    assert "y" in explanation.donated
    expected = np.zeros((max(6, index + 1), 5))
    expected[:6] = np.exp(value)
    expected[index] = -value.sum(0)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(want, expected)


@pytest.mark.parametrize("rows, index", [(6, 2), (8, 7)])
def test_write_row_grad_gives_the_same_result_in_place_and_not(registry, rows, index):
    """An op of two outputs whose first declares `inplace: [grad_y]`: its python kernel is
    handed grad_y's dead buffer as `out=` (a TensorArray's gradient in a loop then clears a row
    instead of copying the array), and uses it only where the shapes fit (8 rows: the buffer
    had grown from 6, so grad_buffer is smaller than grad_y)."""
    g = Graph()
    with g.as_default():
        buffer = placeholder("float64", [6, 5], name="buffer")
        fed = placeholder("float64", [rows, 5], name="fed")
        first = apply_op(registry, "exp", [fed], {}, name="first")  # a buffer of the step's own
        i = apply_op(registry, "cast", [placeholder("int32", [], name="i")], {"DstT": "int64"})
        row = apply_op(registry, "reduce_sum", [buffer], {"axes": [0]})
        y = apply_op(registry, "write_row_grad", [buffer, i, row, first],
                     {"grow": rows > 6}, name="y")
        grad_buffer, grad_row = y
    value = np.random.default_rng(7).uniform(-1, 1, (rows, 5))
    feed = {buffer: np.ones((6, 5)), fed: value, g.get_tensor("i:0"): index}
    with Session(g, UNFUSED) as sess:
        explanation = sess.explain([grad_buffer, grad_row], {t: None for t in feed}, show=False)
        got = sess.run([grad_buffer, grad_row], feed)
    with Session(g, SessionConfig(passes_off=frozenset({"fuse", "fold_cse"}))) as sess:
        want = sess.run([first, grad_buffer, grad_row], feed)[1:]
    assert "y" in explanation.donated
    expected = np.exp(value)[:6].copy()
    if index < 6:
        expected[index] = 0
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[0], expected)
    np.testing.assert_array_equal(got[1], np.exp(value)[index])


def test_dropout_grad_gives_the_same_result_in_place_and_not(registry):
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [8, 16], name="x")
        noise = placeholder("float32", [8, 16], name="noise")
        keep = placeholder("float32", [], name="keep")
        first = apply_op(registry, "exp", [x], {}, name="first")  # a buffer of the step's own
        y = apply_op(registry, "dropout_grad", [first, keep, noise, apply_op(registry, "neg", [x], {})],
                     {}, name="y")
    rng = np.random.default_rng(2)
    feed = {x: rng.standard_normal((8, 16)).astype(np.float32), keep: np.float32(0.6),
            noise: rng.random((8, 16), dtype=np.float32)}
    feed[noise][0, :3] = np.nan  # dropped, as noise < keep_prob is false
    explanation, got, want = _in_place_and_not(g, y, first, feed)
    assert "y" in explanation.donated
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[0, :3], 0)


def test_a_chain_reuses_one_buffer_and_explain_reports_the_peak(registry):
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [256, 256], name="x")
        y = x
        for _ in range(50):
            y = apply_op(registry, "add", [y, x], {})
    with Session(g, UNFUSED) as sess:
        explanation = sess.explain(y, {x: None}, show=False)
        got = sess.run(y, {x: np.ones((256, 256), np.float32)})
    assert got[0, 0] == 51.0
    assert len(explanation.donated) == 49  # every add but the first, which reads only the feed
    assert explanation.peak_bytes == 256 * 256 * 4
    assert "memory:\n  peak: 262144 bytes of step values" in str(explanation)


def test_fed_fetched_and_variable_values_are_never_written(registry):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [8], name="x")
        w = Variable(np.arange(8.0), name="w")
        a = apply_op(registry, "exp", [x], {}, name="a")
        b = apply_op(registry, "neg", [a], {}, name="b")  # a is fetched: not donated
        c = apply_op(registry, "add", [w.value() if hasattr(w, "value") else w, x], {}, name="c")
        d = apply_op(registry, "neg", [x], {}, name="d")  # x is fed: not donated
        init = global_variables_initializer()
    value = np.linspace(0, 1, 8)
    kept = value.copy()
    with Session(g, UNFUSED) as sess:
        sess.run(init)
        got_a, got_b, got_c, got_d = sess.run([a, b, c, d], {x: value})
        explanation = sess.explain([a, b, c, d], {x: None}, show=False)
        w_after = sess.run(w)
    assert explanation.donated == ()
    np.testing.assert_array_equal(value, kept)
    np.testing.assert_array_equal(got_b, -got_a)
    np.testing.assert_array_equal(w_after, np.arange(8.0))
    np.testing.assert_array_equal(got_d, -kept)


def test_a_buffer_someone_else_still_holds_is_not_written(registry):
    """An identity keeps the very array of its input in another slot: the planner sees a slot
    that only `b` reads and plans to donate it, the run-time check sees the fetched slot's
    reference to the same array and allocates instead."""
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [8], name="x")
        a = apply_op(registry, "exp", [x], {}, name="a")
        alias = g.create_op("identity", [a], {}, [(a.shape, a.dtype)], name="alias").outputs[0]
        b = apply_op(registry, "neg", [alias], {}, name="b")
    with Session(g, UNFUSED) as sess:
        assert sess.explain([a, b], {x: None}, show=False).donated == ("b",)
        got_a, got_b = sess.run([a, b], {x: np.zeros(8)})
    np.testing.assert_array_equal(got_a, np.ones(8))
    np.testing.assert_array_equal(got_b, -np.ones(8))


SCALED_YAML = """
op: scaled
summary: factor * x, with an attr (its kernel is called with the attr bound).
type_attrs:
  T: [float64]
attrs:
  factor: {type: float, default: 2.0}
inputs:
  x: {dtype: T, shape: [...]}
outputs:
  y: {dtype: T, shape: [...], inplace: [x]}
kernels:
  python: scaled_kernels.py:scaled
"""
SCALED_KERNELS = """
given = []


def scaled(xp, x, factor, out=None):
    given.append(out is not None)
    return xp.multiply(x, factor, out=out)
"""


@pytest.mark.parametrize("batch", [8, None])
def test_a_kernel_with_attrs_is_handed_the_donated_buffer_for_a_batch_known_or_not(tmp_path, batch):
    """A donation the plan reports happens: the kernel of an op with an attr is given `out=`
    (the planner had reported softmax's and reduce_mean_grad's donations, whose steps called the
    kernel without it), also where the batch is None (the op declares x and y `[...]`, so the
    actual shapes, checked first, make y's x's)."""
    registry, given = _scaled_registry(tmp_path)
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [batch, 3], name="x")
        first = apply_op(registry, "exp", [x], {}, name="first")  # a buffer of the step's own
        y = apply_op(registry, "scaled", [first], {"factor": 3.0}, name="y")
    value = np.random.default_rng(4).uniform(-1, 1, (8, 3))
    with Session(g, UNFUSED) as sess:
        assert sess.explain(y, {x: None}, show=False).donated == ("y",)
        np.testing.assert_array_equal(sess.run(y, {x: value}), 3.0 * np.exp(value))
    assert given == [True]


def _scaled_registry(tmp_path):
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "scaled.yaml").write_text(SCALED_YAML.lstrip())
    (tmp_path / "opdefs" / "scaled_kernels.py").write_text(SCALED_KERNELS)
    registry = load_registry(tmp_path)
    spec = registry.get("scaled")
    given = load_callable(spec, spec.kernel("python").source).__globals__["given"]
    given.clear()
    return registry, given


def test_a_loop_body_writes_into_its_dead_loop_variables(tmp_path):
    """A loop's variables are handed to its body: an iteration's values die as the next begins,
    so the body's step writes into them (a TensorArray's writes in a loop then cost a row each,
    not a copy of the array). The first iteration reads the fed value, which is never written."""
    from opsdk.runtime.control_flow.builders import while_loop

    registry, given = _scaled_registry(tmp_path)
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [None, 3], name="x")
        _, y = while_loop(lambda i, v: i < 4,
                          lambda i, v: (i + 1, apply_op(registry, "scaled", [v], {"factor": 2.0})),
                          [0, x])
    value = np.random.default_rng(5).uniform(-1, 1, (2, 3))
    kept = value.copy()
    with Session(g, UNFUSED) as sess:
        got = sess.run(y, {x: value})
    np.testing.assert_array_equal(value, kept)
    np.testing.assert_array_equal(got, 16.0 * kept)
    assert given == [False, True, True, True]


def test_a_loop_whose_iterations_are_recorded_keeps_them_unwritten(registry):
    """A gradient through a loop records every iteration's values: those are held, so the
    body's in-place tanh allocates instead, and the gradient reads the true values."""
    from opsdk.runtime.autodiff.gradients import gradients
    from opsdk.runtime.control_flow.builders import while_loop

    g = Graph()
    with g.as_default():
        x = placeholder("float64", [None, 3], name="x")
        _, y = while_loop(lambda i, v: i < 3,
                          lambda i, v: (i + 1, apply_op(registry, "tanh", [v], {})), [0, x])
        grad = gradients(y, [x])[0]
    value = np.random.default_rng(6).uniform(-1, 1, (2, 3))
    with Session(g, UNFUSED) as sess:
        got_y, got_grad = sess.run([y, grad], {x: value})
    want_grad, v = np.ones_like(value), value
    for _ in range(3):
        v = np.tanh(v)
        want_grad *= 1.0 - v * v
    np.testing.assert_allclose(got_y, v, rtol=1e-15)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-14)


def test_a_donation_on_declared_shapes_checks_the_actual_shapes_first(registry):
    """sin_grad declares x, grad_y and grad_x `[...]`: with the batch open, grad_y's buffer is
    donated on the declaration alone, and values that break it fail with the op's name and the
    declaration's wording, not with NumPy's broadcasting error (or a result in a buffer of the
    wrong shape)."""
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [None, 3], name="x")
        gy = placeholder("float64", [None, None], name="gy")
        first = apply_op(registry, "exp", [gy], {}, name="first")  # a buffer of the step's own
        y = apply_op(registry, "sin_grad", [x, first], {}, name="y")
    rng = np.random.default_rng(5)
    with Session(g, UNFUSED) as sess:
        assert sess.explain(y, {x: None, gy: None}, show=False).donated == ("y",)
        a, b = rng.uniform(-1, 1, (4, 3)), rng.uniform(-1, 1, (4, 3))
        np.testing.assert_array_equal(sess.run(y, {x: a, gy: b}), np.exp(b) * np.cos(a))
        with pytest.raises(OpsdkError, match=r"sin_grad.*grad_y"):
            sess.run(y, {x: a, gy: b[:, :1]})


@pytest.mark.parametrize("inplace, message", [
    ("[w]", "inplace names 'w', which is not an input (inputs: x)"),
    ("x", "inplace is a list of input names, like [x]"),
])
def test_a_wrong_inplace_is_a_located_error(tmp_path, inplace, message):
    opdefs = tmp_path / "opdefs"
    opdefs.mkdir()
    (opdefs / "kernels.py").write_text("def foo(xp, x, out=None):\n    return x\n")
    path = opdefs / "foo.yaml"
    path.write_text("op: foo\nsummary: Foo.\ninputs:\n  x: {dtype: float32, shape: [n]}\n"
                    f"outputs:\n  y: {{dtype: float32, shape: [n], inplace: {inplace}}}\n"
                    "kernels: {python: kernels.py:foo}\n")
    with pytest.raises(OpDefErrors) as info:
        parse_opdef(path, tmp_path)
    assert str(info.value) == f"opdefs/foo.yaml:6: op 'foo': output 'y': {message}"
