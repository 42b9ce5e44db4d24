"""Variables: initialisation, updates, per-session state, collections, errors."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from opsdk.registry.errors import OpError, OpsdkError
from opsdk.runtime.ir.graph import placeholder
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.variables import (Variable, global_variables, global_variables_initializer,
                                     trainable_variables)

# What these tests check is the host's plans: unscoped nodes stay on the host on a GPU machine too.
pytestmark = pytest.mark.usefixtures("host_default")


def test_uninitialised_read_says_what_to_run(graph):
    w = Variable(np.ones(2, np.float32), name="w")
    with Session(graph) as sess:
        with pytest.raises(OpsdkError) as err:
            sess.run(w * 2.0)
    assert str(err.value) == ("variable 'w' is not initialised; run global_variables_initializer() "
                              "first")


def test_assign_ops_and_reads(graph):
    w = Variable(np.array([1.0, 2.0], np.float32), name="w")
    x = placeholder("float32", [2], name="x")
    set_x = w.assign(x)
    add_one = w.assign_add([1.0, 1.0])
    sub_two = w.assign_sub(np.array([2.0, 2.0], np.float32))
    doubled = w * 2.0
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        np.testing.assert_array_equal(sess.run(doubled), [2.0, 4.0])
        np.testing.assert_array_equal(sess.run(set_x, {x: [5.0, 6.0]}), [5.0, 6.0])
        np.testing.assert_array_equal(sess.run(add_one), [6.0, 7.0])
        np.testing.assert_array_equal(sess.run(sub_two), [4.0, 5.0])
        np.testing.assert_array_equal(sess.run(w), [4.0, 5.0])


def test_each_session_holds_its_own_values(graph):
    w = Variable(0.0, name="w", dtype="float64")
    bump = w.assign_add(1.0)
    init = global_variables_initializer()
    with Session(graph) as a, Session(graph) as b:
        a.run(init), b.run(init)
        for _ in range(3):
            a.run(bump)
        b.run(bump)
        assert (a.run(w), b.run(w)) == (3.0, 1.0)


def test_concurrent_assign_add_loses_no_update(graph):
    w = Variable(0, name="counter", dtype="int64")
    bump = w.assign_add(1)
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: sess.run(bump.op), range(400)))
        assert sess.run(w) == 400


def test_collections_and_names(graph):
    with graph.name_scope("layer1"):
        w = Variable(np.zeros((2, 3), np.float32), name="w")
        b = Variable(np.zeros(3, np.float32), name="b", trainable=False)
    assert w.name == "layer1/w" and w.initializer.name == "layer1/w/Assign"
    assert w.shape == (2, 3) and w.dtype == "float32"
    assert trainable_variables() == [w] and global_variables() == [w, b]


def test_assign_of_wrong_shape_is_an_error_at_creation(graph):
    w = Variable(np.zeros(3, np.float32), name="w")
    with pytest.raises(OpError, match=r"^assign \(node 'w/assign'\): value of shape \[2\] does not "
                                      r"fit variable 'w' of shape \[3\]"):
        w.assign(np.zeros(2, np.float32))


def test_assign_of_wrong_shape_fed_at_run_time(graph):
    w = Variable(np.zeros(3, np.float32), name="w")
    x = placeholder("float32", None, name="x")
    set_x = w.assign(x, name="set")
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        with pytest.raises(OpError, match=r"^assign \(node 'set'\): value of shape \[4\]"):
            sess.run(set_x, {x: np.zeros(4)})


def test_changing_a_fetched_value_never_changes_the_variable(graph):
    w = Variable(np.zeros(3, np.float32), name="w")
    bump = w.assign(w + 1.0)
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        fetched = sess.run(w)
        fetched[0] = 99.0  # a copy: writeable, and the variable keeps its value
        assigned = sess.run(bump)
        assigned[1] = 77.0
        np.testing.assert_array_equal(sess.run(w), [1.0, 1.0, 1.0])


def test_a_stored_value_is_read_only_so_no_kernel_writes_into_it(graph):
    w = Variable(np.ones(2, np.float64), name="w")
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        stored = sess.variables.read("w")
        with pytest.raises(ValueError, match="read-only"):
            stored[0] = 5.0


def test_a_compiled_kernels_output_is_stored_without_a_copy(graph, monkeypatch):
    # The update's output is an array the compiled kernel just allocated: nobody else holds it,
    # so the assign keeps it as it is. A fed value is copied (the caller still holds it).
    from opsdk.runtime.devices import host
    from opsdk.runtime.exec.variable_store import Transaction, VariableStore
    from opsdk.runtime.frontend.registries import builtin_registry
    from opsdk.runtime.kernels.choice import choose_kernel
    from opsdk.runtime.train.optimizers import GradientDescentOptimizer
    stored = []
    original, original_write = VariableStore.assign, Transaction.write

    def spy(self, name, value, fresh=False):
        stored.append((name, fresh))
        return original(self, name, value, fresh)

    def spy_write(self, name, value, fresh=False):
        stored.append((name, fresh))
        return original_write(self, name, value, fresh)
    monkeypatch.setattr(VariableStore, "assign", spy)
    monkeypatch.setattr(Transaction, "write", spy_write)
    w = Variable(np.ones(4, np.float32), name="w")
    x = placeholder("float32", [4], name="x")
    train = GradientDescentOptimizer(0.5).minimize(w * w)
    set_w = w.assign(x)
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        spec = builtin_registry().get("apply_gradient_descent")
        compiled = choose_kernel(spec, host()).kind == "cpu"
        stored.clear()
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), np.zeros(4))  # 1 - 0.5 * 2
        assert stored == [("w", compiled)]
        fed = np.full(4, 3.0, np.float32)
        sess.run(set_w, {x: fed})
        assert stored[-1] == ("w", False)
        fed[0] = -1.0
        np.testing.assert_array_equal(sess.run(w), [3.0] * 4)


def test_a_read_made_under_control_dependencies_runs_after_them(graph):
    from opsdk.runtime.autodiff.gradients import gradients
    from opsdk.runtime.ir.graph import control_dependencies
    from opsdk.runtime.io.serialize import export_graph, import_graph

    w = Variable(np.array([1.0, 2.0], np.float32), name="w")
    bump = w.assign_add([1.0, 1.0])
    assert w.read() is w.value()  # no control dependencies: the variable's one node
    with control_dependencies([bump]):
        after = w.read()
    assert after.op.type == "read_variable" and after.op.control_inputs == (bump.op,)
    [grad] = gradients(after * after, [w])
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        np.testing.assert_array_equal(sess.run(after), [2.0, 3.0])
        np.testing.assert_array_equal(sess.run(grad), [6.0, 8.0])  # after the next bump
    copy = import_graph(export_graph(graph))
    assert copy.get_operation(after.op.name).type == "read_variable"
