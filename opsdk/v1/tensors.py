"""Making tensors the TF1 way: `constant`, `placeholder`, `Variable`, `convert_to_tensor`, the
filled and random tensors with TF's positional signatures, and `TensorShape`.

    x = tf.placeholder("float", [None, 784])     # float32, as in TF
    W = tf.Variable(tf.random_normal([784, 10], stddev=0.1))
    W.get_shape().as_list()                      # [784, 10]
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import args, dtypes, graph_state, packing, session as _session, strings
from opsdk.v1.dtypes import as_dtype, default_array, name_of


class Dimension:
    """One dim of a TensorShape: `.value` is the size or None."""

    def __init__(self, value: Optional[int]):
        self.value = None if value is None else int(value)

    def __int__(self) -> int:
        if self.value is None:
            raise OpsdkError("int() of an unknown dimension")
        return self.value

    __index__ = __int__

    def __eq__(self, other: Any) -> bool:
        other = other.value if isinstance(other, Dimension) else other
        return self.value == other

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Dimension({self.value})"

    def __str__(self) -> str:
        return "?" if self.value is None else str(self.value)


class TensorShape:
    """TF's static shape: `as_list()`, `ndims`, `[i]` (a Dimension), `num_elements()`."""

    def __init__(self, dims: Optional[Sequence[Any]]):
        self.dims = None if dims is None else [d if isinstance(d, Dimension) else Dimension(d)
                                               for d in dims]

    @property
    def ndims(self) -> Optional[int]:
        return None if self.dims is None else len(self.dims)

    def as_list(self) -> list:
        if self.dims is None:
            raise OpsdkError("as_list() is not defined on a shape of unknown rank")
        return [d.value for d in self.dims]

    def num_elements(self) -> Optional[int]:
        sizes = self.as_list() if self.dims is not None else [None]
        return None if None in sizes else int(np.prod(sizes, dtype=np.int64))

    def is_fully_defined(self) -> bool:
        return self.dims is not None and None not in self.as_list()

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return TensorShape(self.as_list()[i])
        return self.dims[i] if self.dims is not None else Dimension(None)

    def __len__(self) -> int:
        return len(self.as_list())

    def __iter__(self):
        return iter(self.dims or ())

    def __eq__(self, other: Any) -> bool:
        other = other.as_list() if isinstance(other, TensorShape) else list(other)
        return self.as_list() == other

    def __repr__(self) -> str:
        return "TensorShape(None)" if self.dims is None else f"TensorShape({self.as_list()})"

    def __str__(self) -> str:
        """As TF1 prints a shape: `(?, 4)`, `(3,)`, `()`, `<unknown>`."""
        if self.dims is None:
            return "<unknown>"
        sizes = [str(d) for d in self.dims]
        return f"({sizes[0]},)" if len(sizes) == 1 else "(" + ", ".join(sizes) + ")"


def _get_shape(self: Any) -> TensorShape:
    """TF's static shape; strings' bytes are not an axis of it (opsdk/v1/strings.py)."""
    if strings.is_string(self):
        if self.shape is None:
            return TensorShape(None)
        return TensorShape([] if strings.is_scalar_string(self) else self.shape[:-1])
    return TensorShape(self.shape)


def _set_shape(self: Any, shape: Any) -> None:
    """Check that `shape` agrees with what is known (opsdk infers every static shape but those
    of a py_func's outputs, which it refines: the node checks its results against them)."""
    want = TensorShape(shape.as_list() if isinstance(shape, TensorShape) else shape)
    have = self.shape
    if want.dims is None:
        return
    if have is not None and (len(have) != len(want.dims) or any(
            a is not None and b.value is not None and a != b.value for a, b in zip(have, want))):
        raise OpsdkError(f"set_shape: tensor '{self.name}' has shape {list(have)}, "
                         f"incompatible with {want.as_list()}")
    if self.op.type == "py_func":
        merged = want.as_list() if have is None else [
            a if a is not None else b for a, b in zip(have, want.as_list())]
        self.shape = tuple(merged)


def _value(item: Any) -> Any:
    """A Variable as TF1 reads it where the tensor is made: inside `control_dependencies`, after
    those ops (Variable.read); anything else with a graph element as that element."""
    if isinstance(item, opsdk.Variable):
        return item.read()
    return item._as_graph_element() if hasattr(item, "_as_graph_element") else item


