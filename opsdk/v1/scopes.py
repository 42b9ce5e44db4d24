"""`tf.variable_scope` / `tf.get_variable` with reuse, initializers, collections with scopes,
and the grouping helpers (`tf.group`, `tf.no_op`, `variables_initializer`).

Variables made by `get_variable` are named by the variable scopes only (TF ignores name scopes
for them), and kept per graph so that `reuse=True` (or `tf.AUTO_REUSE`) returns the same one.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from typing import Any, Iterator, Optional

import numpy as np

import opsdk
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import graph_state, tensors as _tensors
from opsdk.v1.dtypes import as_dtype, float32, name_of

AUTO_REUSE = "auto_reuse"


class GraphKeys(opsdk.GraphKeys):
    """TF1's collection names."""

    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    LOSSES = "losses"
    REGULARIZATION_LOSSES = "regularization_losses"
    SUMMARIES = "summaries"
    UPDATE_OPS = "update_ops"
    TRAIN_OP = "train_op"
    GLOBAL_STEP = "global_step"
    SAVERS = "savers"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SUMMARY_OP = "summary_op"


class _Scope:
    def __init__(self, name: str, reuse: Any, initializer: Any, dtype: Any,
                 partitioner: Any = None):
        self.name, self.reuse, self.initializer, self.dtype = name, reuse, initializer, dtype
        self.partitioner = partitioner
        self.original_name_scope = name + "/" if name else ""

    def reuse_variables(self) -> None:
        """From now on in this scope, `get_variable` returns existing variables (TF's method)."""
        self.reuse = True

    def set_partitioner(self, partitioner: Any) -> None:
        """The partitioner `get_variable` uses in this scope from now on (TF's method)."""
        self.partitioner = partitioner


class _ScopeStack(threading.local):
    def __init__(self) -> None:
        self.scopes: list[_Scope] = []
        self.root = _Scope("", False, None, None)


_stack = _ScopeStack()


def get_variable_scope() -> _Scope:
    return _stack.scopes[-1] if _stack.scopes else _stack.root


@contextlib.contextmanager
def variable_scope(name_or_scope: Any = None, default_name: Optional[str] = None,
                   values: Any = None, initializer: Any = None, regularizer: Any = None,
                   caching_device: Any = None, partitioner: Any = None, custom_getter: Any = None,
                   reuse: Any = None, dtype: Any = None, **unused: Any) -> Iterator[_Scope]:
    """Prefix variable (and op) names with the scope; `reuse=True` makes `get_variable` return
    existing variables, `tf.AUTO_REUSE` creates them once then reuses."""
    outer = get_variable_scope()
    if isinstance(name_or_scope, _Scope):
        full = name_or_scope.name
    else:
        leaf = name_or_scope or _unique_default(outer.name, default_name or "scope")
        full = f"{outer.name}/{leaf}" if outer.name else leaf
    if name_or_scope is not None:
        _restart_defaults(full)
    scope = _Scope(full, reuse if reuse is not None else outer.reuse,
                   initializer or outer.initializer, dtype or outer.dtype,
                   partitioner if partitioner is not None else outer.partitioner)
    _stack.scopes.append(scope)
    try:
        with opsdk.name_scope(full.rsplit("/", 1)[-1]) if full else contextlib.nullcontext():
            yield scope
    finally:
        _stack.scopes.pop()


def _defaults() -> dict[tuple[str, str], int]:
    """The default-named scopes opened so far in the default graph, by (outer scope, base).
    Kept on the graph itself: a table keyed by the graph's id() would hand a freed graph's
    counts to the next graph that CPython places at the same address."""
    return graph_state.table(opsdk.get_default_graph(), "scope_defaults")


def _unique_default(outer: str, base: str) -> str:
    counts, key = _defaults(), (outer, base)
    count = counts.get(key, 0)
    counts[key] = count + 1
    return base if count == 0 else f"{base}_{count}"


def _restart_defaults(full: str) -> None:
    """Entering a scope by name numbers its default-named sub-scopes from the start again, as
    TF does: a discriminator built twice under `variable_scope("D", reuse=True)` gets the same
    `D/dense`, `D/dense_1` and so reuses its variables."""
    counts = _defaults()
    for key in [k for k in counts if k[0] == full or k[0].startswith(full + "/")]:
        del counts[key]


def _store(graph: Any) -> dict:
    return graph_state.table(graph, "variables")


@contextlib.contextmanager
def _outside_name_scopes(graph: Any) -> Iterator[None]:
    # TF names variables by variable scopes alone; opsdk's graph prefixes the open name scopes,
    # so they are set aside while the variable is made. (A public way to open an absolute name
    # scope in the runtime would replace this.)
    names = graph._stacks.names
    saved = list(names)
    names.clear()
    try:
        yield
    finally:
        names[:] = saved


