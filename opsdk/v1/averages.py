"""`tf.train.ExponentialMovingAverage`: a shadow variable per averaged variable or tensor, and an
update op `shadow -= (shadow - value) * (1 - decay)` that the program runs (usually after its
training step: `with tf.control_dependencies([train_op]): train_op = ema.apply(vars)`)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import misc, scopes
from opsdk.v1.tensors import Variable, convert_to_tensor

MOVING_AVERAGE_VARIABLES = "moving_average_variables"


class ExponentialMovingAverage:
    """TF1's moving averages. `decay` a number; with `num_updates` (a step counter) the decay
    is `min(decay, (1 + num_updates) / (10 + num_updates))`, so early averages follow faster.
    A Variable's shadow starts at its initial value, a tensor's at zeros (as TF's)."""

    def __init__(self, decay: float, num_updates: Any = None, zero_debias: bool = False,
                 name: str = "ExponentialMovingAverage"):
        if zero_debias:
            raise misc.NotProvided("tf.train.ExponentialMovingAverage(zero_debias=True) is not "
                                   "provided by opsdk.v1")
        self.decay, self.name = float(decay), name
        self._num_updates = num_updates
        self._averages: dict[int, tuple[Any, Variable]] = {}  # id(var) -> (var, shadow)

    def apply(self, var_list: Any = None) -> Any:
        """Make the shadows of `var_list` (default: the trainable variables) and return one op
        that updates them all."""
        var_list = scopes.trainable_variables() if var_list is None else list(var_list)
        decay = self._decay()
        updates = []
        for var in var_list:
            if id(var) in self._averages:
                raise OpsdkError(f"ExponentialMovingAverage.apply: '{_name(var)}' is averaged "
                                 "already (apply it once per variable)")
            shadow = self._shadow(var)
            self._averages[id(var)] = (var, shadow)
            value = _value(var)
            rate = _ops.sub(_const(1.0, value), _ops.cast(decay, dtype=value.dtype))
            updates.append(shadow.assign_sub((shadow.read() - value) * rate))
            opsdk.get_default_graph().add_to_collection(MOVING_AVERAGE_VARIABLES, var)
        return scopes.group(updates, name=self.name)

    def average(self, var: Any) -> Optional[Variable]:
        """The shadow variable of `var`, or None when `apply` has not averaged it."""
        found = self._averages.get(id(var))
        return found[1] if found is not None and found[0] is var else None

    def average_name(self, var: Any) -> str:
        """The shadow's name: `<var's op name>/<this average's name>`."""
        return f"{_name(var)}/{self.name}"

    def variables_to_restore(self, moving_avg_variables: Any = None) -> Any:
        raise misc.NotProvided("tf.train.ExponentialMovingAverage.variables_to_restore is not "
                               "provided by opsdk.v1 (its Saver takes no name map)")

    def _decay(self) -> Any:
        decay = opsdk.constant(np.float32(self.decay))
        if self._num_updates is None:
            return decay
        steps = _ops.cast(convert_to_tensor(self._num_updates), dtype="float32")
        ratio = _ops.div(steps + _const(1.0, decay), steps + _const(10.0, decay))
        return _ops.minimum(decay, ratio)

    def _shadow(self, var: Any) -> Variable:
        with opsdk.control_dependencies(None):  # a Variable's initial value: no step's deps
            return self._new_shadow(var)

    def _new_shadow(self, var: Any) -> Variable:
        value = _value(var)
        if isinstance(var, opsdk.Variable):
            initial = var.initialized_value()
        else:
            if value.shape is None or None in value.shape:
                raise OpsdkError(f"ExponentialMovingAverage.apply: tensor '{value.name}' needs a "
                                 f"shape known when the graph is built, has {value.shape}")
            initial = np.zeros(value.shape, dtype=value.dtype)
        graph = opsdk.get_default_graph()
        with scopes._outside_name_scopes(graph):
            return Variable(initial, trainable=False, name=self.average_name(var))


def _value(var: Any) -> Any:
    """A variable read where the update is made: after the control dependencies in force, so
    `apply` under `control_dependencies([train_op])` averages the weights after the step."""
    return var.read() if isinstance(var, opsdk.Variable) else convert_to_tensor(var)


def _name(var: Any) -> str:
    return var.op.name


def _const(value: float, like: Any) -> Any:
    return opsdk.constant(np.asarray(value, dtype=like.dtype))