def convert_to_tensor(value: Any, dtype: Any = None, name: Optional[str] = None,
                      preferred_dtype: Any = None) -> Any:
    """A Tensor for `value`: tensors (and Variables' values) as they are, else a constant by TF's
    dtype rules (Python floats float32, ints int32)."""
    value = _value(value)
    if isinstance(value, opsdk.Tensor):
        if dtype is not None and value.dtype != name_of(dtype):
            raise OpsdkError(f"convert_to_tensor: tensor '{value.name}' is {value.dtype}, "
                             f"not {name_of(dtype)}")
        return value
    if isinstance(value, (list, tuple)) and packing.first_dtype(list(value)) is not None:
        return _ops.stack(packing.elements("convert_to_tensor", value, dtype), name=name)
    return constant(value, dtype=dtype or preferred_dtype, name=name)


def _strings_within(value: Any) -> bool:
    """Nested lists (or a NumPy array) of strings."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "SU" or (value.dtype == object and value.size > 0 and all(
            isinstance(v, (str, bytes)) for v in value.reshape(-1)))
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    return isinstance(value, (str, bytes))


def constant(value: Any, dtype: Any = None, shape: Any = None, name: Optional[str] = None,
             verify_shape: bool = False) -> Any:
    """`tf.constant`: a scalar with `shape` fills it; strings are supported as constants."""
    if dtype is dtypes.string or isinstance(value, (str, bytes)) or _strings_within(value) or (
            isinstance(value, (list, tuple)) and value and isinstance(value[0], (str, bytes))):
        return strings.string_constant(value, name)
    array = default_array(value, dtype)
    if shape is not None:
        shape = [int(d) for d in shape]
        array = (np.broadcast_to(array, shape) if array.size == 1 or array.shape == tuple(shape)
                 else array.reshape(shape))
    return opsdk.constant(np.array(array, order="C"), name=name or "Const")  # ascontiguousarray would make a 0-d value 1-d


def placeholder(dtype: Any, shape: Any = None, name: Optional[str] = None) -> Any:
    """`tf.placeholder(tf.float32, [None, 784])` (positional shape; "float" is float32); a
    string one holds a scalar string (opsdk/v1/strings.py)."""
    if isinstance(shape, TensorShape):
        shape = None if shape.dims is None else shape.as_list()
    if dtype is dtypes.string or dtype is str or dtype == "string":
        return strings.string_placeholder(shape, name)
    if shape is not None:  # an int is a 1-d shape, as in TF (`shape=(batch_size)`)
        shape = args.dims("placeholder", shape).known  # None: a dim fed at any size
    return opsdk.placeholder(name_of(dtype), shape, name=name or "Placeholder")


def placeholder_with_default(input: Any, shape: Any, name: Optional[str] = None) -> Any:
    """The default's value unless fed (a fed tensor of the same shape)."""
    return _ops.identity(convert_to_tensor(input), name=name)


_OWN = frozenset({"op", "graph", "trainable", "initializer"})  # set in __init__: never forwarded


