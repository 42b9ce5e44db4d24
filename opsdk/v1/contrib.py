"""`tf.contrib`: only what TF1 tutorials commonly reach there (see docs/tf1.md): `rnn` cells,
`layers.flatten` / `fully_connected` / `xavier_initializer`, `factorization.KMeans`. Anything
else raises a clear error."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from opsdk.registry.errors import OpsdkError
from opsdk.v1 import factorization as _factorization, layers as _layers, rnn as _rnn, scopes


class NotProvided(OpsdkError, AttributeError):
    """A tf.contrib name opsdk.v1 does not provide (an AttributeError too, so hasattr() works)."""


def _missing(path: str) -> NotProvided:
    return NotProvided(f"tf.{path} is not provided by opsdk.v1 (docs/tf1.md lists what "
                       "tf.contrib offers)")


class _Missing(SimpleNamespace):
    def __init__(self, path: str, **names: Any):
        super().__init__(**names)
        object.__setattr__(self, "_path", path)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise _missing(f"{self._path}.{name}")


rnn = _Missing("contrib.rnn", **vars(_rnn.rnn_cell), static_rnn=_rnn.static_rnn,
               static_bidirectional_rnn=_rnn.static_bidirectional_rnn,
               stack_bidirectional_rnn=_rnn.stack_bidirectional_rnn,
               stack_bidirectional_dynamic_rnn=_rnn.stack_bidirectional_dynamic_rnn)
layers = _Missing("contrib.layers", flatten=_layers.flatten,
                  fully_connected=_layers.fully_connected,
                  xavier_initializer=scopes.xavier_initializer,
                  xavier_initializer_conv2d=scopes.xavier_initializer)

factorization = _Missing("contrib.factorization", KMeans=_factorization.KMeans,
                         **{name: getattr(_factorization, name) for name in (
                             "SQUARED_EUCLIDEAN_DISTANCE", "COSINE_DISTANCE",
                             "MANHATTAN_DISTANCE", "RANDOM_INIT", "KMEANS_PLUS_PLUS_INIT",
                             "KMC2_INIT")})


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise _missing(f"contrib.{name}")
