"""`tf.contrib`: only what TF1 tutorials commonly reach there (see docs/tf1.md): `rnn` cells,
`layers.flatten` / `fully_connected` / `xavier_initializer`. Anything else raises a clear error."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from opsdk.v1 import layers as _layers, misc as _misc, rnn as _rnn, scopes


NotProvided = _misc.NotProvided
_missing = _misc.not_provided


class _Missing(SimpleNamespace):
    def __init__(self, path: str, **names: Any):
        super().__init__(**names)
        object.__setattr__(self, "_path", path)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise _missing(f"{self._path}.{name}")


rnn = _Missing("contrib.rnn", **vars(_rnn.rnn_cell), static_rnn=_rnn.static_rnn)
layers = _Missing("contrib.layers", flatten=_layers.flatten,
                  fully_connected=_layers.fully_connected,
                  xavier_initializer=scopes.xavier_initializer,
                  xavier_initializer_conv2d=scopes.xavier_initializer)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise _missing(f"contrib.{name}")