class Variable(opsdk.Variable):
    """`tf.Variable(initial_value, trainable=True, collections=None, validate_shape=True,
    name=None, dtype=None)`: Python values follow TF's dtype rules; a callable is called."""

    def __init__(self, initial_value: Any = None, trainable: bool = True,
                 collections: Any = None, validate_shape: bool = True,
                 caching_device: Any = None, name: Optional[str] = None, dtype: Any = None,
                 **unused: Any):
        if initial_value is None:
            raise OpsdkError("Variable: initial_value is required")
        with opsdk.control_dependencies(None):  # TF's init_scope: made for no training step
            value = _value(initial_value() if callable(initial_value) else initial_value)
            if isinstance(value, opsdk.Tensor) and dtype and value.dtype != name_of(dtype):
                value = _ops.cast(value, dtype=name_of(dtype))
        if not isinstance(value, opsdk.Tensor):
            value = default_array(value, dtype)
        super().__init__(value, name=name or "Variable", trainable=trainable,
                         collections=collections)

    @property
    def name(self) -> str:
        """TF's name of the variable: its value tensor's, `'w:0'` (`v.op.name` is the node's,
        `'w'`, which checkpoints key on)."""
        return f"{self.op.name}:0"

    def eval(self, session: Any = None) -> Any:
        """The variable's value in `session` (default: the default session)."""
        return self.value().eval(session=session)

    def get_shape(self) -> TensorShape:
        return TensorShape(self.shape)

    def initialized_value(self) -> Any:
        """The value, read after the initializer ran."""
        with self.graph.control_dependencies([self.initializer]):
            return _ops.identity(self.read())

    def read_value(self) -> Any:
        return self.read()

    def value(self) -> Any:
        """The value as TF1's resource variables read it: a new read at each call, so inside
        `control_dependencies(ops)` it runs after `ops`; elsewhere the variable's one value node
        (docs/tf1.md)."""
        return self.read()

    def _as_graph_element(self) -> Any:
        # The variable itself, wherever it is named (gradients, fetches, savers): not a read
        return self.op.outputs[0]

    def load(self, value: Any, session: Any = None) -> None:
        """Set the value in `session` directly."""
        _session._session_for(f"load of '{self.op.name}'", session).variables.assign(
            self.op.name, np.asarray(value, dtype=self.dtype))

    # Operators read the value (as TF's Variable does), after the control dependencies in force.
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in _OWN:
            raise AttributeError(name)
        return getattr(self.value(), name)

    def __add__(self, o): return self.read() + o
    def __radd__(self, o): return o + self.read()
    def __sub__(self, o): return self.read() - o
    def __rsub__(self, o): return o - self.read()
    def __mul__(self, o): return self.read() * o
    def __rmul__(self, o): return o * self.read()
    def __truediv__(self, o): return self.read() / o
    def __rtruediv__(self, o): return o / self.read()
    def __matmul__(self, o): return self.read() @ o
    def __rmatmul__(self, o): return o @ self.read()
    def __neg__(self): return -self.read()
    def __pow__(self, o): return self.read() ** o
    def __getitem__(self, key): return self.read()[key]


def _static_shape(who: str, shape: Any) -> list[int]:
    return args.static_dims(who, shape)


def graph_node(op: Any, **attrs: Any) -> Any:
    """op(**attrs), an op without tensor inputs, as a node of the default graph. Outside
    `with graph.as_default():` opsdk would run it at once and hand back an array; TF1 has no
    eager mode: `tf.random_normal([2])` is drawn anew at every run and `tf.zeros([2]).eval()`
    works."""
    with opsdk.get_default_graph().as_default():
        return op(**attrs)


def _filled(who: str, shape: Any, value: Any, dtype: Any, name: Optional[str]) -> Any:
    """A tensor of `shape` filled with `value` (a number or a scalar tensor): the `fill` op when
    both are known when the graph is built, else `fill_dims` shaped at run time."""
    dims, value = args.dims(who, shape), args.scalar(who, "value", value)
    if dims.static and not isinstance(value, opsdk.Tensor):
        array = default_array(value)
        if dtype is None:
            dtype = array.dtype
        # An int stays an exact Python int (float() rounded 2**63 - 1 to 2**63); bools as 0/1.
        exact = array.item() if array.dtype.kind in "iub" else float(array)
        return graph_node(_ops.fill, shape=dims.known, value=exact, dtype=name_of(dtype),
                          name=name)
    value = convert_to_tensor(value) if dtype is None else _as(convert_to_tensor(value), dtype)
    return _known_dims(dims, _ops.fill_dims(dims.tensor(), _ops.reshape(value, shape=[])), name)


def _known_dims(dims: Any, tensor: Any, name: Optional[str]) -> Any:
    """`tensor` (shaped at run time) with the sizes known when the graph is built declared too,
    as TF's shape inference would: a reshape (by the run-time shape where two or more sizes are
    unknown, `reshape_dims` checking the known ones)."""
    known = [-1 if d is None else d for d in dims.known]
    if -1 not in known or known.count(-1) == len(known):
        return tensor if name is None else _ops.identity(tensor, name=name)
    if known.count(-1) == 1:
        return _ops.reshape(tensor, shape=known, name=name)
    return _ops.reshape_dims(tensor, dims.tensor(), shape=known, name=name)


def _as(tensor: Any, dtype: Any) -> Any:
    return tensor if tensor.dtype == name_of(dtype) else _ops.cast(tensor, dtype=name_of(dtype))


