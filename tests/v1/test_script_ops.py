"""tf.py_func, tf.numpy_function, tf.py_function and tf.print (opsdk/v1/script_ops.py)."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError


def test_the_three_forms_call_python_when_the_step_runs():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None])
        top = tf.py_func(lambda a: np.sort(a)[::-1], [x], tf.float32)
        n, wide = tf.py_func(lambda a: (a.size, a + 1), [x], [tf.int64, tf.float64])
        total = tf.py_function(lambda a: a.numpy().sum(), [x], tf.float32)  # eager-style
        head = tf.numpy_function(lambda a, k: a[:k], [x, 2], tf.float32)
        assert top.get_shape().dims is None  # known when the function has run
        top.set_shape([None])  # declared: checked when it runs
        assert top.get_shape().as_list() == [None]
        pair = tf.py_func(lambda a: a[:2], [x], tf.float32)
        pair.set_shape([3])
        w = tf.Variable(2.0)
        assert tf.gradients(tf.reduce_sum(top * w), [x]) == [None]  # none passes, as in TF
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got = sess.run([top, n, wide, total, head], {x: [3.0, 1.0, 2.0]})
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"result 0 has shape \[2\], but its tensor was declared \[3\]"):
                sess.run(pair, {x: [3.0, 1.0, 2.0]})
            with pytest.raises(tf.errors.UnknownError, match="ZeroDivisionError"):
                sess.run(tf.py_func(lambda a: a / 0 if a.size else 1 // 0, [x], tf.float32),
                         {x: []})
    np.testing.assert_array_equal(got[0], [3, 2, 1])
    assert got[1] == 3 and got[2].dtype == np.float64 and got[3] == 6.0
    np.testing.assert_array_equal(got[4], [3, 1])


def _raise(exc):
    raise exc


@pytest.mark.parametrize("raised, seen", [
    (StopIteration(), "OutOfRangeError"), (ValueError("bad"), "InvalidArgumentError"),
    (TypeError("bad"), "InvalidArgumentError"), (MemoryError(), "ResourceExhaustedError"),
    (NotImplementedError(), "UnimplementedError"), (KeyError("k"), "UnknownError")])
def test_what_a_function_raises_is_the_error_tensorflow_maps_it_to(raised, seen):
    with tf.Graph().as_default():
        node = tf.py_func(lambda: _raise(raised), [], tf.float32)
        with tf.Session() as sess:
            with pytest.raises(getattr(tf.errors, seen), match=type(raised).__name__) as info:
                sess.run(node)
    assert info.value.error_code == getattr(tf.errors, seen).error_code_default
    assert info.value.raised is raised  # what the function raised stays reachable


def test_tf_print_writes_string_tensors_as_text_as_tensorflow_does():
    """A string constant or a fed string placeholder prints as "text", a list as ["a" "b"]
    (summarized), as TensorFlow 2.21's compat.v1 prints them; they were their UTF-8 bytes."""
    import io

    stream = io.StringIO()
    with tf.Graph().as_default():
        name = tf.placeholder(tf.string, shape=[])
        many = tf.constant(["ab", "c", "d", "e", "f", "g", "h"])
        shown = tf.print("run", name, tf.constant("hello"), many, 2, output_stream=stream)
        with tf.Session() as sess:
            sess.run(shown, {name: "émile"})
    assert stream.getvalue() == 'run "émile" "hello" ["ab" "c" "d" ... "f" "g" "h"] 2\n'


def test_tf_print_writes_when_it_runs_as_tf_formats(tmp_path):
    import io

    stream = io.StringIO()
    with tf.Graph().as_default():
        x = tf.constant(np.arange(10))
        y = tf.constant([[1.5, 2.0], [3.25, 4.0]])
        third = tf.constant([1 / 3], tf.float32)
        shown = tf.print("x:", x, "y", y, third, tf.constant(True), 0.5, output_stream=stream)
        with tf.control_dependencies([shown]):
            z = tf.identity(y)
        to_file = tf.print(x, summarize=-1, sep="|", end="!\n",
                           output_stream=f"file://{tmp_path / 'log.txt'}")
        assert isinstance(shown, tf.Operation)
        assert stream.getvalue() == ""  # nothing until it runs
        with tf.Session() as sess:
            sess.run(z)
            sess.run([to_file, to_file])  # one node: runs once per step
            sess.run(to_file)
        with pytest.raises(OpsdkError, match="summarize must be an int >= -1"):
            tf.print(x, summarize=-5)
        with pytest.raises(OpsdkError, match="output_stream must be"):
            tf.print(x, output_stream="log.txt")
    assert stream.getvalue() == "x: [0 1 2 ... 7 8 9] y [[1.5 2]\n [3.25 4]] [0.333333343] 1 0.5\n"
    assert (tmp_path / "log.txt").read_text() == "[0 1 2 3 4 5 6 7 8 9]!\n" * 2
