"""TF1's sessions: a default-session stack (`with tf.Session():`, `InteractiveSession`) so that
`Tensor.eval()`, `Operation.run()` and `Variable.eval()` work, `config=tf.ConfigProto(...)`
accepted, and fetched summaries and strings turned back into bytes.

The methods `eval` and `run` are attached to opsdk's Tensor and Operation by `attach()` (called
when `opsdk.v1` is imported): the runtime's IR knows nothing of TF's default session.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any, Callable, Mapping, Optional

import numpy as np

import opsdk
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import errors, graph_state, run_options

# Tensors whose fetched array stands for something else (a serialized Summary, a string
# constant) have a decoder in their graph's "decoders" table, by tensor name; `Session.run`
# decodes them. True once any graph has one (the common run skips the walk).
_decoding = False
# Placeholders fed something other than their array (a string placeholder fed bytes) have an
# encoder in their graph's "encoders" table, by tensor name. True once any graph has one.
_encoding = False
# True once a SparseTensor was made (opsdk/v1/sparse.py): fetches and feeds may then hold them.
_sparse = False


class ConfigProto:
    """TF's session options, kept for programs that read them back. Two act:
    `inter_op_parallelism_threads` (threads running independent nodes; 0 lets opsdk choose) and
    `allow_soft_placement` when given; the others (log_device_placement, gpu_options, ...)
    change nothing."""

    def __init__(self, **fields: Any):
        self.__dict__.update(fields)
        self.gpu_options = fields.get("gpu_options", GPUOptions())


class GPUOptions:
    """TF's GPU options (`allow_growth`, ...): accepted, not used."""

    def __init__(self, **fields: Any):
        self.allow_growth = False
        self.__dict__.update(fields)


class _Stack(threading.local):
    def __init__(self) -> None:
        self.sessions: list["Session"] = []


_stack = _Stack()


def get_default_session() -> Optional["Session"]:
    """The innermost `with session:` (or live InteractiveSession) of this thread, else None."""
    return _stack.sessions[-1] if _stack.sessions else None


class Session(opsdk.Session):
    """`tf.Session(target='', graph=None, config=None)`; entering it makes it the default.
    With a `tf.train.Server`'s target, the session runs on that server's cluster (a
    ClusterSession whose own task is the server's; docs/distributed.md, TF1 programs)."""

    def __new__(cls, target: Any = "", graph: Any = None, config: Any = None) -> Any:
        from opsdk.v1.distributed import Target, _ClusterSession

        if isinstance(target, Target):
            if cls is not Session:
                raise OpsdkError(f"{cls.__name__}: a cluster's target is taken by tf.Session "
                                 "(and tf.train.MonitoredTrainingSession) only")
            return _ClusterSession.for_target(target, graph)
        return super().__new__(cls)

    def __init__(self, target: str = "", graph: Any = None, config: Any = None):
        if target not in ("", None):
            raise OpsdkError(f"Session: target {target!r}: give '' (this process) or a "
                             "tf.train.Server's target, whose cluster the tasks of Ray run "
                             "(docs/distributed.md, TF1 programs)")
        super().__init__(graph, _session_config(config))
        self.tf_config = config

    def run(self, fetches: Any, feed_dict: Optional[Mapping[Any, Any]] = None,
            options: Any = None, run_metadata: Any = None) -> Any:
        """`opsdk.Session.run`, summaries decoded and errors raised as their tf.errors classes
        (opsdk/v1/errors.py). `options` (a tf.RunOptions) may set a timeout and a trace level;
        a traced run fills `run_metadata`'s step stats (opsdk/v1/run_options.py)."""
        fetches = sparse_fetches(fetches)
        try:
            if options is None:
                result = super().run(fetches, _feeds(feed_dict))
            else:
                timeout, trace = run_options.read_options(options, "Session.run")
                run_options.check_metadata(run_metadata, "Session.run")
                if trace and run_metadata is not None:
                    result, profile = self.traced_run(fetches, _feeds(feed_dict), timeout)
                    run_options.record(run_metadata, profile, self.graph)
                else:
                    result = super().run(fetches, _feeds(feed_dict), timeout=timeout)
        except OpsdkError as exc:
            raise errors.as_tf_error(exc) from None
        return fetched(fetches, result)

    @property
    def graph_def(self) -> Any:
        """The session graph's GraphDef (`sess.graph.as_graph_def()`)."""
        from opsdk.v1.graph_def import GraphDef

        return GraphDef.of(self.graph)

    def profile(self, fetches: Any, feed_dict: Optional[Mapping[Any, Any]] = None,
                steps: int = 10, warmup: int = 10, show: bool = True) -> Any:
        """`opsdk.Session.profile` (where a step's time goes, node by node), with the feeds
        `run` takes."""
        return super().profile(fetches, _feeds(feed_dict), steps=steps, warmup=warmup, show=show)

    def as_default(self) -> "_DefaultContext":
        """Make this the default session inside a `with` block (does not close it after)."""
        return _DefaultContext(self)

    def __enter__(self) -> "Session":
        _stack.sessions.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if _stack.sessions and _stack.sessions[-1] is self:
            _stack.sessions.pop()
        self.close()