def zeros(shape: Any, dtype: Any = dtypes.float32, name: Optional[str] = None) -> Any:
    """`tf.zeros(shape)`: `shape` a list, an int tensor or a list holding scalar tensors."""
    return _filled("zeros", shape, 0, dtype, name)


def ones(shape: Any, dtype: Any = dtypes.float32, name: Optional[str] = None) -> Any:
    return _filled("ones", shape, 1, dtype, name)


def fill(dims: Any, value: Any, name: Optional[str] = None) -> Any:
    """`tf.fill(dims, value)`: the dtype is value's (Python floats float32, ints int32)."""
    return _filled("fill", dims, value, None, name)


def zeros_like(tensor: Any, dtype: Any = None, name: Optional[str] = None) -> Any:
    out = _ops.zeros_like(convert_to_tensor(tensor), name=name)
    return out if dtype is None else _ops.cast(out, dtype=name_of(dtype))


def ones_like(tensor: Any, dtype: Any = None, name: Optional[str] = None) -> Any:
    out = _ops.ones_like(convert_to_tensor(tensor), name=name)
    return out if dtype is None else _ops.cast(out, dtype=name_of(dtype))


def _seeds() -> dict:
    """The default graph's seed state: its graph-level seed and how many ops took one. Kept
    per graph, as TF keeps `graph.seed`: a new graph (`tf.Graph()`, `reset_default_graph`) has
    none until the program sets one."""
    return graph_state.table(opsdk.get_default_graph(), "random_seed")


def set_random_seed(seed: int) -> None:
    """TF's graph-level seed, of the default graph: ops created after it without their own seed
    draw reproducible sequences (each run the next values; a new session starts again)."""
    state = _seeds()
    state["graph"] = int(seed)
    state["count"] = 0


def op_seed(seed: Optional[int]) -> int:
    """The op seed for opsdk's random ops (0: fresh values per run), from TF's two seeds. The
    ops take it with `sequence=True`: each run draws the next values of the seed's sequence, as
    TF's seeded ops do."""
    if seed is not None:
        return int(seed) % (2 ** 31 - 1) + 1
    state = _seeds()
    if state.get("graph") is None:
        return 0
    state["count"] = state.get("count", 0) + 1
    return (state["graph"] * 7919 + state["count"]) % (2 ** 31 - 1) + 1


def random_uniform(shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = dtypes.float32,
                   seed: Optional[int] = None, name: Optional[str] = None) -> Any:
    """Uniform values in [minval, maxval) (maxval defaults to 1 for floats; an integer dtype
    needs it); the bounds and the shape may be tensors."""
    if as_dtype(dtype).kind in "iu":
        return _random_integers(shape, minval, maxval, dtype, seed, name)
    low = args.scalar("random_uniform", "minval", minval)
    high = args.scalar("random_uniform", "maxval", 1.0 if maxval is None else maxval)
    return _random("random_uniform", shape, (low, high), dtype, seed, name)


def _random_integers(shape: Any, minval: Any, maxval: Any, dtype: Any, seed: Optional[int],
                     name: Optional[str]) -> Any:
    """Uniform integers in [minval, maxval): `minval + floor(u * (maxval - minval))` for a
    float64 uniform u in [0, 1) (truncation is the floor, u * span being >= 0; the span must
    stay below 2**53 for every integer to be reachable)."""
    who, dtype = "random_uniform", name_of(dtype)
    if maxval is None:
        raise OpsdkError(f"random_uniform: an integer dtype ({dtype}) needs maxval, as in TF")
    bounds = [args.scalar(who, arg, value) for arg, value in (("minval", minval),
                                                              ("maxval", maxval))]
    for arg, bound in zip(("minval", "maxval"), bounds):
        if not isinstance(bound, opsdk.Tensor) and (isinstance(bound, float) or bound is True
                                                    or bound is False):
            raise OpsdkError(f"random_uniform: argument '{arg}' must be an int for dtype "
                             f"{dtype}, got {bound!r}")
    if not args.numbers_or_tensors(bounds) and bounds[0] >= bounds[1]:
        raise OpsdkError(f"random_uniform: minval ({bounds[0]}) must be below maxval "
                         f"({bounds[1]})")
    low, high = (_as(convert_to_tensor(np.asarray(b, dtype=dtype)) if not isinstance(
        b, opsdk.Tensor) else b, dtype) for b in bounds)
    unit = _random(who, shape, (0.0, 1.0), "float64", seed, None)
    span = _ops.cast(high, dtype="float64") - _ops.cast(low, dtype="float64")
    offset = _ops.minimum(_ops.cast(unit * span, dtype=dtype), high - low - _one(dtype))
    return _ops.add(low, offset, name=name)


