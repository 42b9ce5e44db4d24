"""`tf.data` for TF1 programs: datasets read through an iterator's `get_next()`.

    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(1000).batch(32)
    iterator = dataset.repeat().make_initializable_iterator()
    x, y = iterator.get_next()            # one batch per step that runs them
    sess.run(iterator.initializer)        # feeds for placeholders the dataset was made from

How it runs: a dataset is a description; its elements are made in Python, from NumPy arrays, in
the process that built the graph. `get_next()` is a py_func node
(opsdk/runtime/frontend/py_func.py) that pulls the next element; once the elements are spent it
raises StopIteration, which a run raises as `tf.errors.OutOfRangeError`, as TensorFlow's
iterator does. An iterator's `initializer` is a py_func node taking the values of the graph
tensors the dataset was made from (a placeholder fed in `feed_dict`) and starting the elements
anew. `map` and `filter` trace their function once, into a graph of its own with a placeholder
per component, and run each element through it in an opsdk Session.

Structures are TensorFlow's: a tuple or a dict is a structure of components, a list is one
array. Where it differs from TensorFlow: an iterator's position belongs to the iterator (TF
keeps one per session); `prefetch` and `num_parallel_calls` change nothing (an element is made
when a step asks for it); a graph holding an iterator runs only in the process that built it.
Components are numbers, bools or strings (bytes; in the graph they travel as opsdk/v1/strings.py
keeps strings); `TextLineDataset` and `TFRecordDataset` read files (opsdk/v1/records.py).

Feedable iterators: `iterator.string_handle()` is a node whose run gives the iterator's handle
(bytes naming it in this process), and `Iterator.from_string_handle(handle, types, shapes)` an
iterator whose `get_next()` reads the iterator whose handle is fed to `handle` (a
`tf.placeholder(tf.string, [])`), as TF1 programs switch between a training and a validation
dataset.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator as PyIterator, Optional, Sequence

import numpy as np

import opsdk
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.control_flow.builders import compatible, fits, join_shapes
from opsdk.runtime.frontend.py_func import py_func_node
from opsdk.v1 import errors, strings
from opsdk.v1 import session as _session
from opsdk.v1.dtypes import as_dtype, default_array
from opsdk.v1.tensors import TensorShape, convert_to_tensor, op_seed

__all__ = ["Dataset", "Iterator", "Options", "TextLineDataset", "TFRecordDataset",
           "FixedLengthRecordDataset", "AUTOTUNE",
           "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "experimental", "make_one_shot_iterator",
           "make_initializable_iterator", "get_output_types", "get_output_shapes",
           "get_output_classes"]

_LEAF = "*"


# -- structures: tuples and dicts of components, as tf.data nests them ---------------------------

def _flatten(value: Any) -> tuple[list, Any]:
    """The components of `value` and its tree: a tuple (namedtuples too) or a dict (keys sorted,
    as TensorFlow orders them) is a structure; anything else, lists included, is one component."""
    if isinstance(value, dict):
        keys = sorted(value)
        parts = [_flatten(value[k]) for k in keys]
        return [x for p in parts for x in p[0]], ("dict", tuple(keys), tuple(p[1] for p in parts))
    if isinstance(value, tuple):
        parts = [_flatten(v) for v in value]
        kind = type(value) if hasattr(value, "_fields") else tuple
        return [x for p in parts for x in p[0]], ("tuple", kind, tuple(p[1] for p in parts))
    return [value], _LEAF


def _pack(tree: Any, leaves: Sequence[Any]) -> Any:
    items = iter(leaves)

    def build(node: Any) -> Any:
        if node == _LEAF:
            return next(items)
        kind, how, children = node
        built = [build(c) for c in children]
        if kind == "dict":
            return dict(zip(how, built))
        return tuple(built) if how is tuple else how(*built)
    return build(tree)


def _describe(tree: Any) -> str:
    if tree == _LEAF:
        return "a component"
    kind, how, children = tree
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {_describe(c)}" for k, c in zip(how, children)) + "}"
    return "(" + ", ".join(_describe(c) for c in children) + ")"


@dataclass(frozen=True)
class _Spec:
    """One component: its dtype (opsdk's name) and static shape (None: any rank)."""
    dtype: str
    shape: Optional[tuple]

    def agrees(self, value: np.ndarray) -> bool:
        return fits(self.shape, value.shape)

    def joined(self, other: "_Spec") -> "_Spec":
        """The spec both fit (dims that differ unknown)."""
        return _Spec(self.dtype, join_shapes(self.shape, other.shape))


_STRING = "string"  # a component of strings: object arrays of bytes


def _spec_of(value: Any) -> _Spec:
    if isinstance(value, opsdk.Tensor):
        if strings.is_string(value):
            shape = value.get_shape()
            return _Spec(_STRING, None if shape.dims is None else tuple(shape.as_list()))
        return _Spec(value.dtype, None if value.shape is None else tuple(value.shape))
    if value.dtype == object:
        return _Spec(_STRING, tuple(value.shape))
    return _Spec(value.dtype.name, tuple(value.shape))


def _texts(value: Any) -> np.ndarray:
    """str/bytes values (nested lists or an array) as an object array of bytes."""
    array = np.asarray(value, dtype=object)
    out = np.empty(array.shape, dtype=object)
    for index in np.ndindex(array.shape):
        v = array[index]
        if not isinstance(v, (str, bytes, np.str_, np.bytes_)):
            raise OpsdkError(f"a string component holds {type(v).__name__} {v!r}")
        out[index] = v.encode() if isinstance(v, str) else bytes(v)
    return out


def _typed(value: Any, spec: _Spec) -> np.ndarray:
    """A component's value as an array of the spec's dtype (strings: bytes objects)."""
    if spec.dtype == _STRING:
        return _texts(value)
    return np.asarray(value, dtype=spec.dtype)


def _component(who: str, value: Any) -> Any:
    """A graph tensor (a Variable's value) as it is, anything else as an array by TF's rules."""
    if hasattr(value, "_as_graph_element"):
        value = value._as_graph_element()
    if isinstance(value, opsdk.Tensor):
        if strings.is_string(value) and value.op.type != "const":
            raise OpsdkError(f"{who}: a component of strings must be known when the graph is "
                             f"built (Python strings or a constant), not '{value.name}'")
        return _texts(_string_value(value)) if strings.is_string(value) else value
    if isinstance(value, (str, bytes)) or (isinstance(value, (list, tuple, np.ndarray)) and
                                           np.asarray(value, dtype=object).size and
                                           np.asarray(value).dtype.kind in "SUO"):
        return _texts(value)
    try:
        array = default_array(value)
    except (TypeError, ValueError) as exc:
        raise OpsdkError(f"{who}: {type(value).__name__} is not an array: {exc}") from None
    if array.dtype.kind not in "biuf":
        raise OpsdkError(f"{who}: a component holds {array.dtype} values; opsdk.v1's datasets "
                         "take numbers, bools and strings")
    return array


def _string_value(tensor: Any) -> Any:
    """A constant string tensor's strings (bytes, or an object array of them)."""
    array = np.asarray(tensor.op.attrs["value"])
    return strings._decode_scalar(array) if strings.is_scalar_string(tensor) else \
        strings._decode_list(array)


class _Run:
    """One start of a pipeline (an iterator's initialization): the values of its graph tensors
    and the random state of its shuffles, which lasts across the epochs of a `repeat`."""

    def __init__(self, values: dict[int, np.ndarray]):
        self.values = values
        self.state: dict[int, Any] = {}

    def value(self, tensor: Any) -> np.ndarray:
        return self.values[id(tensor)]


# -- datasets -------------------------------------------------------------------------------------

class Dataset:
    """`tf.data.Dataset`: a sequence of elements, each a structure of arrays."""

    def __init__(self, tree: Any, specs: Sequence[_Spec], parents: Sequence["Dataset"] = (),
                 sources: Sequence[Any] = ()):
        self._tree, self._specs = tree, list(specs)
        self._parents = list(parents)
        seen, self._sources = set(), []
        for t in [*sources, *(s for p in self._parents for s in p._sources)]:
            if id(t) not in seen:
                seen.add(id(t))
                self._sources.append(t)

    def _elements(self, run: _Run) -> PyIterator[list]:  # pragma: no cover - every kind has one
        raise NotImplementedError

    # what an element is
    @property
    def output_types(self) -> Any:
        return _pack(self._tree, [as_dtype(s.dtype) for s in self._specs])

    @property
    def output_shapes(self) -> Any:
        return _pack(self._tree, [TensorShape(None if s.shape is None else list(s.shape))
                                  for s in self._specs])

    @property
    def output_classes(self) -> Any:
        return _pack(self._tree, [opsdk.Tensor for _ in self._specs])

    def __repr__(self) -> str:
        parts = ", ".join(f"{s.dtype}{list(s.shape) if s.shape is not None else '[?]'}"
                          for s in self._specs)
        return f"<{type(self).__name__.lstrip('_')} Dataset of {_describe(self._tree)}: {parts}>"

    # sources
    @staticmethod
    def from_tensor_slices(tensors: Any) -> "Dataset":
        """One element per row of the components (their first dimensions must agree)."""
        return _Slices(tensors, slices=True)

    @staticmethod
    def from_tensors(tensors: Any) -> "Dataset":
        """One element: the components whole."""
        return _Slices(tensors, slices=False)

    @staticmethod
    def range(*args: Any, output_type: Any = None) -> "Dataset":
        """`range(stop)`, `range(start, stop[, step])` as Python's (each an int or a scalar int
        tensor, read when the iterator starts); int64 scalars."""
        if not 1 <= len(args) <= 3:
            raise OpsdkError(f"Dataset.range takes 1 to 3 arguments, not {len(args)}")
        return _Range([_count("range", a) for a in args], as_dtype(output_type or "int64").name)

    @staticmethod
    def list_files(file_pattern: Any, shuffle: Optional[bool] = None,
                   seed: Optional[int] = None) -> "Dataset":
        """The names of the files matching file_pattern (a glob, or a list of them), as string
        elements: shuffled unless shuffle=False (TF's default), sorted otherwise."""
        import glob

        patterns = [file_pattern] if isinstance(file_pattern, (str, bytes)) else list(file_pattern)
        names = sorted({n for p in patterns for n in glob.glob(os.fsdecode(p))})
        if not names:
            raise errors.InvalidArgumentError(
                None, None, f"Dataset.list_files: no files match {patterns!r}")
        dataset: Dataset = _Slices(_texts(names), True)
        if shuffle is None or shuffle:
            dataset = dataset.shuffle(len(names), seed=seed)
        return dataset

    @staticmethod
    def from_generator(generator: Callable[..., Any], output_types: Any,
                       output_shapes: Any = None,
                       args: Optional[Sequence[Any]] = None) -> "Dataset":
        """The elements `generator(*args)` yields, converted to `output_types` and checked
        against `output_shapes` (unknown when not given)."""
        return _Generated(generator, output_types, output_shapes, tuple(args or ()))

    @staticmethod
    def zip(datasets: Any) -> "Dataset":
        """Elements of the datasets side by side (a structure of datasets), as long as the
        shortest."""
        return _Zip(datasets)

    # transformations
    def map(self, map_func: Callable[..., Any],
            num_parallel_calls: Optional[int] = None) -> "Dataset":
        """`map_func` on each element (a tuple's components as its arguments)."""
        return _Map(self, map_func)

    def flat_map(self, map_func: Callable[..., Any]) -> "Dataset":
        """The elements of the dataset `map_func` makes of each element, one dataset after
        another."""
        return _FlatMap("Dataset.flat_map", self, map_func)

    def interleave(self, map_func: Callable[..., Any], cycle_length: Optional[int] = None,
                   block_length: int = 1, num_parallel_calls: Optional[int] = None) -> "Dataset":
        """The datasets `map_func` makes of `cycle_length` elements at a time, `block_length`
        elements from each in turn (TF's order). `cycle_length` None or AUTOTUNE: the machine's
        cores, as TensorFlow's default."""
        cycle = (os.cpu_count() or 1) if cycle_length in (None, AUTOTUNE) else \
            _positive("interleave", "cycle_length", cycle_length)
        return _FlatMap("Dataset.interleave", self, map_func, cycle,
                        _positive("interleave", "block_length", block_length))

    def filter(self, predicate: Callable[..., Any]) -> "Dataset":
        """The elements for which `predicate` (a scalar bool tensor) holds."""
        return _Filter(self, predicate)

    def batch(self, batch_size: int, drop_remainder: bool = False) -> "Dataset":
        """`batch_size` consecutive elements stacked (the last batch may be smaller)."""
        return _Batch(self, _positive("batch", "batch_size", batch_size), bool(drop_remainder))

    def padded_batch(self, batch_size: int, padded_shapes: Any = None, padding_values: Any = None,
                     drop_remainder: bool = False) -> "Dataset":
        """As `batch`, each component padded at its end to `padded_shapes` (a None or -1 dim:
        the longest in the batch; not given: the longest for every dim)."""
        return _Batch(self, _positive("padded_batch", "batch_size", batch_size),
                      bool(drop_remainder), pad=(padded_shapes, padding_values))

    def unbatch(self) -> "Dataset":
        """The rows of each element, one element each."""
        return _Unbatch(self)

    def shuffle(self, buffer_size: int, seed: Optional[int] = None,
                reshuffle_each_iteration: bool = True) -> "Dataset":
        """Elements drawn at random from a buffer of the next `buffer_size`."""
        return _Shuffle(self, _positive("shuffle", "buffer_size", buffer_size), seed,
                        bool(reshuffle_each_iteration))

    def repeat(self, count: Any = None) -> "Dataset":
        """The elements `count` times (None or -1: forever; a tensor: its value when the
        iterator starts)."""
        return _Repeat(self, _count("repeat", count))

    def take(self, count: Any) -> "Dataset":
        """The first `count` elements (-1: all)."""
        return _Cut(self, "take", _count("take", count))

    def skip(self, count: Any) -> "Dataset":
        """All but the first `count` elements (-1: none)."""
        return _Cut(self, "skip", _count("skip", count))

    def shard(self, num_shards: int, index: int) -> "Dataset":
        """Every `num_shards`-th element from `index` on."""
        num_shards = _positive("shard", "num_shards", num_shards)
        if not 0 <= int(index) < num_shards:
            raise OpsdkError(f"Dataset.shard: index must be in [0, {num_shards}), not {index}")
        return _Cut(self, "shard", (num_shards, int(index)))

    def concatenate(self, dataset: "Dataset") -> "Dataset":
        return _Concatenate(self, dataset)

    def enumerate(self, start: int = 0) -> "Dataset":
        """(position, element) pairs, positions int64 from `start`."""
        return Dataset.zip((Dataset.range(start, 2 ** 62), self))

    def cache(self, filename: str = "") -> "Dataset":
        """The first pass's elements kept in memory and replayed by a `repeat` (a file name is
        refused: no file cache)."""
        if filename:
            raise OpsdkError("Dataset.cache: opsdk.v1 caches in memory only; call cache() "
                             "without a file name")
        return _Cache(self)

    def prefetch(self, buffer_size: int) -> "Dataset":
        """The same elements (each is made when a step asks for it)."""
        return self

    def apply(self, transformation_func: Callable[["Dataset"], "Dataset"]) -> "Dataset":
        result = transformation_func(self)
        if not isinstance(result, Dataset):
            raise OpsdkError(f"Dataset.apply: the function returned {type(result).__name__}, "
                             "not a Dataset")
        return result

    def with_options(self, options: Any) -> "Dataset":
        return self

    # iterators
    def make_one_shot_iterator(self) -> "Iterator":
        """An iterator that starts itself on its first `get_next()`; the dataset may not read a
        placeholder (nothing would feed it)."""
        for t in self._sources:
            if t.op.type == "placeholder":
                raise OpsdkError(
                    f"make_one_shot_iterator: the dataset reads placeholder '{t.name}', which "
                    "a one-shot iterator cannot feed; use make_initializable_iterator() and feed "
                    "it when running the iterator's initializer")
        return Iterator(self._tree, self._specs, dataset=self, one_shot=True)

    def make_initializable_iterator(self, shared_name: Optional[str] = None) -> "Iterator":
        """An iterator started (and restarted) by running its `initializer`."""
        return Iterator(self._tree, self._specs, dataset=self)

    def __iter__(self) -> Any:
        raise OpsdkError("a Dataset is iterated in a session: use make_one_shot_iterator() or "
                         "make_initializable_iterator() and run get_next()")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(f"opsdk.v1's Dataset has no '{name}' (docs/tf1.md lists what "
                             "tf.data provides)")


def _count(who: str, count: Any) -> Any:
    """A count as an int (None: -1), or a scalar int tensor read when the iterator starts."""
    if isinstance(count, (bool, np.bool_)):
        raise OpsdkError(f"Dataset.{who}: a count must be an int, not {count!r}")
    if count is None:
        return -1
    if hasattr(count, "_as_graph_element"):
        count = count._as_graph_element()
    if isinstance(count, opsdk.Tensor):
        if count.dtype not in ("int32", "int64") or count.shape not in (None, ()):
            raise OpsdkError(f"Dataset.{who}: count must be an int or a scalar int tensor, not "
                             f"{count.dtype}{list(count.shape or [])}")
        return count
    return int(count)


def _counted(run: "_Run", count: Any) -> int:
    return int(run.value(count)) if isinstance(count, opsdk.Tensor) else count


def _positive(who: str, what: str, value: Any) -> int:
    if isinstance(value, opsdk.Tensor) or int(value) < 1:
        raise OpsdkError(f"Dataset.{who}: {what} must be a Python int >= 1, not {value!r}")
    return int(value)


class _Slices(Dataset):
    def __init__(self, tensors: Any, slices: bool):
        who = "Dataset.from_tensor_slices" if slices else "Dataset.from_tensors"
        leaves, tree = _flatten(tensors)
        if not leaves:
            raise OpsdkError(f"{who}: no components given")
        self._values = [_component(who, v) for v in leaves]
        specs = [_spec_of(v) for v in self._values]
        if slices:
            firsts = set()
            for k, s in enumerate(specs):
                if s.shape is not None and not s.shape:
                    raise OpsdkError(f"{who}: component {k} is a scalar; slices need at least "
                                     "one dimension")
                if s.shape is not None and s.shape[0] is not None:
                    firsts.add(s.shape[0])
            if len(firsts) > 1:
                raise OpsdkError(f"{who}: the components' first dimensions differ "
                                 f"({', '.join(str(d) for d in sorted(firsts))}); every "
                                 "component needs one row per element")
            specs = [_Spec(s.dtype, None if s.shape is None else s.shape[1:]) for s in specs]
        self._slices = slices
        super().__init__(tree, specs, sources=[v for v in self._values
                                               if isinstance(v, opsdk.Tensor)])

    def _elements(self, run: _Run) -> PyIterator[list]:
        arrays = [run.value(v) if isinstance(v, opsdk.Tensor) else v for v in self._values]
        if not self._slices:
            yield arrays
            return
        rows = {len(a) if a.ndim else -1 for a in arrays}
        if len(rows) != 1 or -1 in rows:
            raise errors.InvalidArgumentError(
                None, None, "Dataset.from_tensor_slices: the components' first dimensions "
                f"differ when run ({', '.join(str(list(a.shape)) for a in arrays)})")
        for i in range(rows.pop()):
            yield [a[i] for a in arrays]


class _Range(Dataset):
    def __init__(self, args: list, dtype: str):
        self._args = args
        super().__init__(_LEAF, [_Spec(dtype, ())],
                         sources=[a for a in args if isinstance(a, opsdk.Tensor)])

    def _elements(self, run: _Run) -> PyIterator[list]:
        dtype = np.dtype(self._specs[0].dtype)
        numbers = range(*(_counted(run, a) for a in self._args))
        for n in numbers:
            yield [np.asarray(n, dtype=dtype)]


class _Generated(Dataset):
    def __init__(self, generator: Callable[..., Any], output_types: Any, output_shapes: Any,
                 args: tuple):
        if not callable(generator):
            raise OpsdkError("Dataset.from_generator: generator must be a callable returning an "
                             f"iterable, not {type(generator).__name__}")
        types, tree = _flatten(output_types)
        if output_shapes is None:
            shapes = [None] * len(types)
        else:
            shapes, shape_tree = _flatten(_shape_leaves(output_shapes))
            if len(shapes) != len(types):
                raise OpsdkError(f"Dataset.from_generator: output_shapes has {len(shapes)} "
                                 f"components, output_types {len(types)}")
        self._generator, self._args = generator, args
        super().__init__(tree, [_Spec(as_dtype(t).name, None if s is None else tuple(s))
                                for t, s in zip(types, shapes)])

    def _elements(self, run: _Run) -> PyIterator[list]:
        for item in self._generator(*self._args):
            values, _ = _flatten(item)
            if len(values) != len(self._specs):
                raise errors.InvalidArgumentError(
                    None, None, f"Dataset.from_generator: the generator yielded {len(values)} "
                    f"components; output_types declares {len(self._specs)}")
            yield [_checked("Dataset.from_generator", k, _typed(v, s), s)
                   for k, (v, s) in enumerate(zip(values, self._specs))]


def _shape_leaves(shapes: Any) -> Any:
    """Shapes in a structure, each made a list (one leaf of `_flatten`; None: unknown rank): a
    TensorShape, or a list or tuple of ints and None."""
    if isinstance(shapes, TensorShape):
        return None if shapes.dims is None else shapes.as_list()
    if isinstance(shapes, dict):
        return {k: _shape_leaves(v) for k, v in shapes.items()}
    if isinstance(shapes, (list, tuple)) and all(
            d is None or isinstance(d, (int, np.integer)) for d in shapes):
        return [None if d is None else int(d) for d in shapes]
    if isinstance(shapes, tuple):
        return tuple(_shape_leaves(s) for s in shapes)
    return shapes


def _checked(who: str, k: int, value: np.ndarray, spec: _Spec) -> np.ndarray:
    if not spec.agrees(value):
        raise errors.InvalidArgumentError(
            None, None, f"{who}: component {k} has shape {list(value.shape)}, but the dataset "
            f"declares {list(spec.shape or [])}")
    return value


class _Zip(Dataset):
    def __init__(self, datasets: Any):
        parts, tree = _flatten(datasets)
        if not parts or not all(isinstance(d, Dataset) for d in parts):
            raise OpsdkError("Dataset.zip: give a tuple (or dict) of Datasets")
        whole = _pack(tree, [_pack(d._tree, list(range(len(d._specs)))) for d in parts])
        _, own_tree = _flatten(whole)
        super().__init__(own_tree, [s for d in parts for s in d._specs], parents=parts)

    def _elements(self, run: _Run) -> PyIterator[list]:
        for items in zip(*(d._elements(run) for d in self._parents)):
            yield [v for item in items for v in item]


class _Traced:
    """A function of an element traced into a graph of its own, run per element."""

    def __init__(self, who: str, fn: Callable[..., Any], parent: Dataset,
                 makes_dataset: bool = False):
        if not callable(fn):
            raise OpsdkError(f"{who}: the function must be callable, not {type(fn).__name__}")
        self.graph = opsdk.Graph()
        self.dataset: Optional[Dataset] = None
        self.specs = list(parent._specs)
        with self.graph.as_default():
            self.inputs = []
            for k, spec in enumerate(self.specs):
                shape = _graph_shape(spec)
                t = opsdk.placeholder(_graph_dtype(spec), None if shape is None else list(shape),
                                      name=f"component_{k}")
                if spec.dtype == _STRING:
                    _session.register_decoder(t, strings._decode_scalar if spec.shape == ()
                                              else strings._decode_list)
                self.inputs.append(t)
            element = _pack(parent._tree, self.inputs)
            result = fn(*element) if type(element) is tuple else fn(element)
            if makes_dataset:  # its outputs: the values the dataset is made from
                if not isinstance(result, Dataset):
                    raise OpsdkError(f"{who}: the function must return a Dataset, not "
                                     f"{type(result).__name__}")
                self.dataset, self.tree, self.outputs = result, None, list(result._sources)
            else:
                if type(result) is list:  # as TF's map: a returned list is a tuple
                    result = tuple(result)
                leaves, self.tree = _flatten(result)
                try:
                    self.outputs = [convert_to_tensor(v) for v in leaves]
                except OpsdkError as exc:
                    raise OpsdkError(f"{who}: the function returned {exc}") from None
        foreign = [t.name for t in self.outputs if t.graph is not self.graph]
        if foreign:
            raise OpsdkError(f"{who}: the function returns tensors of another graph "
                             f"({', '.join(foreign)}); a dataset function builds its own")
        self.session: Optional[Any] = None
        self.lock = threading.Lock()

    def __call__(self, values: list) -> list:
        with self.lock:
            if self.session is None:
                self.session = opsdk.Session(self.graph)
        feeds = {t: _graph_value(v, s) for t, v, s in zip(self.inputs, values, self.specs)}
        results = self.session.run(self.outputs, feeds)
        return [_element_value(t, r) for t, r in zip(self.outputs, results)]


class _FlatMap(Dataset):
    """flat_map and interleave: per input element, the elements of the dataset `fn` makes from
    it; interleave takes `block` of them at a time from `cycle` such datasets in turn."""

    def __init__(self, who: str, parent: Dataset, fn: Callable[..., Any], cycle: int = 1,
                 block: int = 1):
        self._fn = _Traced(who, fn, parent, makes_dataset=True)
        self._cycle, self._block = cycle, block
        inner = self._fn.dataset
        super().__init__(inner._tree, inner._specs, [parent])

    def _inner(self, item: list) -> PyIterator[list]:
        values = self._fn(item)
        return self._fn.dataset._elements(_Run(  # type: ignore[union-attr]
            {id(t): v for t, v in zip(self._fn.outputs, values)}))

    def _elements(self, run: _Run) -> PyIterator[list]:
        # TensorFlow's order: a slot of the cycle that is empty takes the next input element's
        # dataset; a slot gives `block` elements, then the next slot has its turn; a slot whose
        # dataset ends is emptied and the turn passes on.
        items = self._parents[0]._elements(run)
        slots: list = [None] * self._cycle
        index = given = open_count = 0
        ended = False
        while not ended or open_count:
            source = slots[index]
            if source is not None:
                got = next(source, None)
                if got is not None:
                    given += 1
                    if given == self._block:
                        index, given = (index + 1) % self._cycle, 0
                    yield got
                    continue
                slots[index], open_count = None, open_count - 1
                index, given = (index + 1) % self._cycle, 0
            elif not ended:
                item = next(items, None)
                if item is None:
                    ended = True
                else:
                    slots[index], open_count = self._inner(item), open_count + 1
            else:
                index, given = (index + 1) % self._cycle, 0


class _Map(Dataset):
    def __init__(self, parent: Dataset, fn: Callable[..., Any]):
        self._fn = _Traced("Dataset.map", fn, parent)
        super().__init__(self._fn.tree, [_spec_of(t) for t in self._fn.outputs], [parent])

    def _elements(self, run: _Run) -> PyIterator[list]:
        for item in self._parents[0]._elements(run):
            yield self._fn(item)


class _Filter(Dataset):
    def __init__(self, parent: Dataset, predicate: Callable[..., Any]):
        self._fn = _Traced("Dataset.filter", predicate, parent)
        out = self._fn.outputs
        if len(out) != 1 or out[0].dtype != "bool" or out[0].shape not in (None, ()):
            raise OpsdkError("Dataset.filter: the predicate must return one scalar bool tensor, "
                             f"not {', '.join(f'{t.dtype}{list(t.shape or [])}' for t in out)}")
        super().__init__(parent._tree, parent._specs, [parent])

    def _elements(self, run: _Run) -> PyIterator[list]:
        for item in self._parents[0]._elements(run):
            if bool(self._fn(item)[0]):
                yield item


class _Batch(Dataset):
    def __init__(self, parent: Dataset, size: int, drop: bool, pad: Optional[tuple] = None):
        self._size, self._drop = size, drop
        first = size if drop else None
        self._pad = None
        specs = parent._specs
        if pad is not None:
            shapes, values = pad
            n = len(specs)
            given = ([None] * n if shapes is None else _flatten(_shape_leaves(shapes))[0])
            fills = [0] * n if values is None else _flatten(values)[0]
            if len(given) != n or len(fills) != n:
                raise OpsdkError(f"Dataset.padded_batch: padded_shapes and padding_values need "
                                 f"one entry per component ({n})")
            for k, (g, s) in enumerate(zip(given, specs)):
                if g is not None and s.shape is not None and len(g) != len(s.shape):
                    raise OpsdkError(f"Dataset.padded_batch: padded shape {g} of component {k} "
                                     f"has another rank than its elements ({list(s.shape)})")
            self._pad = ([None if g is None else [None if d in (None, -1) else d for d in g]
                          for g in given], fills)
            specs = [_Spec(s.dtype, tuple(g) if g is not None else
                           (None if s.shape is None else (None,) * len(s.shape)))
                     for s, g in zip(specs, self._pad[0])]
        super().__init__(parent._tree, [_Spec(s.dtype, None if s.shape is None
                                              else (first, *s.shape)) for s in specs], [parent])

    def _elements(self, run: _Run) -> PyIterator[list]:
        items = self._parents[0]._elements(run)
        while True:
            chunk = list(itertools.islice(items, self._size))
            if not chunk or (self._drop and len(chunk) < self._size):
                return
            yield [self._stack(k, [item[k] for item in chunk]) for k in range(len(self._specs))]

    def _stack(self, k: int, values: list) -> np.ndarray:
        if self._pad is not None:
            values = self._padded(k, values)
        shape = values[0].shape
        for j, v in enumerate(values):
            if v.shape != shape:
                raise errors.InvalidArgumentError(
                    None, None, f"Dataset.batch: cannot batch component {k}: element 0 has "
                    f"shape {list(shape)} and element {j} has shape {list(v.shape)} "
                    "(padded_batch pads them)")
        return np.stack(values)

    def _padded(self, k: int, values: list) -> list:
        shapes, fills = self._pad  # type: ignore[misc]
        rank = values[0].ndim
        want = shapes[k] or [None] * rank
        size = [w if w is not None else max(v.shape[d] for v in values)
                for d, w in enumerate(want)]
        out = []
        for v in values:
            if v.ndim != rank or any(n > s for n, s in zip(v.shape, size)):
                raise errors.InvalidArgumentError(
                    None, None, f"Dataset.padded_batch: component {k} has shape "
                    f"{list(v.shape)}, larger than its padded shape {size}")
            fill = (b"" if fills[k] in (0, None, "") else _texts(fills[k]).item()) \
                if v.dtype == object else np.asarray(fills[k]).astype(v.dtype)
            out.append(np.pad(v, [(0, s - n) for n, s in zip(v.shape, size)],
                              constant_values=fill))
        return out


class _Unbatch(Dataset):
    def __init__(self, parent: Dataset):
        for k, s in enumerate(parent._specs):
            if s.shape is not None and not s.shape:
                raise OpsdkError(f"Dataset.unbatch: component {k} is a scalar; there are no "
                                 "rows to split")
        super().__init__(parent._tree, [_Spec(s.dtype, None if s.shape is None else s.shape[1:])
                                        for s in parent._specs], [parent])

    def _elements(self, run: _Run) -> PyIterator[list]:
        for item in self._parents[0]._elements(run):
            for i in range(len(item[0])):
                yield [v[i] for v in item]


class _Shuffle(Dataset):
    def __init__(self, parent: Dataset, size: int, seed: Optional[int], reshuffle: bool):
        # the seed by TF's rules: the op's, else one drawn from the graph-level seed
        self._size, self._seed, self._reshuffle = size, op_seed(seed) or None, reshuffle
        super().__init__(parent._tree, parent._specs, [parent])

    def _elements(self, run: _Run) -> PyIterator[list]:
        # one generator per start, which `repeat` goes on drawing from (a new order each
        # epoch), unless told not to reshuffle: then each epoch starts from the same seed
        seed, rng = run.state.get(id(self), (self._seed, None))
        if seed is None:
            seed = int(np.random.SeedSequence().entropy % 2 ** 63)
        if rng is None or not self._reshuffle:
            rng = np.random.default_rng(seed)
        run.state[id(self)] = (seed, rng)
        buffer: list = []
        for item in self._parents[0]._elements(run):
            if len(buffer) < self._size:
                buffer.append(item)
                continue
            k = int(rng.integers(len(buffer)))
            yield buffer[k]
            buffer[k] = item
        while buffer:
            yield buffer.pop(int(rng.integers(len(buffer))))


class _Repeat(Dataset):
    def __init__(self, parent: Dataset, count: Any):
        self._count = count
        super().__init__(parent._tree, parent._specs, [parent],
                         sources=[count] if isinstance(count, opsdk.Tensor) else [])

    def _elements(self, run: _Run) -> PyIterator[list]:
        count = _counted(run, self._count)
        epochs = itertools.count() if count < 0 else range(count)
        for _ in epochs:
            made = False
            for item in self._parents[0]._elements(run):
                made = True
                yield item
            if not made:  # an empty dataset repeated is empty, not an endless loop
                return


class _Cut(Dataset):
    def __init__(self, parent: Dataset, how: str, count: Any):
        self._how, self._count = how, count
        super().__init__(parent._tree, parent._specs, [parent],
                         sources=[count] if isinstance(count, opsdk.Tensor) else [])

    def _elements(self, run: _Run) -> PyIterator[list]:
        items = self._parents[0]._elements(run)
        if self._how == "take":
            count = _counted(run, self._count)
            return items if count < 0 else itertools.islice(items, count)
        if self._how == "skip":
            count = _counted(run, self._count)
            return iter(()) if count < 0 else itertools.islice(items, count, None)
        shards, index = self._count
        return itertools.islice(items, index, None, shards)


class _Concatenate(Dataset):
    def __init__(self, first: Dataset, second: Dataset):
        if not isinstance(second, Dataset):
            raise OpsdkError(f"Dataset.concatenate: give a Dataset, not {type(second).__name__}")
        if first._tree != second._tree or [s.dtype for s in first._specs] != [
                s.dtype for s in second._specs]:
            raise OpsdkError(f"Dataset.concatenate: the datasets' elements differ ({first!r} "
                             f"and {second!r})")
        super().__init__(first._tree, [a.joined(b) for a, b in zip(first._specs, second._specs)],
                         [first, second])

    def _elements(self, run: _Run) -> PyIterator[list]:
        return itertools.chain(self._parents[0]._elements(run), self._parents[1]._elements(run))


class _Cache(Dataset):
    def __init__(self, parent: Dataset):
        super().__init__(parent._tree, parent._specs, [parent])

    def _elements(self, run: _Run) -> PyIterator[list]:
        kept = run.state.get(id(self))
        if kept is not None:
            yield from kept
            return
        made = []
        for item in self._parents[0]._elements(run):
            made.append(item)
            yield item
        run.state[id(self)] = made  # only a pass that ran to the end is replayed


# -- iterators ------------------------------------------------------------------------------------

# The iterators that have given out a string handle, by handle (while their graph lives).
_handles: "weakref.WeakValueDictionary[bytes, Iterator]" = weakref.WeakValueDictionary()
_handle_numbers = itertools.count(1)


class Iterator:
    """`tf.data.Iterator`: `get_next()` makes the node that reads the next element; a run of
    `initializer` (or of `make_initializer(dataset)`) starts a dataset's elements anew."""

    def __init__(self, tree: Any, specs: Sequence[_Spec], dataset: Optional[Dataset] = None,
                 one_shot: bool = False):
        self._tree, self._specs = tree, list(specs)
        self._dataset, self._one_shot = dataset, one_shot
        self._current: Optional[PyIterator[list]] = None
        self._lock = threading.Lock()
        self._initializer: Optional[Any] = None
        self._graph = opsdk.get_default_graph()
        self._handle: Optional[Any] = None  # the string_handle() node's output (made once)

    @staticmethod
    def from_structure(output_types: Any, output_shapes: Any = None,
                       shared_name: Optional[str] = None, output_classes: Any = None) -> "Iterator":
        """An iterator of the given element structure, started on any dataset of that structure
        by running `make_initializer(dataset)`."""
        types, tree = _flatten(output_types)
        shapes = ([None] * len(types) if output_shapes is None
                  else _flatten(_shape_leaves(output_shapes))[0])
        if len(shapes) != len(types):
            raise OpsdkError(f"Iterator.from_structure: output_shapes has {len(shapes)} "
                             f"components, output_types {len(types)}")
        return Iterator(tree, [_Spec(as_dtype(t).name, None if s is None else tuple(s))
                               for t, s in zip(types, shapes)])

    @staticmethod
    def from_string_handle(string_handle: Any, output_types: Any, output_shapes: Any = None,
                           output_classes: Any = None) -> "Iterator":
        """An iterator of the given element structure whose `get_next()` reads the iterator
        whose handle (its `string_handle()`'s value) is fed to `string_handle`."""
        shaped = Iterator.from_structure(output_types, output_shapes)
        if not isinstance(string_handle, opsdk.Tensor) or string_handle.dtype != "uint8":
            raise OpsdkError("Iterator.from_string_handle: give the string tensor the handle is "
                             "fed to (tf.placeholder(tf.string, shape=[])), not "
                             f"{type(string_handle).__name__}")
        return _Feedable(shaped._tree, shaped._specs, string_handle)

    def string_handle(self, name: Optional[str] = None) -> Any:
        """A string tensor whose value names this iterator, for feeding to the handle of an
        iterator made by `from_string_handle`. Running it starts a one-shot iterator."""
        if self._handle is not None:
            return self._handle
        handle = f"opsdk-iterator-{os.getpid()}-{next(_handle_numbers)}".encode()
        _handles[handle] = self
        sources = list(self._dataset._sources) if self._one_shot and self._dataset else []
        array = np.frombuffer(handle, dtype=np.uint8).copy()

        def give(*values: np.ndarray) -> np.ndarray:
            if self._one_shot:
                with self._lock:
                    self._start_one_shot(values)
            return array
        with self._graph.as_default():
            op = py_func_node(give, sources, ["uint8"], name=name or "IteratorToStringHandle")
        op.outputs[0].shape = array.shape
        _session.register_decoder(op.outputs[0], _handle_bytes)
        self._handle = op.outputs[0]
        return self._handle

    output_types = Dataset.output_types
    output_shapes = Dataset.output_shapes
    output_classes = Dataset.output_classes

    @property
    def initializer(self) -> Any:
        """The node that starts the iterator's dataset (made once)."""
        if self._dataset is None:
            raise OpsdkError("Iterator.initializer: this iterator was made from a structure; run "
                             "make_initializer(dataset) instead")
        if self._one_shot:
            raise OpsdkError("Iterator.initializer: a one-shot iterator starts itself; use "
                             "make_initializable_iterator() for one you can restart")
        if self._initializer is None:
            self._initializer = self.make_initializer(self._dataset)
        return self._initializer

    def make_initializer(self, dataset: Dataset, name: Optional[str] = None) -> Any:
        """A node whose run starts `dataset`'s elements (its structure and dtypes must be this
        iterator's; its shapes compatible)."""
        if not isinstance(dataset, Dataset):
            raise OpsdkError(f"Iterator.make_initializer: give a Dataset, not "
                             f"{type(dataset).__name__}")
        self._check_compatible(dataset)
        sources = list(dataset._sources)

        def start(*values: np.ndarray) -> None:
            with self._lock:
                self._current = dataset._elements(_Run(
                    {id(t): v for t, v in zip(sources, values)}))
        with self._graph.as_default():
            return py_func_node(start, sources, [], name=name or "MakeIterator")

    def _mismatch(self, tree: Any, specs: Sequence[_Spec]) -> Optional[int]:
        """Where elements of `tree` and `specs` cannot be this iterator's: -1 for another
        structure or dtypes, k for component k's shape; None where they can."""
        if tree != self._tree or [s.dtype for s in specs] != [s.dtype for s in self._specs]:
            return -1
        return next((k for k, (a, b) in enumerate(zip(specs, self._specs))
                     if not compatible(a.shape, b.shape)), None)

    def _check_compatible(self, dataset: Dataset) -> None:
        k = self._mismatch(dataset._tree, dataset._specs)
        if k == -1:
            raise OpsdkError(f"Iterator.make_initializer: the dataset's elements ({dataset!r}) "
                             f"differ from the iterator's ({_describe(self._tree)}: "
                             f"{', '.join(s.dtype for s in self._specs)})")
        if k is not None:
            a, b = dataset._specs[k], self._specs[k]
            raise OpsdkError(f"Iterator.make_initializer: component {k} of the dataset has "
                             f"shape {list(a.shape)}, the iterator's {list(b.shape)}")

    def _start_one_shot(self, values: Sequence[np.ndarray]) -> None:
        """Start a one-shot iterator on its first use (the values of its dataset's graph
        tensors); under the lock."""
        if self._current is None:
            sources = self._dataset._sources  # type: ignore[union-attr]
            self._current = self._dataset._elements(_Run(  # type: ignore[union-attr]
                {id(t): v for t, v in zip(sources, values)}))

    def _next(self, *values: np.ndarray) -> list:
        """The next element's components, checked against this iterator's specs."""
        with self._lock:
            if self._current is None:
                if not self._one_shot:
                    raise errors.FailedPreconditionError(
                        None, None, "GetNext() failed because the iterator has not been "
                        "initialized: run its initializer (sess.run(iterator.initializer)) "
                        "first")
                self._start_one_shot(values)
            try:
                item = next(self._current)  # type: ignore[arg-type]
            except StopIteration:
                raise StopIteration("End of sequence") from None
        return [_checked("IteratorGetNext", k, _typed(v, s), s)
                for k, (v, s) in enumerate(zip(item, self._specs))]

    def get_next(self, name: Optional[str] = None) -> Any:
        """The next element: a node per call, so two calls read two elements in one step."""
        sources = list(self._dataset._sources) if self._one_shot and self._dataset else []
        return self._next_node(self._next, sources, name)

    def _next_node(self, pull: Callable[..., list], inputs: list, name: Optional[str]) -> Any:
        """A get_next node: `pull(*input values)` gives the element's components."""
        specs = self._specs

        def pulled(*values: Any) -> list:
            return [_graph_value(v, s) for v, s in zip(pull(*values), specs)]
        with self._graph.as_default():
            op = py_func_node(pulled, inputs, [_graph_dtype(s) for s in specs],
                              name=name or "IteratorGetNext")
        for t, s in zip(op.outputs, specs):
            t.shape = _graph_shape(s)
            if s.dtype == _STRING:
                _session.register_decoder(t, strings._decode_scalar if s.shape == ()
                                          else strings._decode_list)
        outputs = list(op.outputs)
        return _pack(self._tree, outputs) if self._tree != _LEAF else outputs[0]

    def __repr__(self) -> str:
        return f"<Iterator of {_describe(self._tree)}: {', '.join(s.dtype for s in self._specs)}>"


def _element_value(tensor: Any, value: np.ndarray) -> np.ndarray:
    """A value a traced function computed, as an element holds it (strings: bytes objects)."""
    if not strings.is_string(tensor):
        return value
    if strings.is_scalar_string(tensor):
        out = np.empty((), dtype=object)
        out[()] = strings._decode_scalar(value)
        return out
    return strings._decode_list(value)


def _graph_dtype(spec: _Spec) -> str:
    return "uint8" if spec.dtype == _STRING else spec.dtype


def _graph_shape(spec: _Spec) -> Optional[tuple]:
    """A component's shape in the graph: strings have their bytes along a last axis."""
    if spec.dtype != _STRING or spec.shape is None:
        return spec.shape
    return (*spec.shape, None)


def _graph_value(value: np.ndarray, spec: _Spec) -> np.ndarray:
    """A component's value as the graph holds it (strings: their bytes)."""
    return strings.byte_rows_of(value) if spec.dtype == _STRING else value


def _handle_bytes(array: np.ndarray) -> bytes:
    return np.asarray(array, dtype=np.uint8).tobytes()


class _Feedable(Iterator):
    """`Iterator.from_string_handle`'s iterator: each get_next reads the iterator whose handle
    the run feeds, which must give elements of this structure and dtypes, and compatible
    shapes."""

    def __init__(self, tree: Any, specs: Sequence[_Spec], handle: Any):
        super().__init__(tree, specs)
        self._graph = handle.graph
        self._handle_input = handle

    def _target(self, handle: np.ndarray) -> Iterator:
        key = _handle_bytes(handle)
        target = _handles.get(key)
        if target is None:
            raise errors.InvalidArgumentError(
                None, None, f"IteratorGetNext: the handle fed, {key!r}, names no iterator of this "
                "process: feed the value of an iterator's string_handle()")
        if self._mismatch(target._tree, target._specs) is not None:
            raise errors.InvalidArgumentError(
                None, None, f"IteratorGetNext: the iterator of the handle fed gives {target!r} "
                f"elements, this one reads {self!r} elements")
        return target

    def get_next(self, name: Optional[str] = None) -> Any:
        def pull(handle: np.ndarray) -> list:
            values = self._target(handle)._next()
            return [_checked("IteratorGetNext", k, v, s)
                    for k, (v, s) in enumerate(zip(values, self._specs))]
        return self._next_node(pull, [self._handle_input], name)

    def make_initializer(self, dataset: Dataset, name: Optional[str] = None) -> Any:
        raise OpsdkError("Iterator.make_initializer: an iterator made by from_string_handle "
                         "reads the iterator whose handle is fed; initialize that one")

    def string_handle(self, name: Optional[str] = None) -> Any:
        raise OpsdkError("Iterator.string_handle: an iterator made by from_string_handle has no "
                         "handle of its own; feed it another iterator's")


def make_one_shot_iterator(dataset: Dataset) -> Iterator:
    """`tf.data.make_one_shot_iterator(dataset)` (TF 1.15's name)."""
    return dataset.make_one_shot_iterator()


def make_initializable_iterator(dataset: Dataset, shared_name: Optional[str] = None) -> Iterator:
    """`tf.data.make_initializable_iterator(dataset)` (TF 1.15's name)."""
    return dataset.make_initializable_iterator(shared_name)


def get_output_types(dataset_or_iterator: Any) -> Any:
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator: Any) -> Any:
    return dataset_or_iterator.output_shapes


