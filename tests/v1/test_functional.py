"""tf.map_fn, tf.scan, tf.foldl and tf.foldr (opsdk/v1/functional.py): values against NumPy
loops, gradients against central finite differences, nested elems, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

from finite_differences import numeric_grad

XV = np.arange(12.0).reshape(4, 3) / 7 - 0.5


def _scan_np(fn, rows, init=None, reverse=False):
    order = list(range(len(rows)))[::-1] if reverse else list(range(len(rows)))
    out = {}
    acc = init
    for k, t in enumerate(order):
        acc = rows[t] if init is None and k == 0 else fn(acc, rows[t])
        out[t] = acc
    return np.stack([out[t] for t in range(len(rows))])


CASES = {
    "map_fn": (lambda x: tf.map_fn(lambda r: tf.reduce_sum(r * r) + r[0], x),
               lambda v: np.array([np.sum(r * r) + r[0] for r in v])),
    "map_fn to a tuple": (
        lambda x: tf.map_fn(lambda r: (r * 2.0, tf.reduce_max(r)), x,
                            dtype=(tf.float64, tf.float64))[0] * 3.0,
        lambda v: v * 6.0),
    "scan": (lambda x: tf.scan(lambda a, r: a * 0.5 + tf.tanh(r), x),
             lambda v: _scan_np(lambda a, r: a * 0.5 + np.tanh(r), v)),
    "scan with an initializer": (
        lambda x: tf.scan(lambda a, r: a * tf.reduce_sum(r), x,
                          initializer=tf.constant(1.5, tf.float64)),
        lambda v: _scan_np(lambda a, r: a * np.sum(r), v, init=1.5)),
    "scan reversed": (lambda x: tf.scan(lambda a, r: a * r + r, x, reverse=True),
                      lambda v: _scan_np(lambda a, r: a * r + r, v, reverse=True)),
    "foldl": (lambda x: tf.foldl(lambda a, r: a * 0.5 + r * r, x),
              lambda v: _scan_np(lambda a, r: a * 0.5 + r * r, v)[-1]),
    "foldr": (lambda x: tf.foldr(lambda a, r: a * 0.5 + r, x,
                                 initializer=tf.zeros([3], tf.float64)),
              lambda v: _scan_np(lambda a, r: a * 0.5 + r, v, init=np.zeros(3),
                                 reverse=True)[0]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_values_and_gradients_match_loops_and_finite_differences(case):
    build, expected = CASES[case]
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [None, 3])
        y = build(x)
        loss = tf.reduce_sum(y * y)
        (grad,) = tf.gradients(loss, [x])
        with tf.Session() as sess:
            for rows in (XV, XV[:1], XV[:2] * -3.0):  # the count is read at run time
                got, g = sess.run([y, grad], {x: rows})
                np.testing.assert_allclose(got, expected(rows), rtol=1e-12, atol=1e-12)
                np.testing.assert_allclose(g, numeric_grad(sess, loss, x, {x: rows}), rtol=1e-6,
                                           atol=1e-8)


def test_nested_elems_and_a_loop_counter_index():
    # elems a tuple unpacked together; fn indexes a captured tensor with a scalar tensor
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [None, 3])
        ids = tf.placeholder(tf.int32, [None])
        table = tf.constant(np.arange(15.0).reshape(5, 3))
        rows = tf.map_fn(lambda e: e[0] + table[e[1]], (x, ids), dtype=tf.float64)
        pairs = tf.scan(lambda acc, e: (acc[0] + e[0], acc[1] * e[1]), (x, ids),
                        initializer=(tf.zeros([3], tf.float64), tf.constant(1)))
        with tf.Session() as sess:
            got, (sums, products) = sess.run([rows, pairs], {x: XV, ids: [4, 0, 2, 2]})
    np.testing.assert_allclose(got, XV + np.arange(15.0).reshape(5, 3)[[4, 0, 2, 2]])
    np.testing.assert_allclose(sums, np.cumsum(XV, axis=0))
    np.testing.assert_array_equal(products, [4, 0, 0, 0])


def test_back_prop_false_stops_the_gradient():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [None, 3])
        y = tf.map_fn(lambda r: r * r, x, back_prop=False)
        assert tf.gradients(tf.reduce_sum(y), [x]) == [None]


@pytest.mark.parametrize("build, message", [
    (lambda x: tf.map_fn(lambda r: (r, r), x), r"unlike elems .*give dtype="),
    (lambda x: tf.map_fn(lambda r: r, x, dtype=tf.int32), "result 0 is float64, but dtype"),
    (lambda x: tf.map_fn(lambda r: r, tf.constant(1.0)), "is a scalar"),
    (lambda x: tf.map_fn(lambda r: r, (x, tf.zeros([5, 2]))), "differ in their first"),
    (lambda x: tf.scan(lambda a, r: (a, a), x), "accumulator"),
    (lambda x: tf.foldl(lambda a, r: tf.cast(a, tf.float32), x), "turns loop variable"),
])
def test_mistakes_are_named(build, message):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [4, 3])
        with pytest.raises(OpsdkError, match=message):
            build(x)


def _loops(fw):
    """tf.while_loop and tf.cond called as TF1 programs call them, in framework `fw` (opsdk.v1
    or TensorFlow's compat.v1): the values, and which results are single tensors."""
    fw.reset_default_graph()
    i, x = fw.constant(0), fw.constant(2.0)
    limit = fw.placeholder(fw.int32, [])
    single = fw.while_loop(lambda i: i < 20, lambda i: i + 1, [i])
    same = fw.while_loop(lambda i: i < 20, lambda i: i + 1, [i], return_same_structure=True)
    positional = fw.while_loop(lambda i: i < 20, lambda i: i + 1, [i], None, 10)  # parallel_iterations
    bounded = fw.while_loop(lambda k, y: k < 10, lambda k, y: (k + 1, y * x), (i, x),
                            maximum_iterations=limit)
    unbounded = fw.while_loop(lambda k, y: k < 3, lambda k, y: (k + 1, y * x), [i, x],
                              parallel_iterations=32, swap_memory=True)
    frozen = fw.while_loop(lambda k, y: k < 3, lambda k, y: (k + 1, y * x), [i, x], back_prop=False)
    picked = fw.cond(x > 1.0, lambda: x * 3.0, lambda: x, strict=True)
    kinds = [type(single).__name__, type(same).__name__, type(bounded).__name__]
    grads = [fw.gradients(bounded[1], x)[0], fw.gradients(unbounded[1], x)[0], fw.gradients(picked, x)[0]]
    assert fw.gradients(frozen[1], x) == [None]
    with fw.Session() as sess:
        values = sess.run([single, same[0], positional, bounded[1], unbounded[1], picked, *grads],
                          {limit: 2})
    return kinds, [float(v) for v in values]


def test_while_loop_and_cond_take_tf1s_arguments():
    kinds, values = _loops(tf)
    assert kinds[0] == "Tensor" and kinds[1] == "list" and kinds[2] == "tuple"
    # 20, 20, 20 (10 is parallel_iterations, not a bound); x^3 after 2 of 10 iterations; x^4;
    # 3x; gradients 3x^2, 4x^3, 3
    assert values == [20, 20, 20, 8.0, 16.0, 6.0, 12.0, 32.0, 3.0]
    with pytest.raises(OpsdkError, match="parallel_iterations must be a positive int"):
        tf.while_loop(lambda i: i < 2, lambda i: i + 1, [0], parallel_iterations=0)
    with pytest.raises(OpsdkError, match="maximum_iterations must be a scalar int tensor"):
        tf.while_loop(lambda i: i < 2, lambda i: i + 1, [0], maximum_iterations=tf.constant(2.0))
    with pytest.raises(OpsdkError, match="give both true_fn and false_fn"):
        tf.cond(tf.constant(True), lambda: 1)
    assert tf.Session().run(tf.cond(tf.constant(False), fn1=lambda: tf.constant(1),
                                    fn2=lambda: tf.constant(2))) == 2


def test_python_numbers_as_loop_variables_are_int32_and_float32_as_in_tf():
    # Before, 0 became an int64 constant, and comparing it with tf.shape's int32 failed
    x = tf.placeholder(tf.float32, [None])
    n = tf.shape(x)[0]
    i, total, pair = tf.while_loop(lambda i, s, p: i < n,
                                   lambda i, s, p: (i + 1, s + 1.5, (p[0] * 2, p[1])),
                                   [0, 0.0, (np.float32(1.0), 7)])
    assert i.dtype == tf.int32 and total.dtype == tf.float32
    assert pair[0].dtype == tf.float32 and pair[1].dtype == tf.int32
    with tf.Session() as sess:
        assert sess.run([i, total, pair], {x: [1.0, 2.0, 3.0]}) == [3, 4.5, (8.0, 7)]


def test_while_loop_and_cond_match_tensorflow():
    tensorflow = pytest.importorskip("tensorflow", reason="the comparison needs TensorFlow "
                                     "(pip install opsdk[tf])")
    theirs = tensorflow.compat.v1
    theirs.disable_eager_execution()
    kinds, values = _loops(theirs)
    assert kinds[0] != "list" and kinds[1] == "list" and kinds[2] == "tuple"
    assert values == _loops(tf)[1]


def test_case_picks_the_first_true_pair_and_fails_the_step_as_tfs_does():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [])
    first = tf.case([(tf.less(x, 0.0), lambda: -x), (tf.greater(x, 10.0), lambda: x / 10.0)],
                    default=lambda: x + 100.0)
    (grad,) = tf.gradients(first, [x])
    no_default = tf.case({tf.less(x, 0.0): lambda: tf.constant(-1.0),
                          tf.greater(x, 0.0): lambda: tf.constant(1.0)})
    exclusive = tf.case([(tf.less(x, 5.0), lambda: 1.0), (tf.less(x, 10.0), lambda: 2.0)],
                        default=lambda: 3.0, exclusive=True)
    with tf.Session() as sess:
        for value, want, slope in ((-3.0, 3.0, -1.0), (4.0, 104.0, 1.0), (20.0, 2.0, 0.1)):
            got = sess.run([first, grad], {x: value})
            np.testing.assert_allclose(got, [want, slope], rtol=1e-6)
        assert sess.run(no_default, {x: -2.0}) == -1.0 and sess.run(no_default, {x: 3.0}) == 1.0
        assert sess.run(exclusive, {x: 7.0}) == 2.0 and sess.run(exclusive, {x: 12.0}) == 3.0
        with pytest.raises(tf.errors.InvalidArgumentError, match="None of conditions evaluated"):
            sess.run(no_default, {x: 0.0})
        with pytest.raises(tf.errors.InvalidArgumentError, match="exclusive=True: more than 1"):
            sess.run(exclusive, {x: 2.0})
    with pytest.raises(OpsdkError, match="the predicate of pair 0 .* must be a bool scalar"):
        tf.case([(x, lambda: x)])


