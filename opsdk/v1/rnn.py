"""Recurrent cells (`BasicRNNCell`, `BasicLSTMCell`/`LSTMCell`, `GRUCell`, `MultiRNNCell`,
`DropoutWrapper`); rnn_run.py runs them: `static_rnn` (unrolled over a Python list),
`dynamic_rnn` (opsdk's differentiable `while_loop` over time), their bidirectional forms.

A cell makes its variables (`<scope>/kernel`, `<scope>/bias`) the first time it is called or
built, outside any loop, and reuses them on every later step.
"""

from __future__ import annotations

from collections import namedtuple
from types import SimpleNamespace
from typing import Any, Optional

from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import math_ops as _m, scopes
from opsdk.v1.dtypes import name_of
from opsdk.v1.tensors import convert_to_tensor as _t, zeros

LSTMStateTuple = namedtuple("LSTMStateTuple", ("c", "h"))


class RNNCell:
    """Base of the cells: `cell(inputs, state) -> (output, new_state)`."""

    _default_name = "rnn_cell"

    def __init__(self, num_units: int, activation: Any = None, reuse: Any = None,
                 name: Optional[str] = None, dtype: Any = None):
        self.num_units = int(num_units)
        self.activation = activation or _m.tanh
        self.name = name
        self._vars: Optional[tuple] = None

    @property
    def output_size(self) -> int:
        return self.num_units

    def _gates(self) -> int:
        return 1

    def build(self, input_depth: int, scope: Optional[str] = None) -> None:
        """Make the variables for inputs of `input_depth` features (once)."""
        if self._vars is not None:
            return
        with scopes.variable_scope(scope or self.name or self._default_name,
                                   reuse=scopes.AUTO_REUSE):
            units = self.num_units
            kernel = scopes.get_variable("kernel", [input_depth + units, self._gates() * units])
            bias = scopes.get_variable("bias", [self._gates() * units],
                                       initializer=scopes.zeros_initializer())
            self._vars = (kernel, bias) + self._extra_vars(input_depth)

    def _extra_vars(self, input_depth: int) -> tuple:
        return ()

    def _depth(self, inputs: Any) -> int:
        depth = inputs.shape[-1] if inputs.shape is not None else None
        if depth is None:
            raise OpsdkError("rnn cell: the last dim of the inputs must be known")
        return int(depth)

    def __call__(self, inputs: Any, state: Any, scope: Optional[str] = None) -> tuple:
        inputs = _t(inputs)
        self.build(self._depth(inputs), scope)
        return self.step(inputs, state)

    def zero_state(self, batch_size: Any, dtype: Any = "float32") -> Any:
        return self._zeros(batch_size, dtype, self.num_units)

    @staticmethod
    def _zeros(batch_size: Any, dtype: Any, units: int) -> Any:
        """[batch_size, units] zeros; batch_size a number or a scalar tensor (`tf.shape(x)[0]`,
        a placeholder), as TF's `zero_state` takes."""
        return zeros([batch_size, units], dtype=name_of(dtype))

    def _affine(self, inputs: Any, state_h: Any) -> Any:
        kernel, bias = self._vars[0], self._vars[1]
        return _ops.bias_add(_ops.matmul(_ops.concat([inputs, state_h], axis=1), kernel), bias)


class BasicRNNCell(RNNCell):
    """h' = activation(W [x, h] + b); the output is h'."""

    _default_name = "basic_rnn_cell"

    @property
    def state_size(self) -> int:
        return self.num_units

    def step(self, inputs: Any, state: Any) -> tuple:
        out = self.activation(self._affine(inputs, state))
        return out, out


class BasicLSTMCell(RNNCell):
    """The LSTM of Zaremba et al. with a forget-gate bias; state (c, h) as LSTMStateTuple."""

    _default_name = "basic_lstm_cell"

    def __init__(self, num_units: int, forget_bias: float = 1.0, state_is_tuple: bool = True,
                 activation: Any = None, reuse: Any = None, name: Optional[str] = None,
                 use_peepholes: bool = False, **unused: Any):
        if not state_is_tuple or use_peepholes:
            raise OpsdkError("LSTM cell: opsdk.v1 supports state_is_tuple=True without "
                             "peepholes")
        super().__init__(num_units, activation, reuse, name)
        self.forget_bias = float(forget_bias)

    def _gates(self) -> int:
        return 4

    @property
    def state_size(self) -> Any:
        return LSTMStateTuple(self.num_units, self.num_units)

    def zero_state(self, batch_size: Any, dtype: Any = "float32") -> Any:
        return LSTMStateTuple(self._zeros(batch_size, dtype, self.num_units),
                              self._zeros(batch_size, dtype, self.num_units))

    def step(self, inputs: Any, state: Any) -> tuple:
        c, h = state
        i, j, f, o = _m.split(self._affine(inputs, h), 4, axis=1)
        forget = _ops.sigmoid(f + self.forget_bias)
        new_c = c * forget + _ops.sigmoid(i) * self.activation(j)
        new_h = self.activation(new_c) * _ops.sigmoid(o)
        return new_h, LSTMStateTuple(new_c, new_h)


class LSTMCell(BasicLSTMCell):
    _default_name = "lstm_cell"