def get_output_classes(dataset_or_iterator: Any) -> Any:
    return dataset_or_iterator.output_classes


class _Files(Dataset):
    """The records of files, in order, one scalar string element each."""

    def __init__(self, who: str, filenames: Any, read: Callable[[str], list]):
        names = filenames
        self._source: Any = None
        if isinstance(names, opsdk.Tensor):
            if not strings.is_string(names):
                raise OpsdkError(f"{who}: file names must be strings, got '{names.name}' of "
                                 f"{names.dtype}")
            if names.op.type == "const":
                names = _string_value(names)
            else:  # read when the iterator starts (tf.train.match_filenames_once, ...)
                self._source, names = names, []
        texts = _texts([names] if isinstance(names, (str, bytes)) else
                       list(np.asarray(names, dtype=object).reshape(-1)))
        self._names = [os.fsdecode(n) for n in texts]
        self._read = read
        super().__init__(_LEAF, [_Spec(_STRING, ())],
                         sources=[] if self._source is None else [self._source])

    def _elements(self, run: _Run) -> PyIterator[list]:
        names = self._names
        if self._source is not None:
            value = run.value(self._source)
            texts = [strings._decode_scalar(value)] if strings.is_scalar_string(self._source) \
                else list(strings._decode_list(value).reshape(-1))
            names = [os.fsdecode(n) for n in texts]
        for name in names:
            for record in self._read(name):
                item = np.empty((), dtype=object)
                item[()] = record
                yield [item]


