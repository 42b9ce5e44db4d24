"""A TF1 program written against TensorFlow 2's compat.v1 opens with `import
tensorflow.compat.v1 as tf` and `tf.disable_v2_behavior()`: under `--as-tensorflow` both work,
the switches to graph mode are accepted and those away from it refused (opsdk/v1/behavior.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

PROGRAM = textwrap.dedent("""
    import tensorflow.compat.v1 as tf
    from tensorflow.compat import v1
    tf.disable_v2_behavior()
    tf.disable_eager_execution()
    tf.get_logger().setLevel("ERROR")
    print("same", v1 is tf, "eager", tf.executing_eagerly())
    x = tf.placeholder(tf.float32, [None, 2])
    with tf.Session() as sess:
        print("y", sess.run(tf.reduce_sum(x * 2.0), {x: [[1.0, 2.0]]}))
""")


def test_a_compat_v1_program_runs_as_tensorflow(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    done = subprocess.run([sys.executable, "-m", "opsdk.v1.run", "--as-tensorflow", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["same True eager False", "y 6.0"]


def test_switches_to_graph_mode_are_accepted_and_the_queries_say_graph_mode():
    for name in ("disable_v2_behavior", "disable_eager_execution", "disable_resource_variables",
                 "enable_resource_variables", "disable_control_flow_v2",
                 "enable_control_flow_v2", "disable_tensor_equality", "disable_v2_tensorshape"):
        assert getattr(tf, name)() is None and getattr(tf.compat.v1, name) is getattr(tf, name)
    assert not any(getattr(tf, name)() for name in (
        "executing_eagerly", "executing_eagerly_outside_functions", "resource_variables_enabled",
        "control_flow_v2_enabled"))
    assert tf.get_logger().name == "tensorflow"


@pytest.mark.parametrize("name, what", [
    ("enable_eager_execution", "eager execution"), ("enable_v2_behavior", "TensorFlow 2's"),
    ("enable_tensor_equality", "elementwise `==`"), ("enable_v2_tensorshape", "TensorFlow 2.s Ten")])
def test_switches_away_from_graph_mode_are_refused_naming_them(name, what):
    with pytest.raises(OpsdkError, match=f"tf.{name}: opsdk.v1 runs TensorFlow 1's graph mode "
                                         f"only; {what}"):
        getattr(tf, name)()


def test_custom_gradient_under_its_tf1_name():
    # opsdk's own (tests/runtime/test_custom_gradient.py checks it against TF's values)
    import opsdk
    assert tf.custom_gradient is opsdk.custom_gradient