class GRUCell(RNNCell):
    """Gated recurrent unit: r, u = sigmoid(W [x, h]); c = tanh(Wc [x, r*h]); h' = u h + (1-u) c.
    As in TF, the gates' bias starts at 1 (r and u open: the state is kept at first) and the
    variables are gates/{kernel,bias} and candidate/{kernel,bias}."""

    _default_name = "gru_cell"

    def __init__(self, num_units: int, activation: Any = None, reuse: Any = None,
                 kernel_initializer: Any = None, bias_initializer: Any = None,
                 name: Optional[str] = None, dtype: Any = None):
        super().__init__(num_units, activation, reuse, name, dtype)
        self.kernel_initializer, self.bias_initializer = kernel_initializer, bias_initializer

    @property
    def state_size(self) -> int:
        return self.num_units

    def build(self, input_depth: int, scope: Optional[str] = None) -> None:
        if self._vars is not None:
            return
        with scopes.variable_scope(scope or self.name or self._default_name,
                                   reuse=scopes.AUTO_REUSE):
            self._vars = self._pair("gates", input_depth, 2, scopes.constant_initializer(1.0)) + \
                self._pair("candidate", input_depth, 1, scopes.zeros_initializer())

    def _pair(self, prefix: str, input_depth: int, gates: int, bias_default: Any) -> tuple:
        units = self.num_units
        kernel = scopes.get_variable(f"{prefix}/kernel", [input_depth + units, gates * units],
                                     initializer=self.kernel_initializer)
        bias = scopes.get_variable(f"{prefix}/bias", [gates * units],
                                   initializer=self.bias_initializer or bias_default)
        return kernel, bias

    def step(self, inputs: Any, state: Any) -> tuple:
        r, u = _m.split(_ops.sigmoid(self._affine(inputs, state)), 2, axis=1)
        kernel, bias = self._vars[2], self._vars[3]
        joined = _ops.concat([inputs, r * state], axis=1)
        c = self.activation(_ops.bias_add(_ops.matmul(joined, kernel), bias))
        new_h = u * state + (1.0 - u) * c
        return new_h, new_h


class MultiRNNCell:
    """Cells stacked: each one's output is the next one's input; the state is a tuple."""

    def __init__(self, cells: list, state_is_tuple: bool = True):
        self.cells = list(cells)

    @property
    def output_size(self) -> int:
        return self.cells[-1].output_size

    @property
    def state_size(self) -> tuple:
        return tuple(c.state_size for c in self.cells)

    def zero_state(self, batch_size: Any, dtype: Any = "float32") -> tuple:
        return tuple(c.zero_state(batch_size, dtype) for c in self.cells)

    def build(self, input_depth: int, scope: Optional[str] = None) -> None:
        for i, cell in enumerate(self.cells):
            # TF's names: each cell's own scope inside cell_<i> (.../cell_0/basic_lstm_cell/kernel)
            own = getattr(cell, "name", None) or getattr(cell, "_default_name", "multi_rnn_cell")
            cell.build(input_depth, f"{scope or 'multi_rnn_cell'}/cell_{i}/{own}")
            input_depth = cell.output_size

    def __call__(self, inputs: Any, state: Any, scope: Optional[str] = None) -> tuple:
        self.build(int(_t(inputs).shape[-1]), scope)
        return self.step(_t(inputs), state)

    def step(self, inputs: Any, state: Any) -> tuple:
        new_states = []
        for cell, s in zip(self.cells, state):
            inputs, s = cell.step(inputs, s)
            new_states.append(s)
        return inputs, tuple(new_states)


class DropoutWrapper:
    """A cell whose inputs and outputs go through dropout (keep probabilities may be tensors)."""

    def __init__(self, cell: Any, input_keep_prob: Any = 1.0, output_keep_prob: Any = 1.0,
                 state_keep_prob: Any = 1.0, seed: Any = None, **unused: Any):
        if not _is_one(state_keep_prob):  # ignoring it would train another model silently
            raise OpsdkError("DropoutWrapper: state_keep_prob is not provided by opsdk.v1 "
                             f"(got {state_keep_prob!r}); input_keep_prob and output_keep_prob are")
        self.cell, self.input_keep, self.output_keep, self.seed = (
            cell, input_keep_prob, output_keep_prob, seed)

    def __getattr__(self, name: str) -> Any:
        if name == "cell":
            raise AttributeError(name)
        return getattr(self.cell, name)

    def __call__(self, inputs: Any, state: Any, scope: Optional[str] = None) -> tuple:
        self.cell.build(int(_t(inputs).shape[-1]), scope)
        return self.step(_t(inputs), state)

    def build(self, input_depth: int, scope: Optional[str] = None) -> None:
        self.cell.build(input_depth, scope)

    def step(self, inputs: Any, state: Any) -> tuple:
        from opsdk.v1 import nn
        if not _is_one(self.input_keep):
            inputs = nn.dropout(inputs, self.input_keep, seed=self.seed)
        out, new_state = self.cell.step(inputs, state)
        if not _is_one(self.output_keep):
            out = nn.dropout(out, self.output_keep, seed=self.seed)
        return out, new_state


def _is_one(value: Any) -> bool:
    return isinstance(value, (int, float)) and float(value) == 1.0


from opsdk.v1.rnn_run import (bidirectional_dynamic_rnn, dynamic_rnn,  # noqa: E402,F401
                              stack_bidirectional_dynamic_rnn, stack_bidirectional_rnn,
                              static_bidirectional_rnn, static_rnn)

rnn_cell = SimpleNamespace(RNNCell=RNNCell, BasicRNNCell=BasicRNNCell,
                           BasicLSTMCell=BasicLSTMCell, LSTMCell=LSTMCell, GRUCell=GRUCell,
                           MultiRNNCell=MultiRNNCell, DropoutWrapper=DropoutWrapper,
                           LSTMStateTuple=LSTMStateTuple)
