"""opsdk.registry: op declarations (YAML) -> the typed model, and what is derived from it.

Nothing here imports the rest of opsdk; codegen, the runtime and the gradient checker read it.
"""

from .attrs import dtype_name, normalize_attrs
from .callables import load_callable
from .errors import KernelNotBuiltError, Location, OpDefError, OpDefErrors, OpError, OpsdkError
from .infer import axis_phrase, axis_word, infer_outputs, resolve_type_attrs
from .parse import parse_opdef
from .registry import Registry, load_registry
from .shape_fns import SHAPE_FNS
from .spec import (ABSENT, NO_DEFAULT, STOP_GRADIENT, AttrSpec, GradCheckSpec, KernelSpec, OpSpec, TensorSpec,
                   TypeAttr)
from .workspace import BUILTIN_ROOT, Workspace, find_workspace

__all__ = [
    "ABSENT", "AttrSpec", "BUILTIN_ROOT", "GradCheckSpec", "KernelNotBuiltError", "KernelSpec", "Location",
    "NO_DEFAULT", "OpDefError", "OpDefErrors", "OpError", "OpSpec", "OpsdkError", "Registry",
    "SHAPE_FNS", "STOP_GRADIENT", "TensorSpec", "TypeAttr", "Workspace", "axis_phrase", "axis_word",
    "dtype_name", "find_workspace", "infer_outputs", "load_callable", "load_registry",
    "normalize_attrs", "parse_opdef", "resolve_type_attrs",
]