def _one(dtype: str) -> Any:
    return opsdk.constant(np.asarray(1, dtype=dtype))


def random_normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = dtypes.float32,
                  seed: Optional[int] = None, name: Optional[str] = None) -> Any:
    """Normal values; mean, stddev and the shape may be tensors."""
    return _random("random_normal", shape, _moments("random_normal", mean, stddev), dtype, seed,
                   name)


def truncated_normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = dtypes.float32,
                     seed: Optional[int] = None, name: Optional[str] = None) -> Any:
    """Normal values redrawn until within two standard deviations of the mean."""
    return _random("truncated_normal", shape, _moments("truncated_normal", mean, stddev), dtype,
                   seed, name)


def random_gamma(shape: Any, alpha: Any, beta: Any = None, dtype: Any = dtypes.float32,
                 seed: Optional[int] = None, name: Optional[str] = None) -> Any:
    """Gamma(alpha, rate beta) values of shape `shape + broadcast(alpha, beta).shape`; no
    gradient (TF's has one for alpha)."""
    dtype = name_of(dtype)
    a = _as(convert_to_tensor(alpha), dtype)
    b = _ops.ones_like(a) if beta is None else _as(convert_to_tensor(beta), dtype)
    return _ops.random_gamma(a, b, shape=args.static_dims("random_gamma", shape),
                             seed=op_seed(seed), sequence=True, name=name)


def random_poisson(lam: Any, shape: Any, dtype: Any = dtypes.float32, seed: Optional[int] = None,
                   name: Optional[str] = None) -> Any:
    """Poisson(lam) values of shape `shape + lam.shape`, in `dtype`."""
    rate = convert_to_tensor(lam)
    rate = rate if rate.dtype in ("float32", "float64") else _as(rate, "float32")
    return _ops.random_poisson(rate, shape=args.static_dims("random_poisson", shape),
                               seed=op_seed(seed), sequence=True, dtype=name_of(dtype),
                               name=name)


def _moments(who: str, mean: Any, stddev: Any) -> tuple[Any, Any]:
    return args.scalar(who, "mean", mean), args.scalar(who, "stddev", stddev)


_PARAMS = {"random_uniform": ("minval", "maxval"), "random_normal": ("mean", "stddev"),
           "truncated_normal": ("mean", "stddev")}


def _random(who: str, shape: Any, params: tuple, dtype: Any, seed: Optional[int],
            name: Optional[str]) -> Any:
    """The op `who` when the shape and both parameters are known when the graph is built; else
    its standard distribution (`<who>_dims` for a run-time shape) scaled and shifted by graph
    arithmetic: uniform `low + (high - low) * u`, normal `mean + stddev * z`."""
    dims, dtype = args.dims(who, shape), name_of(dtype)
    first, second = params
    if dims.static and not args.numbers_or_tensors(params):
        attrs = dict(zip(_PARAMS[who], (float(first), float(second))))
        return graph_node(getattr(_ops, who), shape=dims.known, seed=op_seed(seed),
                          sequence=True, dtype=dtype, name=name, **attrs)
    if dims.static:
        standard = graph_node(getattr(_ops, who), shape=dims.known, seed=op_seed(seed),
                              sequence=True, dtype=dtype)
    else:
        standard = _known_dims(dims, getattr(_ops, who + "_dims")(
            dims.tensor(), seed=op_seed(seed), sequence=True, dtype=dtype), None)
    first, second = (_as(convert_to_tensor(v), dtype) for v in params)
    scale = second - first if who == "random_uniform" else second
    return _ops.add(first, _ops.mul(scale, standard), name=name)


def attach() -> None:
    """Give opsdk's Tensor TF's `get_shape()` and `set_shape()`."""
    opsdk.Tensor.get_shape = _get_shape
    opsdk.Tensor.set_shape = _set_shape
