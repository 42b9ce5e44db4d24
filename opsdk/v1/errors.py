"""`tf.errors`: TensorFlow's error classes and codes, and what opsdk raises seen as them.

A TF1 program catches `tf.errors.OutOfRangeError`, `tf.errors.FailedPreconditionError`, ... .
`Session.run` (and a monitored session's `run`) raises opsdk's errors as the matching class,
made a subclass of both, so `except tf.errors.InvalidArgumentError` and `except OpsdkError`
(or `ValueError`, for an op's bad input) catch the same error:

| opsdk raises | tf.errors |
|---|---|
| an op's bad input (`OpError`: shapes, dtypes, attrs), a placeholder not fed | InvalidArgumentError |
| a variable read before it was initialised | FailedPreconditionError |
| a run cancelled (`Session.close`, Ctrl-C) / past its timeout | CancelledError / DeadlineExceededError |
| a kernel out of memory | ResourceExhaustedError |
| a kernel not written or not built | UnimplementedError |
| a py_func's function raising (as TensorFlow maps it; a tf.errors class as itself): ValueError, TypeError / StopIteration / MemoryError / NotImplementedError / anything else | InvalidArgumentError / OutOfRangeError / ResourceExhaustedError / UnimplementedError / UnknownError |
| a task that died or does not answer (opsdk.dist) | UnavailableError |
| a step stopped because another task failed (opsdk.dist) | AbortedError |
| any other error of a run | UnknownError |
"""

from __future__ import annotations

from typing import Any, Optional

from opsdk.registry.errors import OpsdkError

(OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND, ALREADY_EXISTS,
 PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE,
 UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS, UNAUTHENTICATED) = range(17)


class OpError(OpsdkError):
    """`tf.errors.OpError(node_def, op, message, error_code)`: the base of the classes below."""

    error_code_default = UNKNOWN

    def __init__(self, node_def: Any = None, op: Any = None, message: str = "",
                 error_code: Optional[int] = None, *args: Any):
        super().__init__(message)
        self.node_def, self.op = node_def, op
        self._message = message
        self._error_code = self.error_code_default if error_code is None else error_code

    @property
    def message(self) -> str:
        return getattr(self, "_message", None) or str(self)

    @property
    def error_code(self) -> int:
        return getattr(self, "_error_code", self.error_code_default)


def _error(name: str, code: int) -> type:
    def __init__(self: Any, node_def: Any = None, op: Any = None, message: str = "",
                 *args: Any) -> None:
        OpError.__init__(self, node_def, op, message, code)

    return type(name, (OpError,), {"__init__": __init__, "error_code_default": code,
                                   "__doc__": f"`tf.errors.{name}` (code {code})."})


CancelledError = _error("CancelledError", CANCELLED)
UnknownError = _error("UnknownError", UNKNOWN)
InvalidArgumentError = _error("InvalidArgumentError", INVALID_ARGUMENT)
DeadlineExceededError = _error("DeadlineExceededError", DEADLINE_EXCEEDED)
NotFoundError = _error("NotFoundError", NOT_FOUND)
AlreadyExistsError = _error("AlreadyExistsError", ALREADY_EXISTS)
PermissionDeniedError = _error("PermissionDeniedError", PERMISSION_DENIED)
ResourceExhaustedError = _error("ResourceExhaustedError", RESOURCE_EXHAUSTED)
FailedPreconditionError = _error("FailedPreconditionError", FAILED_PRECONDITION)
AbortedError = _error("AbortedError", ABORTED)
OutOfRangeError = _error("OutOfRangeError", OUT_OF_RANGE)
UnimplementedError = _error("UnimplementedError", UNIMPLEMENTED)
InternalError = _error("InternalError", INTERNAL)
UnavailableError = _error("UnavailableError", UNAVAILABLE)
DataLossError = _error("DataLossError", DATA_LOSS)
UnauthenticatedError = _error("UnauthenticatedError", UNAUTHENTICATED)