def get_variable(name: str, shape: Any = None, dtype: Any = None, initializer: Any = None,
                 regularizer: Any = None, trainable: bool = True, collections: Any = None,
                 partitioner: Any = None, **unused: Any) -> Any:
    """The variable `scope/name`: made on first use, returned again under reuse. With a
    partitioner (given, or its variable_scope's), a PartitionedVariable of shards
    `scope/name/part_k` (opsdk/v1/partitioned.py)."""
    scope = get_variable_scope()
    full = f"{scope.name}/{name}" if scope.name else name
    graph = opsdk.get_default_graph()
    store = _store(graph)
    if full in store:
        if scope.reuse is False or scope.reuse is None:
            raise OpsdkError(f"get_variable: variable '{full}' already exists; did you mean to "
                             "set reuse=True or reuse=tf.AUTO_REUSE in its variable_scope?")
        return store[full]
    if scope.reuse is True:
        raise OpsdkError(f"get_variable: variable '{full}' does not exist, and its scope has "
                         "reuse=True (create it first, or use reuse=tf.AUTO_REUSE)")
    dtype = as_dtype(dtype or scope.dtype or float32)
    init = initializer if initializer is not None else scope.initializer
    partitioner = partitioner if partitioner is not None else scope.partitioner
    if partitioner is not None:  # (partitioned.py registers how: it builds on this module)
        store[full] = _PARTITIONED["make"](graph, full, shape, dtype, init, partitioner,
                                           regularizer, trainable, collections)
        return store[full]
    with graph.control_dependencies(None):  # as TF's init_scope: see tensors.Variable
        value = _initial_value(full, init, shape, dtype)
        with _outside_name_scopes(graph):
            var = _tensors.Variable(value, trainable=trainable, name=full,
                                    collections=collections)
    if var.op.name != full:
        raise OpsdkError(f"get_variable: a node named '{full}' exists already (not made by "
                         "get_variable); choose another name")
    store[full] = var
    if regularizer is not None:
        penalty = regularizer(var)
        if penalty is not None:
            graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, penalty)
    return var


# How get_variable makes a partitioned variable: opsdk/v1/partitioned.py sets "make" when
# imported (as `import opsdk.v1` does), since it builds on this module.
_PARTITIONED: dict = {}


def _initial_value(full: str, init: Any, shape: Any, dtype: np.dtype) -> Any:
    if init is None:
        init = glorot_uniform_initializer()
    if isinstance(init, (opsdk.Tensor, np.ndarray, list, float, int)) and not callable(init):
        if shape is not None and not isinstance(init, opsdk.Tensor):
            return np.broadcast_to(np.asarray(init, dtype=dtype), [int(d) for d in shape]).copy()
        return init
    if shape is None:
        raise OpsdkError(f"get_variable: variable '{full}' needs a shape (or a value as "
                         "initializer)")
    with _outside_name_scopes(opsdk.get_default_graph()), opsdk.name_scope(full):
        return init([int(d) for d in _tensors._static_shape("get_variable", shape)], dtype=dtype)


# ------------------------------------------------------------------------------ initializers
class _Initializer:
    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
        shape, dtype = [int(d) for d in shape], as_dtype(dtype or self.dtype or float32)
        if partition_info is not None and hasattr(self, "make_slice"):
            return self.make_slice(shape, dtype, [int(d) for d in partition_info.full_shape])
        return self.make(shape, dtype)

    dtype: Any = None


class constant_initializer(_Initializer):
    def __init__(self, value: Any = 0, dtype: Any = None, verify_shape: bool = False):
        self.value, self.dtype = value, dtype

    def make(self, shape: list, dtype: np.dtype) -> Any:
        return opsdk.constant(np.broadcast_to(np.asarray(self.value, dtype=dtype), shape).copy())


class zeros_initializer(constant_initializer):
    def __init__(self, dtype: Any = None):
        super().__init__(0, dtype)


class ones_initializer(constant_initializer):
    def __init__(self, dtype: Any = None):
        super().__init__(1, dtype)


class random_normal_initializer(_Initializer):
    def __init__(self, mean: float = 0.0, stddev: float = 1.0, seed: Any = None, dtype: Any = None):
        self.mean, self.stddev, self.seed, self.dtype = mean, stddev, seed, dtype

    def make(self, shape: list, dtype: np.dtype) -> Any:
        return _tensors.random_normal(shape, self.mean, self.stddev, dtype, self.seed)


class truncated_normal_initializer(random_normal_initializer):
    def make(self, shape: list, dtype: np.dtype) -> Any:
        return _tensors.truncated_normal(shape, self.mean, self.stddev, dtype, self.seed)


class random_uniform_initializer(_Initializer):
    def __init__(self, minval: float = 0.0, maxval: float = 1.0, seed: Any = None,
                 dtype: Any = None):
        self.minval, self.maxval, self.seed, self.dtype = minval, maxval, seed, dtype

    def make(self, shape: list, dtype: np.dtype) -> Any:
        return _tensors.random_uniform(shape, self.minval, self.maxval, dtype, self.seed)