def _open(who: str, name: str, compression: Any) -> bytes:
    from opsdk.v1.readers import file_bytes
    from opsdk.v1.records import decompressed

    return decompressed(file_bytes(who, name), compression)


def TextLineDataset(filenames: Any, compression_type: Any = None,  # noqa: N802 - TF's name
                    buffer_size: Any = None, num_parallel_reads: Any = None) -> Dataset:
    """`tf.data.TextLineDataset`: each line of the files (without its `\n` or `\r\n`)."""
    def lines(name: str) -> list:
        data = _open("TextLineDataset", name, compression_type)
        rows = data.split(b"\n")
        if rows and rows[-1] == b"":
            rows.pop()
        return [r[:-1] if r.endswith(b"\r") else r for r in rows]
    return _Files("TextLineDataset", filenames, lines)


def TFRecordDataset(filenames: Any, compression_type: Any = None,  # noqa: N802 - TF's name
                    buffer_size: Any = None, num_parallel_reads: Any = None) -> Dataset:
    """`tf.data.TFRecordDataset`: each record of the TFRecord files (checksums checked)."""
    from opsdk.v1.records import _records_of

    return _Files("TFRecordDataset", filenames, lambda name: _records_of(
        name, _open("TFRecordDataset", name, compression_type), 0))