def test_asserts_pass_quietly_and_fail_the_step_naming_their_message():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None])
    with tf.control_dependencies([tf.assert_positive(x, message="x must be positive"),
                                  tf.debugging.assert_less(x, 10.0)]):
        y = tf.identity(x * 2.0)
    checked = tf.Assert(tf.reduce_all(tf.equal(x, x)), ["never shown", x])
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(y, {x: [1.0, 2.0]}), [2.0, 4.0])
        sess.run(checked, {x: [1.0]})
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"x must be positive.*Condition x > 0 .*\[1.0 -1.0\]"):
            sess.run(y, {x: [1.0, -1.0]})
        with pytest.raises(tf.errors.InvalidArgumentError, match="Condition x < y"):
            sess.run(y, {x: [11.0]})


def test_an_error_raised_by_a_py_func_inside_a_cond_branch_reaches_the_caller():
    # the branch's error was rebuilt through its class's constructor, which a py_func's error
    # (carrying what the function raised) does not take with one argument: a TypeError instead
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [])

    def refuse(v):
        raise ValueError("refused inside the branch")
    out = tf.cond(x > 0.0, lambda: tf.py_func(refuse, [x], tf.float32), lambda: x)
    with tf.Session() as sess:
        assert sess.run(out, {x: -1.0}) == -1.0
        with pytest.raises(tf.OpsdkError, match="cond .*refused inside the branch"):
            sess.run(out, {x: 1.0})
