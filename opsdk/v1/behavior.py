"""The switches a TF1 program written against TensorFlow 2's `tf.compat.v1` calls first:
`tf.disable_v2_behavior()`, `tf.disable_eager_execution()`, and the like.

opsdk.v1 is TensorFlow 1's graph mode, always: turning TF2's behaviours off asks for what is
already so, and is accepted; turning one on that opsdk.v1 does not have (eager execution, TF2's
tensor equality and shapes) is an error naming it, rather than a program silently running under
rules it did not ask for. Resource variables and the second version of control flow change
nothing a program sees through these names (values, gradients, `tf.while_loop`), so both
switches are accepted and the queries answer False, as TF 1.15 does by default.
"""

from __future__ import annotations

import logging
from typing import Any

from opsdk.registry.errors import OpsdkError


def _accepted(name: str, doc: str) -> Any:
    def switch(*args: Any, **kwargs: Any) -> None:
        return None
    switch.__name__, switch.__doc__ = name, doc
    return switch


def _refused(name: str, what: str) -> Any:
    def switch(*args: Any, **kwargs: Any) -> None:
        raise OpsdkError(f"tf.{name}: opsdk.v1 runs TensorFlow 1's graph mode only; {what} is "
                         "not provided (docs/tf1.md)")
    switch.__name__, switch.__doc__ = name, f"Refused: {what} is not provided."
    return switch


def _answer(name: str, value: bool) -> Any:
    def query(*args: Any, **kwargs: Any) -> bool:
        return value
    query.__name__, query.__doc__ = name, f"{value}: opsdk.v1 is graph mode."
    return query


def get_logger() -> logging.Logger:
    """The `tensorflow` logger, as TensorFlow's tf.get_logger()."""
    return logging.getLogger("tensorflow")


NAMES: dict[str, Any] = {
    "disable_v2_behavior": _accepted("disable_v2_behavior", "Accepted: graph mode is the only one."),
    "disable_eager_execution": _accepted("disable_eager_execution", "Accepted: nothing is eager."),
    "disable_resource_variables": _accepted("disable_resource_variables", "Accepted."),
    "enable_resource_variables": _accepted("enable_resource_variables",
                                           "Accepted: variables behave alike either way here."),
    "disable_control_flow_v2": _accepted("disable_control_flow_v2", "Accepted."),
    "enable_control_flow_v2": _accepted("enable_control_flow_v2",
                                        "Accepted: tf.cond and tf.while_loop behave alike."),
    "disable_tensor_equality": _accepted("disable_tensor_equality",
                                         "Accepted: `==` of tensors compares identity, as TF1."),
    "disable_v2_tensorshape": _accepted("disable_v2_tensorshape",
                                        "Accepted: a TensorShape holds Dimensions, as TF1's."),
    "enable_v2_behavior": _refused("enable_v2_behavior", "TensorFlow 2's behaviour"),
    "enable_eager_execution": _refused("enable_eager_execution", "eager execution"),
    "enable_tensor_equality": _refused("enable_tensor_equality",
                                       "elementwise `==` of tensors (use tf.equal)"),
    "enable_v2_tensorshape": _refused("enable_v2_tensorshape", "TensorFlow 2's TensorShape"),
    "executing_eagerly": _answer("executing_eagerly", False),
    "executing_eagerly_outside_functions": _answer("executing_eagerly_outside_functions", False),
    "resource_variables_enabled": _answer("resource_variables_enabled", False),
    "control_flow_v2_enabled": _answer("control_flow_v2_enabled", False),
    "get_logger": get_logger,
}