def FixedLengthRecordDataset(filenames: Any, record_bytes: int,  # noqa: N802 - TF's name
                             header_bytes: Optional[int] = None,
                             footer_bytes: Optional[int] = None, buffer_size: Any = None,
                             compression_type: Any = None,
                             num_parallel_reads: Any = None) -> Dataset:
    """`tf.data.FixedLengthRecordDataset`: the records of record_bytes bytes between each file's
    header and footer (a file's last, shorter piece is dropped, as TF's)."""
    from opsdk.v1.readers import FixedLengthRecordReader

    cut = FixedLengthRecordReader.split_records(record_bytes, header_bytes, footer_bytes, None)
    return _Files("FixedLengthRecordDataset", filenames, lambda name: cut(_open(
        "FixedLengthRecordDataset", name, compression_type)))


AUTOTUNE = -1  # a `num_parallel_calls` or `prefetch` size: accepted, changes nothing here
INFINITE_CARDINALITY, UNKNOWN_CARDINALITY = -1, -2


class experimental:  # noqa: N801 - TF's module name
    """`tf.data.experimental`: AUTOTUNE."""
    AUTOTUNE = AUTOTUNE


class Options:
    """`tf.data.Options`: any option may be set; `with_options` accepts them and they change
    nothing (no prefetch threads, no graph rewrites of the pipeline here)."""


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"opsdk.v1 does not provide tf.data.{name} (file datasets, feedable "
                         "iterators and the rest are listed in docs/tf1.md)")
