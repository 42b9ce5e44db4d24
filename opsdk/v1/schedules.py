"""TF1's learning-rate schedules of `tf.train` besides exponential_decay (opsdk/v1/train.py):
each a float32 tensor of the global step (or of any step tensor), computed as TensorFlow's.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import math_ops
from opsdk.v1.tensors import convert_to_tensor


def _f32(value: Any) -> Any:
    """A float32 tensor of a number or tensor."""
    if isinstance(value, (int, float, np.number)):
        return opsdk.constant(np.float32(value))
    return _ops.cast(convert_to_tensor(value), dtype="float32")


def _positive(who: str, arg: str, value: Any) -> float:
    if float(value) <= 0:
        raise OpsdkError(f"{who}: {arg} must be > 0, got {value}")
    return float(value)


def _ratio(who: str, global_step: Any, decay_steps: Any, staircase: bool) -> Any:
    """global_step / decay_steps, floored with staircase (the step is never negative)."""
    ratio = _ops.div(_f32(global_step), _f32(_positive(who, "decay_steps", decay_steps)))
    return _ops.floor(ratio) if staircase else ratio


def piecewise_constant(x: Any, boundaries: Any, values: Any, name: Optional[str] = None) -> Any:
    """values[0] while x <= boundaries[0], values[i] while boundaries[i-1] < x <= boundaries[i],
    values[-1] past the last boundary."""
    boundaries, values = list(boundaries), list(values)
    if len(values) != len(boundaries) + 1:
        raise OpsdkError(f"piecewise_constant: give one value more than boundaries, got "
                         f"{len(boundaries)} boundaries and {len(values)} values")
    x = convert_to_tensor(x)
    dtype = np.asarray(values).dtype
    dtype = np.float32 if dtype == np.float64 else dtype
    result = opsdk.constant(np.asarray(values[-1], dtype=dtype))
    for bound, value in reversed(list(zip(boundaries, values))):
        below = math_ops.less_equal(x, opsdk.constant(np.asarray(bound, dtype=x.dtype)))
        result = _ops.where(below, opsdk.constant(np.asarray(value, dtype=dtype)), result)
    return _ops.identity(result, name=name)


def polynomial_decay(learning_rate: Any, global_step: Any, decay_steps: Any,
                     end_learning_rate: float = 0.0001, power: float = 1.0, cycle: bool = False,
                     name: Optional[str] = None) -> Any:
    """(learning_rate - end) * (1 - step / decay_steps) ** power + end, the step held at
    decay_steps; with cycle, decay_steps grows to the next multiple past the step instead."""
    steps = _f32(_positive("polynomial_decay", "decay_steps", decay_steps))
    step = _f32(global_step)
    if cycle:
        multiple = _ops.ceil(_ops.div(step, steps))
        multiple = _ops.where(math_ops.equal(step, 0.0), _f32(1.0), multiple)
        steps = _ops.mul(steps, multiple)
    else:
        step = _ops.minimum(step, steps)
    fraction = _ops.pow(_ops.sub(_f32(1.0), _ops.div(step, steps)), _f32(power))
    span = _ops.sub(_f32(learning_rate), _f32(end_learning_rate))
    return _ops.add(_ops.mul(span, fraction), _f32(end_learning_rate), name=name)


def natural_exp_decay(learning_rate: Any, global_step: Any, decay_steps: Any, decay_rate: float,
                      staircase: bool = False, name: Optional[str] = None) -> Any:
    """learning_rate * exp(-decay_rate * step / decay_steps)."""
    ratio = _ratio("natural_exp_decay", global_step, decay_steps, staircase)
    return _ops.mul(_f32(learning_rate), _ops.exp(_ops.mul(_f32(-float(decay_rate)), ratio)),
                    name=name)


def inverse_time_decay(learning_rate: Any, global_step: Any, decay_steps: Any, decay_rate: float,
                       staircase: bool = False, name: Optional[str] = None) -> Any:
    """learning_rate / (1 + decay_rate * step / decay_steps)."""
    ratio = _ratio("inverse_time_decay", global_step, decay_steps, staircase)
    denominator = _ops.add(_f32(1.0), _ops.mul(_f32(decay_rate), ratio))
    return _ops.div(_f32(learning_rate), denominator, name=name)


def _cosine(fraction: Any) -> Any:
    """0.5 * (1 + cos(pi * fraction))."""
    return _ops.mul(_f32(0.5), _ops.add(_f32(1.0), _ops.cos(_ops.mul(_f32(math.pi), fraction))))


def cosine_decay(learning_rate: Any, global_step: Any, decay_steps: Any, alpha: float = 0.0,
                 name: Optional[str] = None) -> Any:
    """learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * step / decay_steps)) + alpha), the
    step held at decay_steps."""
    steps = _f32(_positive("cosine_decay", "decay_steps", decay_steps))
    fraction = _ops.div(_ops.minimum(_f32(global_step), steps), steps)
    decayed = _ops.add(_ops.mul(_f32(1.0 - alpha), _cosine(fraction)), _f32(alpha))
    return _ops.mul(_f32(learning_rate), decayed, name=name)


def cosine_decay_restarts(learning_rate: Any, global_step: Any, first_decay_steps: Any,
                          t_mul: float = 2.0, m_mul: float = 1.0, alpha: float = 0.0,
                          name: Optional[str] = None) -> Any:
    """Cosine decay restarted after first_decay_steps, each period t_mul times longer and
    m_mul times lower than the one before (SGDR)."""
    steps = _positive("cosine_decay_restarts", "first_decay_steps", first_decay_steps)
    completed = _ops.div(_f32(global_step), _f32(steps))
    if float(t_mul) == 1.0:
        restart = _ops.floor(completed)
        completed = _ops.sub(completed, restart)
    else:
        t = float(t_mul)
        restart = _ops.floor(_ops.div(_ops.log(_ops.sub(_f32(1.0), _ops.mul(
            completed, _f32(1.0 - t)))), _f32(math.log(t))))
        passed = _ops.div(_ops.sub(_f32(1.0), _ops.pow(_f32(t), restart)), _f32(1.0 - t))
        completed = _ops.div(_ops.sub(completed, passed), _ops.pow(_f32(t), restart))
    factor = _ops.pow(_f32(m_mul), restart)
    decayed = _ops.mul(factor, _cosine(completed))
    decayed = _ops.add(_ops.mul(_f32(1.0 - alpha), decayed), _f32(alpha))
    return _ops.mul(_f32(learning_rate), decayed, name=name)


def linear_cosine_decay(learning_rate: Any, global_step: Any, decay_steps: Any,
                        num_periods: float = 0.5, alpha: float = 0.0, beta: float = 0.001,
                        name: Optional[str] = None) -> Any:
    """learning_rate * ((alpha + (decay_steps - step) / decay_steps) * 0.5 * (1 + cos(pi * 2 *
    num_periods * step / decay_steps)) + beta), the step held at decay_steps."""
    steps = _f32(_positive("linear_cosine_decay", "decay_steps", decay_steps))
    step = _ops.minimum(_f32(global_step), steps)
    linear = _ops.div(_ops.sub(steps, step), steps)
    fraction = _ops.mul(_f32(2.0 * num_periods), _ops.div(step, steps))
    decayed = _ops.add(_ops.mul(_ops.add(_f32(alpha), linear), _cosine(fraction)), _f32(beta))
    return _ops.mul(_f32(learning_rate), decayed, name=name)


NAMES = ("piecewise_constant", "polynomial_decay", "natural_exp_decay", "inverse_time_decay",
         "cosine_decay", "cosine_decay_restarts", "linear_cosine_decay")