_BY_CODE = {cls.error_code_default: cls for cls in (
    CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError, NotFoundError,
    AlreadyExistsError, PermissionDeniedError, ResourceExhaustedError, FailedPreconditionError,
    AbortedError, OutOfRangeError, UnimplementedError, InternalError, UnavailableError,
    DataLossError, UnauthenticatedError)}


def exception_type_from_error_code(error_code: int) -> type:
    try:
        return _BY_CODE[error_code]
    except KeyError:
        raise OpsdkError(f"tf.errors: no error class has code {error_code!r} "
                         "(codes are 1 to 16)") from None


def error_code_from_exception_type(cls: type) -> int:
    for base in cls.__mro__:
        if base in _BY_CODE.values():
            return base.error_code_default
    return UNKNOWN


def _tf_class(exc: BaseException) -> type:
    """The tf.errors class an opsdk error of a run is (the table in the module docstring)."""
    from opsdk.dist.errors import TaskUnavailable
    from opsdk.dist.task import StepAborted
    from opsdk.registry.errors import KernelNotBuiltError, OpError as OpInputError
    from opsdk.runtime.compile.prune import UnfedPlaceholderError
    from opsdk.runtime.exec.executor import CancelledError as RunCancelled
    from opsdk.runtime.exec.variable_store import UninitialisedVariableError
    from opsdk.runtime.ir.context import KernelNotWrittenError, OpMemoryError
    from opsdk.runtime.ir.primitives import PyFuncError

    if isinstance(exc, PyFuncError):
        if isinstance(exc.raised, OpError):  # a tf.errors class raised on purpose
            return _BY_CODE.get(exc.raised.error_code, UnknownError)
        for raised, tf_class in ((StopIteration, OutOfRangeError),
                                 ((ValueError, TypeError), InvalidArgumentError),
                                 (MemoryError, ResourceExhaustedError),
                                 (NotImplementedError, UnimplementedError)):
            if isinstance(exc.raised, raised):
                return tf_class
        return UnknownError

    for opsdk_class, tf_class in (
            (TaskUnavailable, UnavailableError), (StepAborted, AbortedError),
            (OpMemoryError, ResourceExhaustedError), (KernelNotWrittenError, UnimplementedError),
            (KernelNotBuiltError, UnimplementedError),
            (UninitialisedVariableError, FailedPreconditionError),
            (OpInputError, InvalidArgumentError), (UnfedPlaceholderError, InvalidArgumentError)):
        if isinstance(exc, opsdk_class):
            return tf_class
    if isinstance(exc, RunCancelled):
        return DeadlineExceededError if "timeout" in str(exc) else CancelledError
    return UnknownError


_combined: dict[tuple[type, type], type] = {}


def _plain_init(self: BaseException, *args: Any) -> None:
    """A combined class's __init__: the arguments kept as they are (the attributes are copied
    from the error it stands for)."""
    BaseException.__init__(self, *args)


def as_tf_error(exc: OpsdkError) -> OpsdkError:
    """`exc` as an instance of its tf.errors class and of its own class (same message,
    attributes and traceback). An error already of a tf.errors class is returned as it is."""
    if isinstance(exc, OpError):
        return exc
    tf_class, own = _tf_class(exc), type(exc)
    combined = _combined.get((tf_class, own))
    if combined is None:
        combined = type(tf_class.__name__, (tf_class, own), {
            "__module__": __name__, "__init__": _plain_init,
            "__doc__": f"{own.__name__} seen as tf.errors.{tf_class.__name__}"})
        _combined[(tf_class, own)] = combined
    seen = combined(*exc.args)
    seen.__dict__.update(vars(exc))
    seen.node_def, seen.op = getattr(exc, "node_def", None), getattr(exc, "op", None)
    seen._message = str(exc)
    seen._error_code = tf_class.error_code_default
    return seen.with_traceback(exc.__traceback__)
