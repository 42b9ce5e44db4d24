"""Optimizers (TensorFlow 1's API) whose updates are ops declared in YAML (opdefs/builtin/optim.yaml).

An update op is pure: it takes a variable's value, its slots, the hyperparameters and the
gradient, and returns the new values. One `apply_updates` node per `apply_gradients` call
(train/update.py) reads the variables, runs every update op and stores the results as one
transaction of the session's variable store, so threads training at once lose no update. Slots (accumulators, moments) are non-trainable Variables named `<var>/<Optimizer>`
(`<var>/<Optimizer>_1`, ... for a second slot), set by `global_variables_initializer()`.

    train_op = AdagradOptimizer(0.01).minimize(loss)
    sess.run(global_variables_initializer())
    sess.run(train_op, {x: batch})
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from opsdk.registry.errors import OpsdkError

from opsdk.runtime.frontend.registries import builtin_registry
from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.ir.graph import Graph, Operation, constant
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.frontend.variables import Variable, trainable_variables
from opsdk.runtime.train.update import Update, add_updates

__all__ = ["Optimizer", "GradientDescentOptimizer", "MomentumOptimizer", "AdagradOptimizer",
           "AdamOptimizer", "RMSPropOptimizer", "AdadeltaOptimizer", "FtrlOptimizer",
           "ProximalGradientDescentOptimizer", "ProximalAdagradOptimizer"]

GradsAndVars = list[tuple[Optional[Tensor], Variable]]


class Optimizer:
    """The shared machinery: gradients, slot variables, update nodes, the grouping train op.

    A subclass names its update op (`_op`), its slots (`_slots`: (name, initial value)) and its
    scalar hyperparameters (`_hypers`: the update op's inputs after the slots, before grad).

    The constructors take TensorFlow 1's arguments in its order. `use_locking` is accepted
    either way: an update here always holds its variables' locks (no update is lost), which is
    one of the outcomes TensorFlow allows without them."""

    _op = ""
    _slots: tuple[tuple[str, float], ...] = ()
    # TensorFlow's gate_gradients values (compute_gradients)
    GATE_NONE, GATE_OP, GATE_GRAPH = 0, 1, 2

    def __init__(self, learning_rate: Any, name: str, use_locking: bool = False):
        self.learning_rate = learning_rate
        self._name = name
        self._use_locking = bool(use_locking)
        self._slot_vars: dict[tuple[str, str], Variable] = {}

    def _hypers(self) -> list[Any]:
        return [self.learning_rate]

    def _attrs(self) -> dict:
        return {}

    # ------------------------------------------------------------------------------ public API
    def compute_gradients(self, loss: Tensor, var_list: Optional[Sequence[Variable]] = None,
                          gate_gradients: int = GATE_OP, aggregation_method: Any = None,
                          colocate_gradients_with_ops: bool = False,
                          grad_loss: Optional[Tensor] = None) -> GradsAndVars:
        """(gradient or None, variable) for each variable of `var_list` (default: the loss graph's
        trainable variables). `grad_loss`: the gradient the loss starts with (default ones).

        TensorFlow's `gate_gradients`, `aggregation_method` and `colocate_gradients_with_ops`
        are checked and change nothing here: an update reads gradients computed from the values
        the step read at its start whatever the gating, gradients reaching one tensor are
        added, and gradient nodes are placed by the usual rules (compile/place.py)."""
        check_gradient_options(self._name, gate_gradients, aggregation_method,
                               colocate_gradients_with_ops)
        variables = list(var_list) if var_list is not None else trainable_variables(loss.graph)
        if not variables:
            raise OpsdkError(f"{self._name}: no variables to optimize (create Variables with "
                             "trainable=True, or pass var_list)")
        grad_ys = None if grad_loss is None else [grad_loss]
        return list(zip(gradients(loss, variables, grad_ys=grad_ys), variables))

    def apply_gradients(self, grads_and_vars: GradsAndVars, global_step: Optional[Variable] = None,
                        name: Optional[str] = None) -> Operation:
        """One node that, when run, updates every variable with its gradient (and increments
        `global_step` after)."""
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            names = ", ".join(v.name for _, v in grads_and_vars)
            raise OpsdkError(f"{self._name}: no gradient for any variable ({names}); check that "
                             "the loss depends on them through differentiable ops")
        graph: Graph = pairs[0][1].graph
        with graph.as_default():
            for _, var in pairs:
                self._create_slots(var)
            with graph.name_scope(name or self._name):
                updates = [self._update(g, v) for g, v in pairs]
                devices = {v.op.device for _, v in pairs}
                with graph.device(devices.pop() if len(devices) == 1 else None):
                    node = add_updates(graph, updates, self._scalings(), "update")
                controls: list[Any] = [node]
                if global_step is not None:
                    with graph.control_dependencies([node]):
                        controls.append(global_step.assign_add(
                            np.ones((), dtype=global_step.dtype), name="global_step_add").op)
            return graph.create_op("no_op", [], {}, [], name=name or self._name,
                                   control_inputs=controls)

    def minimize(self, loss: Tensor, global_step: Optional[Variable] = None,
                 var_list: Optional[Sequence[Variable]] = None, gate_gradients: int = GATE_OP,
                 aggregation_method: Any = None, colocate_gradients_with_ops: bool = False,
                 name: Optional[str] = None, grad_loss: Optional[Tensor] = None) -> Operation:
        """`apply_gradients(compute_gradients(loss, var_list, ...), global_step, name)`."""
        grads = self.compute_gradients(loss, var_list, gate_gradients, aggregation_method,
                                       colocate_gradients_with_ops, grad_loss)
        return self.apply_gradients(grads, global_step, name)

    def get_slot(self, var: Variable, name: str) -> Variable:
        """The slot variable `name` of `var` (created by apply_gradients)."""
        slot = self._slot_vars.get((var.op.name, name))
        if slot is None:
            raise OpsdkError(f"{self._name}: variable '{var.op.name}' has no slot '{name}' (slots: "
                             f"{', '.join(self.get_slot_names()) or 'none'}; they exist once "
                             "apply_gradients/minimize ran)")
        return slot

    def get_slot_names(self) -> list[str]:
        """The names of the slots this optimizer keeps per variable."""
        return [name for name, _ in self._slots]

    # ------------------------------------------------------------------------------ machinery
    def _create_slots(self, var: Variable) -> None:
        if var.shape is None or any(d is None for d in var.shape):
            raise OpsdkError(f"{self._name}: variable '{var.op.name}' has shape "
                             f"{var.shape}; slots need a fully known shape")
        with beside(var):
            for index, (slot, init) in enumerate(self._slots):
                if (var.op.name, slot) not in self._slot_vars:
                    suffix = self._name if index == 0 else f"{self._name}_{index}"
                    value = np.full(var.shape, init, dtype=var.dtype)
                    self._slot_vars[(var.op.name, slot)] = Variable(
                        value, name=f"{var.op.name}/{suffix}", trainable=False)

    def _update(self, grad: Tensor, var: Variable) -> Update:
        """The update of one variable: its op, the variables it owns (var, slots) and reads, and
        its other inputs (the update op's inputs after those)."""
        slots = [self._slot_vars[(var.op.name, s)].name for s, _ in self._slots]
        hypers = [self._scalar(h, var.dtype) for h in self._hypers()]
        return Update(self._op, [var.op.name, *slots], self._reads(var), [*hypers, grad],
                      self._attrs())

    def _reads(self, var: Variable) -> list[str]:
        """Variables the update reads between the slots and the hyperparameters (Adam's beta
        powers)."""
        return []

    def _scalings(self) -> list[tuple[str, float]]:
        """(variable, factor) scalings after every variable's update (Adam's beta powers)."""
        return []

    @staticmethod
    def _scalar(value: Any, dtype: str) -> Tensor:
        if isinstance(value, Variable):
            value = value.value()
        if isinstance(value, Tensor):
            if value.dtype != dtype:
                raise OpsdkError(f"hyperparameter '{value.name}' is {value.dtype}; the variable "
                                 f"it updates is {dtype}")
            return value
        return constant(np.asarray(value, dtype=dtype))


def check_gradient_options(who: str, gate_gradients: Any, aggregation_method: Any,
                           colocate_gradients_with_ops: Any) -> None:
    """TensorFlow's gradient options that change nothing here, checked as it checks them."""
    if gate_gradients not in (Optimizer.GATE_NONE, Optimizer.GATE_OP, Optimizer.GATE_GRAPH):
        raise OpsdkError(f"{who}: gate_gradients must be GATE_NONE, GATE_OP or GATE_GRAPH "
                         f"(0, 1, 2), got {gate_gradients!r}")
    if aggregation_method not in (None, 0, 1, 2):  # ADD_N/DEFAULT, TREE, ACCUMULATE_N
        raise OpsdkError(f"{who}: aggregation_method must be None or an AggregationMethod "
                         f"(0, 1, 2), got {aggregation_method!r}")
    if not isinstance(colocate_gradients_with_ops, (bool, np.bool_)):
        raise OpsdkError(f"{who}: colocate_gradients_with_ops must be True or False, got "
                         f"{colocate_gradients_with_ops!r}")


def beside(var: Variable) -> Any:
    """A scope whose variables live with `var` (its slots, as TensorFlow colocates them)."""
    return var.graph.colocate_with(var.op)


class GradientDescentOptimizer(Optimizer):
    """var -= learning_rate * grad."""

    _op = "apply_gradient_descent"

    def __init__(self, learning_rate: Any, use_locking: bool = False,
                 name: str = "GradientDescent"):
        super().__init__(learning_rate, name, use_locking)


class MomentumOptimizer(Optimizer):
    """accum = momentum * accum + grad; var -= learning_rate * accum (Nesterov optional)."""

    _op = "apply_momentum"
    _slots = (("momentum", 0.0),)

    def __init__(self, learning_rate: Any, momentum: Any, use_locking: bool = False,
                 name: str = "Momentum", use_nesterov: bool = False):
        super().__init__(learning_rate, name, use_locking)
        self.momentum = momentum
        self.use_nesterov = use_nesterov

    def _attrs(self) -> dict:
        return {"use_nesterov": self.use_nesterov}

    def _update(self, grad: Tensor, var: Variable) -> Update:
        # apply_momentum takes (var, accum, lr, grad, momentum): momentum after the gradient.
        slot = self._slot_vars[(var.op.name, "momentum")]
        inputs = [self._scalar(self.learning_rate, var.dtype), grad,
                  self._scalar(self.momentum, var.dtype)]
        return Update(self._op, [var.op.name, slot.name], [], inputs, self._attrs())


class AdagradOptimizer(Optimizer):
    """accum += grad ** 2; var -= learning_rate * grad / sqrt(accum)."""

    _op = "apply_adagrad"

    def __init__(self, learning_rate: Any, initial_accumulator_value: float = 0.1,
                 use_locking: bool = False, name: str = "Adagrad"):
        if initial_accumulator_value <= 0:
            raise OpsdkError(f"{name}: initial_accumulator_value must be positive, got "
                             f"{initial_accumulator_value}")
        super().__init__(learning_rate, name, use_locking)
        self._slots = (("accumulator", float(initial_accumulator_value)),)


class AdamOptimizer(Optimizer):
    """Adam with bias correction; beta1**t and beta2**t are kept in two non-trainable variables."""

    _op = "apply_adam"
    _slots = (("m", 0.0), ("v", 0.0))

    def __init__(self, learning_rate: Any = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, use_locking: bool = False, name: str = "Adam"):
        super().__init__(learning_rate, name, use_locking)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self._powers: dict[str, tuple[Variable, Variable]] = {}

    def _hypers(self) -> list[Any]:
        return [self.learning_rate, self.beta1, self.beta2, self.epsilon]

    def _create_slots(self, var: Variable) -> None:
        super()._create_slots(var)
        if var.dtype not in self._powers:
            with beside(var):  # with the first variable of the dtype, as TensorFlow's
                self._powers[var.dtype] = (
                    Variable(np.asarray(self.beta1, var.dtype), name=f"{self._name}/beta1_power",
                             trainable=False),
                    Variable(np.asarray(self.beta2, var.dtype), name=f"{self._name}/beta2_power",
                             trainable=False))

    def _reads(self, var: Variable) -> list[str]:
        return [p.name for p in self._powers[var.dtype]]

    def _scalings(self) -> list[tuple[str, float]]:
        return [(p.name, beta) for b1p, b2p in self._powers.values()
                for p, beta in ((b1p, self.beta1), (b2p, self.beta2))]


class RMSPropOptimizer(Optimizer):
    """ms = decay * ms + (1 - decay) * grad**2; mom = momentum * mom + lr * grad / sqrt(ms + eps);
    var -= mom. The mean square starts at ones, as in TensorFlow 1."""

    _op = "apply_rms_prop"
    _slots = (("rms", 1.0), ("momentum", 0.0))

    def __init__(self, learning_rate: Any, decay: float = 0.9, momentum: float = 0.0,
                 epsilon: float = 1e-10, use_locking: bool = False, centered: bool = False,
                 name: str = "RMSProp"):
        if centered:
            raise OpsdkError(f"{name}: centered=True (RMSProp normalised by the gradient's "
                             "variance) is not provided; use centered=False")
        super().__init__(learning_rate, name, use_locking)
        self.decay, self.momentum, self.epsilon = decay, momentum, epsilon

    def _hypers(self) -> list[Any]:
        return [self.learning_rate, self.decay, self.momentum, self.epsilon]


class AdadeltaOptimizer(Optimizer):
    """accum = rho * accum + (1 - rho) * grad**2; update = sqrt(accum_update + eps) /
    sqrt(accum + eps) * grad; var -= lr * update; accum_update = rho * accum_update + (1 - rho) *
    update**2 (TensorFlow 1's defaults)."""

    _op = "apply_adadelta"
    _slots = (("accum", 0.0), ("accum_update", 0.0))

    def __init__(self, learning_rate: Any = 0.001, rho: float = 0.95, epsilon: float = 1e-8,
                 use_locking: bool = False, name: str = "Adadelta"):
        super().__init__(learning_rate, name, use_locking)
        self.rho, self.epsilon = rho, epsilon

    def _hypers(self) -> list[Any]:
        return [self.learning_rate, self.rho, self.epsilon]


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal (TensorFlow 1's FtrlOptimizer, its ApplyFtrlV2): per weight an accumulator
    of squared gradients (starting at `initial_accumulator_value`) and a linear term; the weight
    is the closed-form minimiser of the linear term with L1 and L2 penalties, 0 inside the L1
    dead zone. `l2_shrinkage_regularization_strength` adds an L2 pull to the linear term only;
    `beta` enters the quadratic term."""

    _op = "apply_ftrl"

    def __init__(self, learning_rate: Any, learning_rate_power: float = -0.5,
                 initial_accumulator_value: float = 0.1, l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "Ftrl", accum_name: Optional[str] = None,
                 linear_name: Optional[str] = None,
                 l2_shrinkage_regularization_strength: float = 0.0, beta: Any = None):
        checks = (("learning_rate_power", learning_rate_power, "negative or zero", 1),
                  ("initial_accumulator_value", initial_accumulator_value, "positive or zero", -1),
                  ("l1_regularization_strength", l1_regularization_strength, "positive or zero", -1),
                  ("l2_regularization_strength", l2_regularization_strength, "positive or zero", -1),
                  ("l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength,
                   "positive or zero", -1))
        for label, value, words, sign in checks:
            if not isinstance(value, (Tensor, Variable)) and float(value) * sign > 0:
                raise OpsdkError(f"{name}: {label} {float(value):f} needs to be {words}")
        super().__init__(learning_rate, name, use_locking)
        self.learning_rate_power = learning_rate_power
        self.l1, self.l2 = l1_regularization_strength, l2_regularization_strength
        self.l2_shrinkage = l2_shrinkage_regularization_strength
        self.beta = 0.0 if beta is None else beta
        self._slots = (("accum", float(initial_accumulator_value)), ("linear", 0.0))

    def _hypers(self) -> list[Any]:
        return [self.learning_rate, self.l1, self.l2, self.l2_shrinkage,
                self.learning_rate_power, self.beta]


class ProximalGradientDescentOptimizer(Optimizer):
    """Gradient descent then the L1 and L2 proximal step: prox = var - lr * grad;
    var = sign(prox) * max(|prox| - lr * l1, 0) / (1 + lr * l2)."""

    _op = "apply_proximal_gradient_descent"

    def __init__(self, learning_rate: Any, l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "ProximalGradientDescent"):
        super().__init__(learning_rate, name, use_locking)
        self.l1, self.l2 = l1_regularization_strength, l2_regularization_strength

    def _hypers(self) -> list[Any]:
        return [self.learning_rate, self.l1, self.l2]


class ProximalAdagradOptimizer(ProximalGradientDescentOptimizer):
    """Adagrad's step (lr / sqrt(accumulator), the accumulator starting at
    `initial_accumulator_value`) then the L1 and L2 proximal step with it."""

    _op = "apply_proximal_adagrad"

    def __init__(self, learning_rate: Any, initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0, l2_regularization_strength: float = 0.0,
                 use_locking: bool = False, name: str = "ProximalAdagrad"):
        if initial_accumulator_value <= 0:
            raise OpsdkError(f"{name}: initial_accumulator_value must be positive, got "
                             f"{initial_accumulator_value}")
        super().__init__(learning_rate, l1_regularization_strength, l2_regularization_strength,
                         use_locking, name)
        self._slots = (("accumulator", float(initial_accumulator_value)),)
