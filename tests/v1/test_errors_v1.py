"""`tf.errors`: a run's errors are raised as their tf.errors classes, and stay opsdk's own."""

from __future__ import annotations

import traceback

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpError as OpInputError, OpsdkError


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()


def test_an_uninitialised_variable_is_a_failed_precondition_a_program_can_catch():
    v = tf.Variable(3.0)
    with tf.Session() as sess:
        try:  # a TF1 idiom: initialise on the first failed read
            sess.run(v)
            raise AssertionError("the read should have failed")
        except tf.errors.FailedPreconditionError as exc:
            assert exc.error_code == tf.errors.FAILED_PRECONDITION
            assert isinstance(exc, OpsdkError) and isinstance(exc, tf.errors.OpError)
            assert "not initialised" in exc.message
            sess.run(tf.global_variables_initializer())
        assert sess.run(v) == 3.0
        with pytest.raises(tf.errors.FailedPreconditionError):
            sess.run(tf.Variable(1.0))  # through eval's default session too
        with pytest.raises(tf.errors.FailedPreconditionError):
            tf.Variable(2.0).eval()


def test_bad_inputs_of_a_run_are_invalid_arguments_and_keep_their_own_class():
    x = tf.placeholder(tf.float32, [None])
    y = tf.placeholder(tf.float32, [None])
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be fed"):
            sess.run(x * 2.0)
        with pytest.raises(tf.errors.InvalidArgumentError, match="do not broadcast") as caught:
            sess.run(x + y, {x: np.ones(2), y: np.ones(3)})
    # still the runtime's class (and a ValueError), with the traceback of where it was raised
    assert isinstance(caught.value, OpInputError) and isinstance(caught.value, ValueError)
    frames = traceback.extract_tb(caught.value.__traceback__)
    assert "opsdk/runtime" in frames[-1].filename.replace("\\", "/")


def test_the_classes_of_the_other_errors():
    from opsdk.dist.errors import TaskUnavailable
    from opsdk.runtime.exec.executor import CancelledError as RunCancelled
    from opsdk.runtime.ir.context import OpMemoryError
    from opsdk.v1.errors import as_tf_error

    for exc, tf_class in ((TaskUnavailable("task '/job:ps/task:0' died"), tf.errors.UnavailableError),
                          (RunCancelled("run: stopped because its timeout passed"),
                           tf.errors.DeadlineExceededError),
                          (RunCancelled("run: stopped because Session.close"), tf.errors.CancelledError),
                          (OpMemoryError("matmul: out of memory"), tf.errors.ResourceExhaustedError),
                          (OpsdkError("something else"), tf.errors.UnknownError)):
        seen = as_tf_error(exc)
        assert isinstance(seen, tf_class) and isinstance(seen, type(exc)), (exc, type(seen).__mro__)
        assert str(seen) == str(exc) and seen.error_code == tf_class.error_code_default
    already = tf.errors.OutOfRangeError(None, None, "end of data")
    assert as_tf_error(already) is already


def test_programs_raise_and_look_up_the_classes_as_tensorflow_has_them():
    with pytest.raises(tf.errors.OpError) as caught:
        raise tf.errors.OutOfRangeError(None, None, "End of sequence")
    assert caught.value.message == "End of sequence" and caught.value.op is None
    assert caught.value.error_code == tf.errors.OUT_OF_RANGE == 11
    assert tf.errors.exception_type_from_error_code(14) is tf.errors.UnavailableError
    assert tf.errors.error_code_from_exception_type(tf.errors.AbortedError) == tf.errors.ABORTED
    with pytest.raises(OpsdkError, match="codes are 1 to 16"):
        tf.errors.exception_type_from_error_code(99)
