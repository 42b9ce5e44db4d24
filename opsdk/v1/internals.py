"""The modules of TensorFlow's `tensorflow.python` that TF1 programs import for themselves.

Tutorials and course code reach past the public namespace: `from tensorflow.python.framework
import ops` then `ops.reset_default_graph()` opens most of a well-known cookbook, and others
import `math_ops`, `array_ops`, `nn_ops`, `init_ops`, `rnn_cell_impl` or `dtypes` the same
way. When `bind_tensorflow` (opsdk.v1.run) answers `import tensorflow` with opsdk.v1, it
installs `Finder`, which answers the modules of `MODULES` with module objects whose attributes
are opsdk.v1's functions of the same names, and refuses every other `tensorflow.python...`
module with a `ModuleNotFoundError` that names opsdk.v1 and lists the modules it answers.

Each entry names where its attributes are found, in order: a namespace of opsdk.v1 (`nn`,
`math`, ...), `""` for the top level, or a module of opsdk's (`client.timeline` is
`opsdk.v1.timeline`). `framework.ops`, `framework.dtypes` and the like carry
exactly the names listed (TF's module holds many more internal ones, which no program should
read); the op modules (`math_ops`, `nn_ops`, ...) pass on any name their namespaces have, as
those modules hold the very functions TF exports under the same names.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Optional, Sequence

PREFIX = "tensorflow.python"

# module (below tensorflow.python) -> (where its names are looked up, the names it carries or
# None for any name found there)
MODULES: dict[str, tuple[tuple[str, ...], Optional[frozenset[str]]]] = {
    "framework.ops": (("",), frozenset(
        "Graph Tensor Operation get_default_graph reset_default_graph name_scope "
        "control_dependencies convert_to_tensor add_to_collection add_to_collections "
        "get_collection get_collection_ref GraphKeys device".split())),
    "framework.dtypes": (("",), frozenset(
        "as_dtype bool float16 float32 float64 half double int8 int16 int32 int64 uint8 "
        "uint16 string".split())),
    "framework.constant_op": (("",), frozenset({"constant"})),
    "framework.tensor_shape": (("",), frozenset({"TensorShape", "Dimension"})),
    "ops.math_ops": (("math", ""), None),
    "ops.array_ops": (("",), None),
    "ops.nn_ops": (("nn",), None),
    "ops.nn": (("nn",), None),
    "ops.init_ops": (("",), None),
    "ops.variable_scope": (("",), None),
    "ops.variables": (("",), None),
    "ops.control_flow_ops": (("",), None),
    "ops.state_ops": (("",), None),
    "ops.random_ops": (("random", ""), None),
    "ops.rnn": (("nn",), None),
    "ops.rnn_cell": (("nn.rnn_cell",), None),
    "ops.rnn_cell_impl": (("nn.rnn_cell",), None),
    "client.timeline": (("opsdk.v1.timeline",), None),
}
# the packages on the way to the modules above
PACKAGES = ("", "framework", "ops", "client")


class Namespace(types.ModuleType):
    """One module of `MODULES`: its attributes are looked up in opsdk.v1 on first read."""

    def __init__(self, name: str, where: Sequence[str], names: Optional[frozenset[str]]):
        super().__init__(name)
        self.__where = tuple(where)
        self.__names = names

    def __getattr__(self, attr: str) -> object:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self.__names is None or attr in self.__names:
            for place in self.__where:
                found = _lookup(place, attr)
                if found is not None:
                    return found
        offered = (f"it carries {', '.join(sorted(self.__names))}" if self.__names is not None
                   else "see docs/tf1.md")
        raise AttributeError(f"{self.__name__}.{attr} is not provided by opsdk.v1 ({offered})")

    def __dir__(self) -> list[str]:
        if self.__names is not None:
            return sorted(self.__names)
        return sorted({n for place in self.__where for n in dir(_namespace(place))
                       if not n.startswith("_")})


def _namespace(place: str) -> object:
    if place.startswith("opsdk."):
        return importlib.import_module(place)
    import opsdk.v1 as tf

    value: object = tf
    for part in filter(None, place.split(".")):
        value = getattr(value, part)
    return value


def _lookup(place: str, attr: str) -> object:
    try:
        value = getattr(_namespace(place), attr)
    except AttributeError:
        return None
    # opsdk.v1's own helper modules (`tf.math_ops`, `tf.session`) are not TF's names
    return None if isinstance(value, types.ModuleType) and not place else value


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers `tensorflow.python...` imports (installed first on `sys.meta_path`)."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != PREFIX and not fullname.startswith(PREFIX + "."):
            return None
        below = fullname[len(PREFIX) + 1:]
        if below in PACKAGES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        if below in MODULES:
            return importlib.machinery.ModuleSpec(fullname, self)
        known = sorted(f"{PREFIX}.{m}" for m in MODULES)
        raise ModuleNotFoundError(
            f"No module named '{fullname}': opsdk.v1 answers only these modules of TensorFlow's "
            f"tensorflow.python: {', '.join(known)} (docs/tf1.md)")
        # (no `name=`: `from tensorflow.python.ops import lookup_ops` would swallow an error
        # naming the module it asked for and say only "cannot import name")

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        below = spec.name[len(PREFIX) + 1:]
        if below in MODULES:
            where, names = MODULES[below]
            return Namespace(spec.name, where, names)
        return types.ModuleType(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install() -> None:
    """Put a `Finder` first on `sys.meta_path` (once)."""
    if not any(isinstance(f, Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, Finder())