def _session_config(config: Any) -> Optional[opsdk.SessionConfig]:
    """opsdk's settings for the ConfigProto fields it honours."""
    if config is None:
        return None
    fields: dict[str, Any] = {}
    threads = int(getattr(config, "inter_op_parallelism_threads", 0) or 0)
    if threads < 0:
        raise OpsdkError(f"ConfigProto: inter_op_parallelism_threads must be >= 0, got {threads}")
    if threads:
        fields["inter_op_threads"] = threads
    if "allow_soft_placement" in vars(config):
        fields["allow_soft_placement"] = bool(config.allow_soft_placement)
    return opsdk.SessionConfig(**fields)


class InteractiveSession(Session):
    """A Session that makes itself the default when made (until closed), for shells and
    notebooks: `sess = tf.InteractiveSession(); x.eval()`."""

    def __init__(self, target: str = "", graph: Any = None, config: Any = None):
        super().__init__(target, graph, config)
        _stack.sessions.append(self)

    def close(self) -> None:
        if self in _stack.sessions:
            _stack.sessions.remove(self)
        super().close()


class _DefaultContext:
    def __init__(self, session: Session):
        self.session = session

    def __enter__(self) -> Session:
        _stack.sessions.append(self.session)
        return self.session

    def __exit__(self, *exc: Any) -> None:
        _stack.sessions.remove(self.session)


def _feeds(feed_dict: Optional[Mapping[Any, Any]]) -> Optional[Mapping[Any, Any]]:
    """TF1's feeds as opsdk's: Variables as keys (TF feeds their value tensor), a tuple of
    tensors (an `LSTMStateTuple`, a MultiRNNCell's state) fed a like tuple of values, and
    numbers converted to an integer or bool placeholder's dtype as TF's session does, when no
    value changes (`_exact_feed`)."""
    if not feed_dict:
        return feed_dict
    feeds: dict[Any, Any] = {}
    for key, value in feed_dict.items():
        _flatten_feed(key, value, feeds)
    return feeds


def _flatten_feed(key: Any, value: Any, feeds: dict[Any, Any]) -> None:
    if isinstance(key, (tuple, list)):
        if not isinstance(value, (tuple, list)) or len(value) != len(key):
            raise OpsdkError(f"Session.run: the feed for a {type(key).__name__} of {len(key)} "
                             "tensors must be a tuple or list of as many values, got "
                             f"{type(value).__name__}")
        for sub_key, sub_value in zip(key, value):
            _flatten_feed(sub_key, sub_value, feeds)
        return
    if _sparse and hasattr(key, "_components"):  # a SparseTensor: its three tensors
        for sub_key, sub_value in zip(key._components(), key._feed_values(value)):
            _flatten_feed(sub_key, sub_value, feeds)
        return
    key = key._as_graph_element() if hasattr(key, "_as_graph_element") else key
    if _encoding and isinstance(key, opsdk.Tensor):
        encode = graph_state.table(key.graph, "encoders").get(key.name)
        if encode is not None:
            feeds[key] = encode(value)
            return
    if isinstance(key, opsdk.Tensor) and key.dtype in _EXACT_TARGETS:
        value = _exact_feed(key, value)
    feeds[key] = value


# Integer and bool placeholders: TF's session converts a fed value with
# `np.asarray(value, dtype=placeholder's dtype)` (float labels 0.0/1.0 into int32), which opsdk's
# runtime refuses across kinds. opsdk.v1 converts as TF does, but only values that stay equal.
_EXACT_TARGETS = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                            "uint64", "bool"})


def _exact_feed(tensor: Any, value: Any) -> Any:
    """`value` as `tensor`'s integer or bool dtype when it is a float (or, into bool, an int)
    array of whole numbers the dtype holds; any other value is left to the runtime's checks.
    A value the conversion would change (3.7 or 2**40 into int32, 2 into bool) is refused,
    naming the placeholder, where TF would truncate or wrap it."""
    array = value if isinstance(value, np.ndarray) else None
    if array is None:
        try:
            array = np.asarray(value)
        except (ValueError, TypeError):
            return value  # a ragged list: the runtime says what is wrong
    target = np.dtype(tensor.dtype)
    cross = array.dtype.kind == "f" or (target.kind == "b" and array.dtype.kind in "iu")
    if not cross:
        return value
    if target.kind == "b":
        lo, hi = 0, 2
    else:
        info = np.iinfo(target)
        lo, hi = float(info.min), float(info.max) + 1  # powers of two: exact as floats
    with np.errstate(invalid="ignore"):
        bad = ~((array >= lo) & (array < hi) & (np.trunc(array) == array))
        if target.kind == "b":
            bad |= (array != 0) & (array != 1)
    if bad.any():
        lost = array.reshape(-1)[int(np.argmax(bad.reshape(-1)))].item()
        raise OpsdkError(f"Session.run: feed for '{tensor.name}' holds {lost!r}, which is not a "
                         f"value of dtype {tensor.dtype} (TF would convert it to "
                         f"{_converted(lost, target)!r}); feed whole numbers within the range of "
                         f"{tensor.dtype}, or give the placeholder a float dtype")
    return array.astype(target)


