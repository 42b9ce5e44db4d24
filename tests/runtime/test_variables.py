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