class glorot_uniform_initializer(_Initializer):
    """Uniform in ±sqrt(6 / (fan_in + fan_out)) (TF's default for get_variable)."""

    def __init__(self, seed: Any = None, dtype: Any = None, uniform: bool = True):
        self.seed, self.dtype, self.uniform = seed, dtype, uniform

    def make(self, shape: list, dtype: np.dtype) -> Any:
        return self.make_slice(shape, dtype, shape)

    def make_slice(self, shape: list, dtype: np.dtype, full: list) -> Any:
        """A shard of a partitioned variable: scaled by the whole variable's fans, as TF."""
        fan_in, fan_out = _fans(full)
        if not self.uniform:
            std = math.sqrt(2.0 / max(fan_in + fan_out, 1))
            return _tensors.truncated_normal(shape, 0.0, std, dtype, self.seed)
        limit = math.sqrt(6.0 / max(fan_in + fan_out, 1))
        return _tensors.random_uniform(shape, -limit, limit, dtype, self.seed)


class variance_scaling_initializer(_Initializer):
    def __init__(self, scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal",
                 seed: Any = None, dtype: Any = None):
        self.scale, self.mode, self.distribution, self.seed, self.dtype = (
            scale, mode, distribution, seed, dtype)

    def make(self, shape: list, dtype: np.dtype) -> Any:
        return self.make_slice(shape, dtype, shape)

    def make_slice(self, shape: list, dtype: np.dtype, full: list) -> Any:
        """A shard of a partitioned variable: scaled by the whole variable's fans, as TF."""
        fan_in, fan_out = _fans(full)
        n = {"fan_in": fan_in, "fan_out": fan_out}.get(self.mode, (fan_in + fan_out) / 2)
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * self.scale / max(n, 1))
            return _tensors.random_uniform(shape, -limit, limit, dtype, self.seed)
        std = math.sqrt(self.scale / max(n, 1))
        if self.distribution == "untruncated_normal":
            return _tensors.random_normal(shape, 0.0, std, dtype, self.seed)
        # TF1's "normal" is its truncated normal too, the cut's loss of variance made up
        return _tensors.truncated_normal(shape, 0.0, std / 0.87962566, dtype, self.seed)


def xavier_initializer(uniform: bool = True, seed: Any = None, dtype: Any = float32) -> Any:
    return glorot_uniform_initializer(seed, dtype, uniform)


def _fans(shape: list) -> tuple[int, int]:
    if not shape:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return shape[-2] * receptive, shape[-1] * receptive


# ------------------------------------------------------------------------------ collections
def get_collection(key: str, scope: Optional[str] = None) -> list:
    """The collection `key` of the default graph; with `scope`, the items whose name matches it
    from the start (a regular expression, as in TF)."""
    items = opsdk.get_default_graph().get_collection(key)
    if scope is None:
        return items
    return [i for i in items if hasattr(i, "name") and re.match(scope, i.name)]


def get_collection_ref(key: str) -> list:
    """The default graph's collection `key` itself, to change in place (TF's)."""
    return opsdk.get_default_graph().get_collection_ref(key)


def add_to_collection(name: str, value: Any) -> None:
    opsdk.get_default_graph().add_to_collection(name, value)


def add_to_collections(names: Any, value: Any) -> None:
    for name in ([names] if isinstance(names, str) else names):
        add_to_collection(name, value)


def trainable_variables(scope: Optional[str] = None) -> list:
    return get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def global_variables(scope: Optional[str] = None) -> list:
    return get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


def local_variables(scope: Optional[str] = None) -> list:
    return get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def no_op(name: Optional[str] = None) -> Any:
    return opsdk.get_default_graph().create_op("no_op", [], {}, [], name=name or "NoOp")


def group(*inputs: Any, name: Optional[str] = None) -> Any:
    """One node that runs after all of `inputs` (ops, tensors, Variables, nested lists)."""
    flat = []
    for item in inputs:
        flat.extend(item if isinstance(item, (list, tuple)) else [item])
    graph = opsdk.get_default_graph()
    deps = [graph.as_graph_element(i) for i in flat if i is not None]
    deps = [d.op if isinstance(d, opsdk.Tensor) else d for d in deps]
    return graph.create_op("no_op", [], {}, [], name=name or "group_deps", control_inputs=deps)


def variables_initializer(var_list: Any, name: str = "init") -> Any:
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer() -> Any:
    return opsdk.global_variables_initializer()


def local_variables_initializer() -> Any:
    return variables_initializer(local_variables(), name="init_local")


def tuple_(tensors: Any, name: Optional[str] = None, control_inputs: Any = None) -> list:
    gate = group(*tensors, *(control_inputs or []))
    with opsdk.control_dependencies([gate]):
        return [opsdk.ops.identity(_tensors.convert_to_tensor(t)) for t in tensors]


def name_of_dtype(dtype: Any) -> str:
    return name_of(dtype)
