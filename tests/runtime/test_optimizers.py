"""Optimizers: each update, run for a few steps through Session.run, against a NumPy
re-implementation of the same rule on the same gradients; slots, global_step and errors."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import placeholder
from opsdk.runtime.train.optimizers import (AdagradOptimizer, AdamOptimizer, GradientDescentOptimizer,
                                      MomentumOptimizer, RMSPropOptimizer)
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer

W0 = np.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]])
B0 = np.array([0.1, -0.2])
X = np.array([[1.0, 2.0, -1.0], [0.5, -0.5, 3.0]])


def loss_and_grads(w, b):
    """loss = sum((x @ w + b) ** 2) and its gradients, in NumPy."""
    z = X @ w + b
    return np.sum(z * z), X.T @ (2 * z), np.sum(2 * z, axis=0)


def sgd(lr):
    def step(var, g, state, t):
        return var - lr * g
    return step


def momentum(lr, mu, nesterov=False):
    def step(var, g, state, t):
        state["a"] = mu * state.get("a", 0.0) + g
        return var - lr * (g + mu * state["a"] if nesterov else state["a"])
    return step


def adagrad(lr, init=0.1):
    def step(var, g, state, t):
        state["acc"] = state.get("acc", init) + g * g
        return var - lr * g / np.sqrt(state["acc"])
    return step


def adam(lr, b1=0.9, b2=0.999, eps=1e-8):
    def step(var, g, state, t):
        state["m"] = b1 * state.get("m", 0.0) + (1 - b1) * g
        state["v"] = b2 * state.get("v", 0.0) + (1 - b2) * g * g
        lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        return var - lr_t * state["m"] / (np.sqrt(state["v"]) + eps)
    return step


def rms_prop(lr, decay=0.9, mu=0.0, eps=1e-10):
    def step(var, g, state, t):
        state["ms"] = decay * state.get("ms", 1.0) + (1 - decay) * g * g
        state["mom"] = mu * state.get("mom", 0.0) + lr * g / np.sqrt(state["ms"] + eps)
        return var - state["mom"]
    return step


CASES = [
    (lambda: GradientDescentOptimizer(0.05), sgd(0.05)),
    (lambda: MomentumOptimizer(0.02, 0.9), momentum(0.02, 0.9)),
    (lambda: MomentumOptimizer(0.02, 0.8, use_nesterov=True), momentum(0.02, 0.8, True)),
    (lambda: AdagradOptimizer(0.3), adagrad(0.3)),
    (lambda: AdagradOptimizer(0.3, initial_accumulator_value=1.0), adagrad(0.3, 1.0)),
    (lambda: AdamOptimizer(0.1), adam(0.1)),
    (lambda: AdamOptimizer(0.05, beta1=0.5, beta2=0.9, epsilon=1e-3), adam(0.05, 0.5, 0.9, 1e-3)),
    (lambda: RMSPropOptimizer(0.01), rms_prop(0.01)),
    (lambda: RMSPropOptimizer(0.01, decay=0.8, momentum=0.5, epsilon=1e-6),
     rms_prop(0.01, 0.8, 0.5, 1e-6)),
]


@pytest.mark.parametrize("make, rule", CASES)
def test_updates_match_numpy(graph, registry, make, rule):
    w, b = Variable(W0, name="w"), Variable(B0, name="b")
    x = placeholder("float64", [None, 3], name="x")
    z = x @ w + b
    loss = apply_op(registry, "reduce_sum", [z * z], {})
    train = make().minimize(loss)
    expected_w, expected_b, states = W0.copy(), B0.copy(), ({}, {})
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        for t in range(1, 5):
            _, gw, gb = loss_and_grads(expected_w, expected_b)
            expected_w = rule(expected_w, gw, states[0], t)
            expected_b = rule(expected_b, gb, states[1], t)
            sess.run(train, {x: X})
            got_w, got_b = sess.run([w, b])
            np.testing.assert_allclose(got_w, expected_w, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(got_b, expected_b, rtol=1e-10, atol=1e-12)
    assert not np.allclose(expected_w, W0)  # the rule moved the variables


def test_slots_global_step_and_var_list(graph, registry):
    w, b = Variable(W0, name="w"), Variable(B0, name="b")
    step = Variable(np.int64(0), name="global_step", trainable=False)
    loss = apply_op(registry, "reduce_sum", [w * w], {}) + apply_op(
        registry, "reduce_sum", [b.value()], {})
    opt = AdamOptimizer(0.1)
    train = opt.minimize(loss, global_step=step, var_list=[w])
    assert opt.get_slot_names() == ["m", "v"]
    m = opt.get_slot(w, "m")
    assert m.name == "w/Adam" and not m.trainable and opt.get_slot(w, "v").name == "w/Adam_1"
    with pytest.raises(OpsdkError, match="variable 'b' has no slot 'm'"):
        opt.get_slot(b, "m")
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        sess.run(train)
        np.testing.assert_allclose(sess.run(m), 0.1 * 2 * W0, rtol=1e-12)  # (1 - beta1) * grad
        sess.run(train)
        sess.run(train)
        assert sess.run(step) == 3
        np.testing.assert_array_equal(sess.run(b), B0)  # not in var_list


def test_no_gradient_for_any_variable_is_an_error(graph, registry):
    w = Variable(W0, name="w")
    x = placeholder("float64", [3], name="x")
    loss = apply_op(registry, "reduce_sum", [x * x], {})
    with pytest.raises(OpsdkError, match=r"no gradient for any variable \(w\)"):
        GradientDescentOptimizer(0.1).minimize(loss, var_list=[w])


def test_training_through_cond_and_while_loop(graph, registry):
    from opsdk.runtime.control_flow.builders import cond, while_loop
    w = Variable(np.array([1.0, -2.0, 0.5]), name="w")
    x = placeholder("float64", [3], name="x")
    total = apply_op(registry, "reduce_sum", [x], {})
    picked = cond(total > 0.0, lambda: x * w, lambda: w * w)
    _, s = while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * 0.5 + w), [0, picked],
                      keep_intermediates=True)
    loss = apply_op(registry, "reduce_sum", [s * s], {})
    train = MomentumOptimizer(0.01, 0.9).minimize(loss)
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        losses = [sess.run([loss, train], {x: np.ones(3)})[0] for _ in range(5)]
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < 0.3 * losses[0]


UPDATE_INPUTS = {  # op: (per-variable-shaped inputs, scalar inputs, attrs)
    "apply_gradient_descent": (["var", "delta"], {"alpha": 0.1}, {}),
    "apply_momentum": (["var", "accum", "grad"], {"lr": 0.05, "momentum": 0.9},
                       {"use_nesterov": True}),
    "apply_adagrad": (["var", "accum", "grad"], {"lr": 0.3}, {}),
    "apply_adam": (["var", "m", "v", "grad"], {"beta1_power": 0.9 ** 3, "beta2_power": 0.999 ** 3,
                                               "lr": 0.01, "beta1": 0.9, "beta2": 0.999,
                                               "epsilon": 1e-7}, {}),
    "apply_rms_prop": (["var", "ms", "mom", "grad"], {"lr": 0.01, "rho": 0.9, "momentum": 0.5,
                                                      "epsilon": 1e-6}, {}),
}


def _compiled_update(name, dtype, shape, seed):
    """(spec, the cpu kernel's choice, its inputs in order, attrs, the input values by name) for
    update op `name`; skips where the kernel is not built."""
    from opsdk.registry import load_registry
    from opsdk.runtime.kernels.choice import choose_kernel
    spec = load_registry().get(name)
    try:
        choice = choose_kernel(spec, kind="cpu")
    except OpsdkError as exc:
        pytest.skip(f"the cpu kernel of {name} is not built ({exc})")
    arrays, scalars, attrs = UPDATE_INPUTS[name]
    rng = np.random.default_rng(seed)
    values = {a: rng.uniform(0.1, 1.0, shape).astype(dtype) for a in arrays}
    values.update({k: np.asarray(v, dtype) for k, v in scalars.items()})
    return spec, choice, [values[t.name] for t in spec.inputs], attrs, values


@pytest.mark.parametrize("name", sorted(UPDATE_INPUTS))
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(), (7,), (300, 257)])  # 300 x 257: split over the threads
def test_compiled_updates_match_their_python_kernels(name, dtype, shape):
    from opsdk.runtime.kernels.choice import choose_kernel
    spec, choice, args, attrs, _ = _compiled_update(name, dtype, shape, 0)
    expected = choose_kernel(spec, kind="python").fn(np, *args, **attrs)
    got = choice.fn(*args, *attrs.values())  # a compiled kernel takes its attrs after the inputs
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    tol = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-14}[dtype]
    for e, g in zip(expected, got, strict=True):
        assert g.dtype == np.dtype(dtype) and g.shape == shape
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("make, rule", CASES)
def test_a_0d_variable_trains_through_the_compiled_updates(graph, registry, make, rule):
    # The gradient of a 0-d variable leaves NumPy's python kernels as a NumPy scalar, which a
    # built kernel's glue refuses; the host passes it again as a 0-d array.
    w = Variable(np.float64(0.5), name="w")
    x = placeholder("float64", [3], name="x")
    loss = apply_op(registry, "reduce_sum", [apply_op(registry, "square", [w * x], {})], {})
    train = make().minimize(loss)  # w occurs once: its gradient is mul_grad's summed output
    xs, expected, state = np.array([1.0, -2.0, 0.5]), 0.5, {}
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        for t in range(1, 4):
            expected = rule(expected, 2 * expected * np.sum(xs * xs), state, t)
            sess.run(train, {x: xs})
            got = sess.run(w)
            assert np.shape(got) == ()
            np.testing.assert_allclose(got, expected, rtol=1e-10)


@pytest.mark.parametrize("name", sorted(UPDATE_INPUTS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(7,), (300, 257)])
def test_compiled_updates_in_place_equal_out_of_place(name, dtype, shape):
    # optim.yaml declares each output `inplace` of its input: the runtime hands a compiled update
    # the variable's and slots' own arrays as its outputs (train/update.py).
    from opsdk.runtime.kernels.choice import given_output_call
    spec, choice, args, attrs, values = _compiled_update(name, dtype, shape, 1)
    want = choice.fn(*args, *attrs.values())
    want = want if isinstance(want, tuple) else (want,)
    owned = [values[o.inplace[0]] for o in spec.outputs]
    given = given_output_call(spec, choice, attrs, {})
    given(args, tuple(owned))
    for w, got in zip(want, owned, strict=True):
        np.testing.assert_array_equal(got, w)


@pytest.mark.usefixtures("host_default")  # the host's compiled updates: a GPU's are not in place
def test_training_updates_a_variable_in_place_unless_something_holds_it(graph, registry):
    big = np.random.default_rng(2).standard_normal((64, 48))  # above the step's kept small slots
    w = Variable(big, name="w")
    x = placeholder("float64", [None, 64], name="x")
    loss = apply_op(registry, "reduce_sum", [apply_op(registry, "square", [x @ w], {})], {})
    train = AdamOptimizer(0.01).minimize(loss)
    feed = {x: np.random.default_rng(3).standard_normal((5, 64))}
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        sess.run(train, feed)
        first = weakref.ref(sess.variables._values["w"])  # not a reference that would hold it
        sess.run(train, feed)
        assert sess.variables._values["w"] is first()  # written in place: nothing else held it
        assert not first().flags.writeable
        held = sess.variables.read("w")
        kept = held.copy()
        sess.run(train, feed)
        np.testing.assert_array_equal(held, kept)  # a held array is never written
        assert sess.variables._values["w"] is not held
        fetched = sess.run(w)
        sess.run(train, feed)
        assert not np.array_equal(fetched, sess.run(w))