def _converted(value: Any, target: np.dtype) -> Any:
    """What NumPy's conversion, which TF's session uses, makes of `value` (for the message)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(value).astype(target).item()


def enable_sparse() -> None:
    """Have `Session.run` look for SparseTensors among fetches and feeds from now on."""
    global _sparse
    _sparse = True


def sparse_fetches(fetches: Any) -> Any:
    """fetches with each SparseTensor as a SparseTensorValue of its three tensors, which the
    runtime fetches as a SparseTensorValue of arrays (as TF's session hands it out)."""
    if not _sparse:
        return fetches
    if hasattr(fetches, "_components"):
        return fetches._components()
    if isinstance(fetches, dict):
        return type(fetches)((k, sparse_fetches(v)) for k, v in fetches.items())
    if isinstance(fetches, (list, tuple)):
        items = [sparse_fetches(f) for f in fetches]
        return type(fetches)(*items) if hasattr(fetches, "_fields") else type(fetches)(items)
    return fetches


def register_encoder(tensor: Any, encode: Callable[[Any], Any]) -> None:
    """Have `Session.run` feed `encode(value)` to placeholder `tensor` when given `value`."""
    global _encoding
    graph_state.table(tensor.graph, "encoders")[tensor.name] = encode
    _encoding = True


def register_decoder(tensor: Any, decode: Callable[[Any], Any]) -> None:
    """Have `Session.run` hand out `decode(array)` whenever `tensor` is fetched."""
    global _decoding
    graph_state.table(tensor.graph, "decoders")[tensor.name] = decode
    _decoding = True


def fetched(fetches: Any, result: Any) -> Any:
    """What a run hands out for the runtime's `result` of `fetches`, as TF's session does:
    strings and summaries decoded, 0-d arrays as NumPy scalars."""
    return _scalars(_decode(fetches, result) if _decoding else result)


def _scalars(value: Any) -> Any:
    """A fetched 0-d array as the NumPy scalar TF's session hands out (`np.float32(1.5)`: a
    dict key, with a scalar's repr), in the fetches' structure."""
    if type(value) is np.ndarray:
        return value[()] if value.ndim == 0 else value
    if type(value) is list:
        return [_scalars(v) for v in value]
    if isinstance(value, tuple):
        items = [_scalars(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return type(value)((k, _scalars(v)) for k, v in value.items())
    return value


def _decode(fetch: Any, value: Any) -> Any:
    if isinstance(fetch, opsdk.Tensor):
        decode = graph_state.table(fetch.graph, "decoders").get(fetch.name)
        return value if decode is None else decode(value)
    if isinstance(fetch, dict):
        return type(value)((k, _decode(fetch[k], v)) for k, v in value.items())
    if isinstance(fetch, (list, tuple)):
        items = [_decode(f, v) for f, v in zip(fetch, value)]
        return type(value)(*items) if hasattr(fetch, "_fields") else type(value)(items)
    return value


def _session_for(who: str, session: Optional[Session]) -> Session:
    session = session or get_default_session()
    if session is None:
        raise OpsdkError(f"{who}: no default session; pass session=, or call it inside "
                         "`with tf.Session() as sess:` (or after tf.InteractiveSession())")
    return session


def _tensor_eval(self: Any, feed_dict: Optional[Mapping[Any, Any]] = None,
                 session: Optional[Session] = None) -> Any:
    """The tensor's value in `session` (default: the default session)."""
    return _session_for(f"eval of '{self.name}'", session).run(self, feed_dict)


def _operation_run(self: Any, feed_dict: Optional[Mapping[Any, Any]] = None,
                   session: Optional[Session] = None) -> None:
    """Run the node in `session` (default: the default session)."""
    _session_for(f"run of '{self.name}'", session).run(self, feed_dict)


def _by_name(kind: str, find: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    """TF's `Graph.get_<kind>_by_name`: a KeyError for a missing name, as TF raises."""
    def get(graph: Any, name: str) -> Any:
        if not isinstance(name, str):
            raise TypeError(f"{kind} names are strings, not {type(name).__name__}")
        try:
            return find(graph, name)
        except OpsdkError as exc:
            raise KeyError(f"The name {name!r} refers to no {kind} in this graph: {exc}") from None
    get.__name__ = f"get_{kind}_by_name"
    return get


def attach() -> None:
    """Give opsdk's Tensor and Operation TF1's `eval()` and `run()`, and its Graph
    `as_graph_def()` (opsdk/v1/graph_def.py), `get_tensor_by_name` and
    `get_operation_by_name`."""
    from opsdk.v1.graph_def import as_graph_def

    opsdk.Tensor.eval = _tensor_eval
    opsdk.Operation.run = _operation_run
    opsdk.Graph.as_graph_def = as_graph_def
    opsdk.Graph.get_tensor_by_name = _by_name("tensor", opsdk.Graph.get_tensor)
    opsdk.Graph.get_operation_by_name = _by_name("operation", opsdk.Graph.get_operation)
