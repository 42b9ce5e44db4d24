"""TF1 programs import modules of TensorFlow's internals (`from tensorflow.python.framework
import ops`, then `ops.reset_default_graph()`); under `--as-tensorflow` opsdk.v1 answers the
common ones with its own functions and refuses the rest naming itself (opsdk/v1/internals.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import opsdk.v1 as tf
from opsdk.v1 import internals

PROGRAM = textwrap.dedent("""
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.framework import ops, dtypes
    from tensorflow.python.ops import math_ops, array_ops, nn_ops, init_ops
    import tensorflow.python.ops.rnn_cell_impl as rnn_cell_impl
    from tensorflow.python.client import timeline

    tf.constant(1.0, name="left_over")
    ops.reset_default_graph()
    assert ops.get_default_graph().get_operations() == [], "reset_default_graph did nothing"
    x = tf.placeholder(dtypes.float32, [None, 2])
    w = tf.get_variable("w", [2, 1], initializer=init_ops.constant_initializer(2.0))
    y = math_ops.reduce_sum(nn_ops.relu(array_ops.reshape(tf.matmul(x, w), [-1])))
    assert isinstance(rnn_cell_impl.BasicLSTMCell(4), tf.nn.rnn_cell.BasicLSTMCell)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        print("y", sess.run(y, {x: np.array([[1., 2.], [-3., 0.]])}))
    print("timeline", timeline.Timeline.__name__)
    try:
        from tensorflow.python.ops import lookup_ops
    except ModuleNotFoundError as exc:
        print("refused", exc)
""")


def test_a_program_importing_tensorflow_python_modules_runs_as_tensorflow(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    done = subprocess.run([sys.executable, "-m", "opsdk.v1.run", "--as-tensorflow", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "y 6.0" in lines and "timeline Timeline" in lines
    refused = [l for l in lines if l.startswith("refused")]
    assert refused and "'tensorflow.python.ops.lookup_ops'" in refused[0]
    assert "opsdk.v1 answers only" in refused[0] and "tensorflow.python.framework.ops" in refused[0]


def _module(name):
    finder = internals.Finder()
    spec = finder.find_spec(f"tensorflow.python.{name}")
    return finder.create_module(spec)


def test_op_modules_pass_on_opsdk_v1s_functions_and_listed_modules_only_their_names():
    assert _module("ops.math_ops").reduce_sum is tf.reduce_sum
    assert _module("ops.math_ops").log_sigmoid is tf.math.log_sigmoid
    assert _module("ops.nn_ops").softmax is tf.nn.softmax
    assert _module("framework.ops").reset_default_graph is tf.reset_default_graph
    with pytest.raises(AttributeError, match="framework.ops.reduce_sum is not provided by "
                                             "opsdk.v1 .it carries Graph"):
        _module("framework.ops").reduce_sum
    with pytest.raises(AttributeError, match="array_ops.session is not provided"):
        _module("ops.array_ops").session  # opsdk.v1's own helper module, not a TF name
    assert "reset_default_graph" in dir(_module("framework.ops"))


def test_other_modules_of_tensorflow_python_are_refused_naming_opsdk_and_the_rest_ignored():
    finder = internals.Finder()
    with pytest.raises(ModuleNotFoundError, match="No module named 'tensorflow.python.training"
                                                  ".moving_averages': opsdk.v1 answers only"):
        finder.find_spec("tensorflow.python.training.moving_averages")
    assert finder.find_spec("numpy") is None
    assert finder.find_spec("tensorflow.pythonic") is None
