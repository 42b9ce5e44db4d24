"""TF 1.x's layer objects under `tf.layers` (`Dense`, `Conv2D`, `BatchNormalization`, ...),
over the functional layers of opsdk.v1.

A layer object keeps its configuration; its first call opens its variable scope (its `name`,
or the functional layer's default name made unique, as `tf.layers.dense` does) and makes its
variables there; every later call re-enters that very scope with `reuse=True`, so one object
applied to two inputs shares its weights, as TF's does. `variables`, `trainable_variables`,
`weights`, and `kernel`/`bias` (or `gamma`/`beta`/`moving_mean`/`moving_variance`) are the
variables it made; its configuration reads back by argument name (`layer.units`,
`layer.activation`). Layers without variables (pooling, dropout, flatten) call their function.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

from opsdk.registry.errors import OpsdkError
from opsdk.v1 import scopes


class Layer:
    """One layer object: `layer(inputs, **call_args)` (or `layer.apply(...)`)."""

    _function: Callable[..., Any]
    _default_name = "layer"
    _has_variables = True

    def __init__(self, *args: Any, name: Optional[str] = None, trainable: bool = True,
                 **kwargs: Any):
        self._args, self._kwargs = args, kwargs
        self.name, self.trainable = name, trainable
        self._scope: Any = None
        self._variables: list = []

    @property
    def built(self) -> bool:
        return self._scope is not None

    @property
    def variables(self) -> list:
        return list(self._variables)

    weights = variables

    @property
    def trainable_variables(self) -> list:
        return [v for v in self._variables if v.trainable]

    trainable_weights = trainable_variables

    @property
    def non_trainable_variables(self) -> list:
        return [v for v in self._variables if not v.trainable]

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        function = type(self)._function
        call = {**self._kwargs, **kwargs}
        if not self._has_variables:
            return function(inputs, *self._args, *args, name=self.name, **call)
        if self._scope is not None:
            return function(inputs, *self._args, *args, name=self._scope, reuse=True,
                            trainable=self.trainable, **call)
        before = {id(v) for v in scopes.global_variables()}
        with scopes.variable_scope(self.name, default_name=self._default_name) as scope:
            pass  # only to fix the scope's unique name; the function re-enters it
        self._scope = scope
        out = function(inputs, *self._args, *args, name=scope, trainable=self.trainable, **call)
        self._variables = [v for v in scopes.global_variables() if id(v) not in before]
        self.name = scope.name.rsplit("/", 1)[-1]
        return out

    apply = __call__

    def _config(self) -> dict:
        """The function's arguments as this layer gives them (its defaults elsewhere), by name."""
        params = list(inspect.signature(type(self)._function).parameters.values())[1:]
        named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        config = {p.name: p.default for p in named if p.default is not p.empty}
        config.update(zip((p.name for p in named), self.__dict__.get("_args", ())))
        config.update(self.__dict__.get("_kwargs", {}))
        return config

    def __getattr__(self, attr: str) -> Any:
        # kernel, bias, gamma, ...: the variable of that name the layer made
        if attr.startswith("_"):
            raise AttributeError(attr)
        for v in self.__dict__.get("_variables", ()):
            if v.op.name.rsplit("/", 1)[-1] == attr:
                return v
        config = self._config()  # units, filters, activation, ...: as given, else the default
        if attr in config:
            return config[attr]
        if self.__dict__.get("_scope") is None and attr in _VARIABLE_NAMES:
            raise OpsdkError(f"{type(self).__name__}.{attr}: the layer makes its variables when "
                             "first called; call it on an input first")
        raise AttributeError(f"{type(self).__name__} has no attribute '{attr}'")


_VARIABLE_NAMES = {"kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance"}


def _layer(class_name: str, function: Callable[..., Any], default_name: str,
           has_variables: bool = True) -> type:
    return type(class_name, (Layer,), {
        "_function": staticmethod(function), "_default_name": default_name,
        "_has_variables": has_variables,
        "__doc__": f"TF's `tf.layers.{class_name}`: the object form of "
                   f"`tf.layers.{function.__name__}` (opsdk/v1/layer_classes.py)."})


def classes(L: Any) -> dict[str, type]:
    """The layer classes, by TF's names, over the functional layers of `L` (opsdk.v1.layers,
    which calls this at its end: this module imports no layer module)."""
    return {
        "Layer": Layer,
        "Dense": _layer("Dense", L.dense, "dense"),
        "Conv1D": _layer("Conv1D", L.conv1d, "conv1d"),
        "Conv2D": _layer("Conv2D", L.conv2d, "conv2d"),
        "Conv2DTranspose": _layer("Conv2DTranspose", L.conv2d_transpose, "conv2d_transpose"),
        "BatchNormalization": _layer("BatchNormalization", L.batch_normalization,
                                     "batch_normalization"),
        "MaxPooling1D": _layer("MaxPooling1D", L.max_pooling1d, "max_pooling1d", False),
        "MaxPooling2D": _layer("MaxPooling2D", L.max_pooling2d, "max_pooling2d", False),
        "AveragePooling1D": _layer("AveragePooling1D", L.average_pooling1d, "average_pooling1d",
                                   False),
        "AveragePooling2D": _layer("AveragePooling2D", L.average_pooling2d, "average_pooling2d",
                                   False),
        "Dropout": _layer("Dropout", L.dropout, "dropout", False),
        "Flatten": _layer("Flatten", L.flatten, "flatten", False),
    }
