"""Segment maxima and minima (opdefs/builtin/segment.yaml): against NumPy per segment, their
gradients against central differences on hypothesis-drawn cases whose every segment is named
(an empty segment of the unsorted ops holds the dtype's extreme value, next to which a central
difference vanishes), ties sharing the gradient equally, empty segments and dropped (negative) ids."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import opsdk
from opsdk import ops

from finite_differences import numeric_grad


@st.composite
def segmented(draw):
    """data [n, m] of distinct values (no ties: the maxima are not kinked there), ids naming
    each of k segments at least once, in any order (sorted too, for the sorted ops)."""
    k = draw(st.integers(1, 4))
    n = draw(st.integers(k, 7))
    m = draw(st.integers(1, 3))
    ids = np.array(list(range(k)) + [draw(st.integers(0, k - 1)) for _ in range(n - k)])
    order = np.random.default_rng(draw(st.integers(0, 2**31 - 1))).permutation(n)
    values = np.random.default_rng(draw(st.integers(0, 2**31 - 1))).permutation(n * m)
    data = (values.reshape(n, m) * 0.37 - 3.0)
    return data, ids[order], k


def _graph(name, data, ids, k):
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float64", [None, data.shape[1]], name="x")
        i = opsdk.placeholder("int64", [None], name="i")
        attrs = {"num_segments": k} if name.startswith("unsorted") else {}
        y = getattr(ops, name)(x, i, **attrs)
        w = opsdk.constant(np.random.default_rng(1).uniform(0.5, 1.5, (k, data.shape[1])))
        loss = ops.reduce_sum(ops.mul(ops.mul(y, y), w))
        grad, = opsdk.gradients(loss, [x])
    return g, x, i, y, loss, grad


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(segmented(), st.sampled_from(["unsorted_segment_max", "unsorted_segment_min",
                                     "segment_max", "segment_min"]))
def test_values_and_gradients_against_numpy_and_central_differences(case, name):
    data, ids, k = case
    if not name.startswith("unsorted"):
        ids = np.sort(ids)
    g, x, i, y, loss, grad = _graph(name, data, ids, k)
    pick = np.max if name.endswith("max") else np.min
    with opsdk.Session(g) as sess:
        feeds = {x: data, i: ids}
        got, got_grad = sess.run([y, grad], feeds)
        np.testing.assert_allclose(got_grad, numeric_grad(sess, loss, x, feeds), rtol=1e-6,
                                   atol=1e-7)
    np.testing.assert_array_equal(got, np.stack([pick(data[ids == s], axis=0) for s in range(k)]))


def test_ties_share_the_gradient_and_empty_segments_hold_what_tensorflows_do():
    data = np.array([[1.0, 5.0], [3.0, 5.0], [3.0, 2.0], [7.0, 0.0]])
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float64", [4, 2], name="x")
        unsorted = ops.unsorted_segment_max(x, opsdk.constant(np.array([0, 0, 0, -1])),
                                            num_segments=3)  # id -1: dropped
        lowest = ops.unsorted_segment_min(x, opsdk.constant(np.array([2, 2, 2, 2])),
                                          num_segments=3)
        sorted_ = ops.segment_max(x, opsdk.constant(np.array([0, 0, 2, 2])))  # segment 1: empty
        first = ops.slice(unsorted, begin=[0, 0], size=[1, -1])  # (the empty rows overflow a sum)
        grad, = opsdk.gradients(ops.reduce_sum(first), [x])
    with opsdk.Session(g) as sess:
        got, low, srt, got_grad = sess.run([unsorted, lowest, sorted_, grad], {x: data})
    big = np.finfo(np.float64).max
    np.testing.assert_array_equal(got, [[3.0, 5.0], [-big, -big], [-big, -big]])
    np.testing.assert_array_equal(low, [[big, big], [big, big], [1.0, 0.0]])
    np.testing.assert_array_equal(srt, [[3.0, 5.0], [0.0, 0.0], [7.0, 2.0]])
    # column 0: rows 1 and 2 tie at 3 (half each); column 1: rows 0 and 1 tie at 5; row 3 dropped
    np.testing.assert_array_equal(got_grad, [[0.0, 0.5], [0.5, 0.5], [0.5, 0.0], [0.0, 0.0]])


def test_unsorted_ids_are_refused_by_the_sorted_ops():
    g = opsdk.Graph()
    with g.as_default():
        y = ops.segment_min(opsdk.constant(np.ones((3, 2))), opsdk.constant(np.array([1, 0, 2])))
    with opsdk.Session(g) as sess, pytest.raises(Exception, match=r"segment_min \(node "
                                                 r"'segment_min'\): segment_ids must be sorted "
                                                 r".*unsorted_segment_min takes"):
        sess.run(y)
