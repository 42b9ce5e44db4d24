"""Feeds keep their values: a value the placeholder's dtype cannot hold is refused, naming the
placeholder; big-endian arrays and other frameworks' tensors are read exactly."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk import ops
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.exec.session import Session
from opsdk.runtime.ir.graph import placeholder


@pytest.mark.parametrize("value, dtype", [
    (2**40, "int32"), (2**31, "int32"), (-2**31 - 1, "int32"), (np.uint64(2**64 - 1), "int32"),
    (np.array([1, 2**33], np.int64), "int32"), (np.uint64(2**63), "int64"),
    (np.array([0, 70000], np.int64), "int16"), (np.int64(128), "int8")])
def test_an_integer_out_of_the_placeholders_range_is_refused(graph, value, dtype):
    x = placeholder(dtype, None, name="x")
    with Session(graph) as sess:
        with pytest.raises(OpsdkError, match=rf"^feed for 'x:0' holds values that {dtype} cannot "
                                             r"represent \(e\.g\. -?\d+\)"):
            sess.run(x, {x: value})


def test_integers_at_the_ends_of_the_placeholders_range_are_kept(graph):
    x = placeholder("int64", [2], name="x")
    edges = np.array([2**63 - 1, 0], np.uint64)
    with Session(graph) as sess:
        assert sess.run(x, {x: edges}).tolist() == [2**63 - 1, 0]


def test_a_float_overflowing_the_placeholder_is_refused_and_in_range_values_convert(graph):
    f = placeholder("float32", [2], name="f")
    i = placeholder("int32", [2], name="i")
    with Session(graph) as sess:
        with pytest.raises(OpsdkError, match=r"^feed for 'f:0' holds values that float32 "
                                             r"cannot represent \(e\.g\. 1e\+300\)"):
            sess.run(f * 2.0, {f: np.array([1e300, 1.0])})
        np.testing.assert_array_equal(sess.run(f * 2.0, {f: np.array([np.inf, 1.0])}),
                                      [np.inf, 2.0])  # not an overflow: it was infinite
        edges = np.array([-2**31, 2**31 - 1], np.int64)
        np.testing.assert_array_equal(sess.run(i, {i: edges}), edges)


@pytest.mark.parametrize("order", [">f4", ">f8"])
def test_a_big_endian_feed_is_read_exactly(graph, order):
    f = placeholder("float32", [1, 3], name="f")
    value = np.array([[1.5, -2.25, 3e38]], order)
    with Session(graph) as sess:
        out = sess.run(ops.pairwise_manhattan(f, f * 0.0), {f: value})  # a compiled kernel
    np.testing.assert_array_equal(out, np.abs(value.astype(np.float32)).sum(-1, keepdims=True))


def test_a_torch_tensor_that_requires_grad_is_fed_by_value(graph):
    torch = pytest.importorskip("torch")
    f = placeholder("float32", [2], name="f")
    with Session(graph) as sess:
        out = sess.run(f * 2.0, {f: torch.tensor([1.0, -3.0], requires_grad=True)})
    np.testing.assert_array_equal(out, [2.0, -6.0])


def test_a_repeated_run_checks_and_converts_every_feed_as_the_first_did(graph):
    # The second and later runs take Session.run's remembered feed handling (one specialised
    # check per key): a wrong shape or dtype is still refused and a convertible value converted.
    x = placeholder("float32", [None, 3], name="x")
    unused = placeholder("int32", [2], name="unused")
    doubled = x * 2.0
    good = np.ones((2, 3), np.float32)
    with Session(graph) as sess:
        for _ in range(2):
            np.testing.assert_array_equal(sess.run([doubled], {x: good, unused: [1, 2]})[0], 2 * good)
        got = sess.run([doubled], {x: [[1.0, 2.0, 3.0]], unused: np.array([1, 2], np.int64)})[0]
        assert got.dtype == np.float32 and got.tolist() == [[2.0, 4.0, 6.0]]
        assert sess.run([doubled], {x: good.astype(">f4"), unused: [0, 0]})[0].dtype == np.float32
        with pytest.raises(OpsdkError, match=r"^feed for 'x:0' has shape \[2, 4\] but the "
                                             r"tensor's shape is \[\?, 3\]"):
            sess.run([doubled], {x: np.ones((2, 4), np.float32), unused: [1, 2]})
        with pytest.raises(OpsdkError, match=r"^feed for 'x:0' has shape \[3\]"):
            sess.run([doubled], {x: np.ones(3, np.float32), unused: [1, 2]})
        with pytest.raises(OpsdkError, match=r"^feed for 'unused:0' has dtype float32, which "
                                             r"does not convert to the tensor's int32"):
            sess.run([doubled], {x: good, unused: np.ones(2, np.float32)})
        with pytest.raises(OpsdkError, match=r"^feed for 'unused:0' holds values that int32 "):
            sess.run([doubled], {x: good, unused: np.array([2**40, 0])})
        # the same keys in another order: the values go to their own placeholders
        np.testing.assert_array_equal(sess.run([doubled], {unused: [1, 2], x: 3 * good})[0],
                                      6 * good)
