"""TF1's queues and the input pipelines built on them: `tf.FIFOQueue`, `tf.RandomShuffleQueue`,
`tf.PaddingFIFOQueue`, `tf.train.QueueRunner` and `start_queue_runners`, the producers
(`input_producer`, `string_input_producer`, `range_input_producer`, `slice_input_producer`,
`limit_epochs`) and the batchers (`batch`, `shuffle_batch`, `batch_join`,
`shuffle_batch_join`).

A queue's operations are py_func nodes (opsdk/runtime/frontend/py_func.py) over a queue kept in
Python, one per session (as TF keeps one per session): `enqueue` waits while the queue is full,
`dequeue` while it holds too few elements; both wait in slices of 50 ms checking the step's
cancellation token, so `Session.close()`, Ctrl-C and a run's timeout stop them. A dequeue from a
closed queue that holds too few elements fails with `tf.errors.OutOfRangeError`, which ends a
program's `while not coord.should_stop()` loop as in TF; an enqueue into a closed queue fails
with `tf.errors.CancelledError`. Queue runners are Python threads running the enqueue ops with
`Session.run`, as TF's are. String elements (`string_input_producer`'s file names) travel as
their bytes (opsdk/v1/strings.py).

Differences from TF: the queue lives in the process that built the graph (a py_func), so a
graph with queues runs in one process; `shared_name` is not supported; an epoch counter lives
with the producer's queue runner state, not in a local variable (initializing local variables
is harmless and not needed).
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any, Callable, Optional, Sequence

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.py_func import py_func_node, takes_step
from opsdk.v1 import dtypes, errors, scopes, strings
from opsdk.v1 import session as _session
from opsdk.v1.tensors import TensorShape
from opsdk.v1.tensors import convert_to_tensor as _t

_SLICE = 0.05  # seconds between checks of the step's cancellation while waiting

QUEUE_RUNNERS = "queue_runners"
scopes.GraphKeys.QUEUE_RUNNERS = QUEUE_RUNNERS


class _Contents:
    """One queue's elements in one session, and whether it is closed."""

    def __init__(self, capacity: int, min_after_dequeue: int, seed: Optional[int]):
        self.cond = threading.Condition()
        self.items: list[tuple] = []
        self.capacity, self.min_after_dequeue = capacity, min_after_dequeue
        self.closed = self.cancelled = False
        self.rng = np.random.default_rng(seed)


class QueueBase:
    """A queue of tuples of tensors (`tf.QueueBase`); make one with FIFOQueue,
    RandomShuffleQueue or PaddingFIFOQueue."""

    def __init__(self, capacity: int, dtypes_: Any, shapes: Any, names: Any, name: str,
                 kind: str, min_after_dequeue: int = 0, seed: Any = None,
                 shared_name: Any = None):
        if shared_name:
            raise OpsdkError(f"{kind}: shared_name is not supported by opsdk.v1 (a queue lives "
                             "in one session)")
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) \
                or capacity < 1:
            raise OpsdkError(f"{kind}: capacity must be a whole number >= 1, got {capacity!r}")
        listed = list(dtypes_) if isinstance(dtypes_, (list, tuple)) else [dtypes_]
        if not listed:
            raise OpsdkError(f"{kind}: give the dtypes of the elements' components")
        self._dtypes = [dtypes.as_dtype(d) for d in listed]
        if shapes is None:
            self._shapes = [None] * len(listed)
        else:
            given = list(shapes) if isinstance(shapes, (list, tuple)) and (
                not shapes or isinstance(shapes[0], (list, tuple, TensorShape))
                or shapes[0] is None) else [shapes]
            if len(given) != len(listed):
                raise OpsdkError(f"{kind}: {len(given)} shapes for {len(listed)} dtypes")
            self._shapes = [None if s is None else (s.as_list() if isinstance(s, TensorShape)
                                                    else [None if d is None else int(d)
                                                          for d in s]) for s in given]
        self._names = None if names is None else list(names) if isinstance(
            names, (list, tuple)) else [names]
        if self._names is not None and len(self._names) != len(listed):
            raise OpsdkError(f"{kind}: {len(self._names)} names for {len(listed)} dtypes")
        self._kind, self._capacity = kind, int(capacity)
        self._min_after_dequeue = int(min_after_dequeue)
        self._seed = None if seed is None else int(seed)
        self._name = opsdk.get_default_graph().unique_name(name)
        self._contents: "weakref.WeakKeyDictionary[Any, _Contents]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._string = [d is dtypes.string for d in self._dtypes]

    # ------------------------------------------------------------------ what it is
    @property
    def dtypes(self) -> list:
        return list(self._dtypes)

    @property
    def shapes(self) -> list:
        return [TensorShape(s) for s in self._shapes]

    @property
    def names(self) -> Any:
        return self._names

    @property
    def name(self) -> str:
        return self._name

    def _in(self, session: Any) -> _Contents:
        with self._lock:
            contents = self._contents.get(session)
            if contents is None:
                contents = self._contents[session] = _Contents(
                    self._capacity, self._min_after_dequeue, self._seed)
            return contents

    def _label(self) -> str:
        return f"{self._kind} '{self._name}'"

    # ------------------------------------------------------------------ building the ops
    def _components(self, who: str, vals: Any) -> list:
        if isinstance(vals, dict):
            if self._names is None:
                raise OpsdkError(f"{self._label()}.{who}: a dict of values needs a queue made "
                                 "with names=")
            missing = [n for n in self._names if n not in vals]
            if missing or len(vals) != len(self._names):
                raise OpsdkError(f"{self._label()}.{who}: give a value for each of the names "
                                 f"{self._names}, got {sorted(vals)}")
            vals = [vals[n] for n in self._names]
        elif not isinstance(vals, (list, tuple)):
            vals = [vals]
        if len(vals) != len(self._dtypes):
            raise OpsdkError(f"{self._label()}.{who}: {len(vals)} values for elements of "
                             f"{len(self._dtypes)} components")
        tensors = []
        for k, (v, d) in enumerate(zip(vals, self._dtypes)):
            if d is dtypes.string:
                t = v if isinstance(v, opsdk.Tensor) else strings.string_constant(v)
                if not strings.is_string(t):
                    raise OpsdkError(f"{self._label()}.{who}: component {k} must be a string "
                                     f"tensor, got {t.dtype}")
            else:
                t = _t(v) if isinstance(v, opsdk.Tensor) else _t(v, dtype=d)
                if t.dtype != d.name:
                    raise OpsdkError(f"{self._label()}.{who}: component {k} is {t.dtype}, the "
                                     f"queue holds {d.name}")
            tensors.append(t)
        return tensors

    def _check_shape(self, k: int, array: np.ndarray, many: bool) -> None:
        want = self._shapes[k]
        if want is None:
            return
        have = array.shape[1:] if many else array.shape
        if self._string[k]:
            have = have[:-1]  # a string is a row of bytes
        if len(have) != len(want) or any(w is not None and w != h for w, h in zip(want, have)):
            raise errors.InvalidArgumentError(
                None, None, f"{self._label()}: component {k} of shape {list(have)} does not fit "
                f"the queue's shape {want}")

    def _items(self, arrays: Sequence[np.ndarray], many: bool) -> list[tuple]:
        parts = []
        for k, array in enumerate(arrays):
            self._check_shape(k, array, many)
            if self._string[k]:  # one string's bytes exactly; rows of several, their padding
                array = strings._decode_list(array) if many else \
                    np.asarray(array, np.uint8).tobytes()  # dropped
            parts.append(array)
        if not many:
            return [tuple(parts)]
        counts = {len(p) for p in parts}
        if len(counts) > 1:
            raise errors.InvalidArgumentError(
                None, None, f"{self._label()}.enqueue_many: the components have different "
                f"numbers of elements {sorted(counts)} along their first axis")
        return [tuple(p[i] for p in parts) for i in range(counts.pop() if counts else 0)]

    def enqueue(self, vals: Any, name: Optional[str] = None) -> Any:
        """An op that adds one element (waiting while the queue is full)."""
        return self._enqueue("enqueue", vals, False, name)

    def enqueue_many(self, vals: Any, name: Optional[str] = None) -> Any:
        """An op that adds the slices of vals along their first axis, each one element."""
        return self._enqueue("enqueue_many", vals, True, name)

    def _enqueue(self, who: str, vals: Any, many: bool, name: Optional[str]) -> Any:
        tensors = self._components(who, vals)

        @takes_step
        def put(ctx: Any, *arrays: np.ndarray) -> None:
            self._put(ctx, self._items(arrays, many))
        return py_func_node(put, tensors, [], name=name or f"{self._name}_{who}")

    def _put(self, ctx: Any, items: list[tuple]) -> None:
        contents = self._in(ctx.session)
        with contents.cond:
            for item in items:
                while True:
                    if contents.closed:
                        raise errors.CancelledError(
                            None, None, f"{self._label()} is closed: the enqueue was cancelled")
                    if len(contents.items) < contents.capacity:
                        break
                    self._wait(ctx, contents)
                contents.items.append(item)
                contents.cond.notify_all()

    def _wait(self, ctx: Any, contents: _Contents) -> None:
        contents.cond.wait(_SLICE)
        try:
            ctx.token.check(self._label())
        except OpsdkError as exc:  # Session.close, Ctrl-C or the run's timeout
            late = "timeout" in ctx.token.reason
            raise (errors.DeadlineExceededError if late else errors.CancelledError)(
                None, None, str(exc)) from None

    def dequeue(self, name: Optional[str] = None) -> Any:
        """One element: a tensor, a list of them, or a dict with names."""
        return self._dequeue(None, False, name)

    def dequeue_many(self, n: Any, name: Optional[str] = None) -> Any:
        """n elements, each component stacked along a new first axis."""
        return self._dequeue(n, False, name)

    def dequeue_up_to(self, n: Any, name: Optional[str] = None) -> Any:
        """As dequeue_many, but a closed queue gives what it has left (at least one)."""
        return self._dequeue(n, True, name)

    def _dequeue(self, n: Any, up_to: bool, name: Optional[str]) -> Any:
        static = None
        inputs = []
        if n is not None:
            if isinstance(n, opsdk.Tensor):
                inputs = [n]
            else:
                if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
                    raise OpsdkError(f"{self._label()}: n must be a whole number >= 0, got "
                                     f"{n!r}")
                static = int(n)

        @takes_step
        def take(ctx: Any, *given: np.ndarray) -> list:
            count = static if not given else int(np.asarray(given[0]))
            return self._take(ctx, count, up_to)
        out_dtypes = ["uint8" if s else d.name for s, d in zip(self._string, self._dtypes)]
        who = "dequeue" if n is None else ("dequeue_up_to" if up_to else "dequeue_many")
        op = py_func_node(take, inputs, out_dtypes, name=name or f"{self._name}_{who}")
        outs = list(op.outputs)
        for k, out in enumerate(outs):
            if self._string[k]:
                _session.register_decoder(out, strings._decode_scalar if n is None
                                          else strings._decode_list)
            elif self._shapes[k] is not None:
                lead = [] if n is None else [None if up_to else static]
                out.set_shape(lead + self._shapes[k])
        if self._names is not None:
            return dict(zip(self._names, outs))
        return outs[0] if len(outs) == 1 else outs

    def _take(self, ctx: Any, count: Optional[int], up_to: bool) -> list:
        contents = self._in(ctx.session)
        need = 1 if count is None else count
        with contents.cond:
            while True:
                held = len(contents.items)
                ready = held - (0 if contents.closed else contents.min_after_dequeue)
                if ready >= need:
                    break
                if contents.closed:
                    if up_to and held > 0 and count is not None:
                        need = held
                        break
                    raise errors.OutOfRangeError(
                        None, None, f"{self._label()} is closed and has insufficient elements "
                        f"(requested {need}, current size {held})")
                self._wait(ctx, contents)
            if contents.min_after_dequeue or self._kind == "RandomShuffleQueue":
                picked = sorted(contents.rng.choice(len(contents.items), need, replace=False),
                                reverse=True)
                items = [contents.items.pop(int(i)) for i in picked]
            else:
                items, contents.items = contents.items[:need], contents.items[need:]
            contents.cond.notify_all()
        if count is None:
            return [self._single(k, v) for k, v in enumerate(items[0])]
        return [self._stacked(k, [item[k] for item in items]) for k in range(len(self._dtypes))]

    def _single(self, k: int, value: Any) -> np.ndarray:
        if self._string[k]:
            return np.frombuffer(value, dtype=np.uint8).copy()
        return np.asarray(value)

    def _stacked(self, k: int, values: list) -> np.ndarray:
        if self._string[k]:
            return strings.byte_rows(values)
        if not values:
            shape = [0 if d is None else d for d in (self._shapes[k] or [])]
            return np.zeros([0, *shape], dtype=self._dtypes[k].name)
        shapes = {np.shape(v) for v in values}
        if len(shapes) > 1:
            if self._kind != "PaddingFIFOQueue":
                raise errors.InvalidArgumentError(
                    None, None, f"{self._label()}: the elements' component {k} has shapes "
                    f"{sorted(shapes)}; a batch needs one shape (a PaddingFIFOQueue pads them)")
            top = tuple(max(dims) for dims in zip(*shapes))
            padded = np.zeros((len(values), *top), dtype=self._dtypes[k].name)
            for row, v in zip(padded, values):
                row[tuple(slice(0, d) for d in np.shape(v))] = v
            return padded
        return np.stack(values)

    def size(self, name: Optional[str] = None) -> Any:
        """The number of elements, an int32 scalar."""
        @takes_step
        def count(ctx: Any) -> np.int32:
            return np.int32(len(self._in(ctx.session).items))
        out = py_func_node(count, [], ["int32"], name=name or f"{self._name}_Size").outputs[0]
        out.set_shape([])
        return out

    def close(self, cancel_pending_enqueues: bool = False, name: Optional[str] = None) -> Any:
        """An op that closes the queue: no more enqueues; dequeues take what is left. With
        cancel_pending_enqueues, enqueues waiting for room fail now."""
        @takes_step
        def shut(ctx: Any) -> None:
            contents = self._in(ctx.session)
            with contents.cond:
                contents.closed = True
                contents.cancelled = contents.cancelled or bool(cancel_pending_enqueues)
                contents.cond.notify_all()
        return py_func_node(shut, [], [], name=name or f"{self._name}_Close")

    def is_closed(self, name: Optional[str] = None) -> Any:
        @takes_step
        def closed(ctx: Any) -> np.bool_:
            return np.bool_(self._in(ctx.session).closed)
        out = py_func_node(closed, [], ["bool"], name=name or f"{self._name}_IsClosed").outputs[0]
        out.set_shape([])
        return out

    def __repr__(self) -> str:
        return f"<{self._kind} '{self._name}' dtypes={[d.name for d in self._dtypes]}>"


class FIFOQueue(QueueBase):
    """`tf.FIFOQueue(capacity, dtypes, shapes=None, names=None, shared_name=None,
    name='fifo_queue')`: elements in the order they came."""

    def __init__(self, capacity: int, dtypes: Any, shapes: Any = None, names: Any = None,
                 shared_name: Any = None, name: str = "fifo_queue"):
        super().__init__(capacity, dtypes, shapes, names, name, "FIFOQueue",
                         shared_name=shared_name)


class PaddingFIFOQueue(QueueBase):
    """`tf.PaddingFIFOQueue(capacity, dtypes, shapes, ...)`: a FIFOQueue whose dequeue_many pads
    each component with zeros to the largest element's shape (shapes may hold None)."""

    def __init__(self, capacity: int, dtypes: Any, shapes: Any, names: Any = None,
                 shared_name: Any = None, name: str = "padding_fifo_queue"):
        super().__init__(capacity, dtypes, shapes, names, name, "PaddingFIFOQueue",
                         shared_name=shared_name)


class RandomShuffleQueue(QueueBase):
    """`tf.RandomShuffleQueue(capacity, min_after_dequeue, dtypes, shapes=None, names=None,
    seed=None, shared_name=None, name='random_shuffle_queue')`: a dequeue takes random elements,
    leaving at least min_after_dequeue until the queue is closed."""

    def __init__(self, capacity: int, min_after_dequeue: int, dtypes: Any, shapes: Any = None,
                 names: Any = None, seed: Any = None, shared_name: Any = None,
                 name: str = "random_shuffle_queue"):
        if min_after_dequeue >= capacity:
            raise OpsdkError(f"RandomShuffleQueue: min_after_dequeue ({min_after_dequeue}) must "
                             f"be less than capacity ({capacity})")
        super().__init__(capacity, dtypes, shapes, names, name, "RandomShuffleQueue",
                         min_after_dequeue, seed, shared_name)


# ------------------------------------------------------------------------------ queue runners
class QueueRunner:
    """`tf.train.QueueRunner(queue, enqueue_ops, close_op=None, cancel_op=None,
    queue_closed_exception_types=None)`: threads running the enqueue ops until the coordinator
    stops them or the input ends (an enqueue op's OutOfRangeError, then the queue is closed)."""

    def __init__(self, queue: Any = None, enqueue_ops: Any = None, close_op: Any = None,
                 cancel_op: Any = None, queue_closed_exception_types: Any = None,
                 queue_runner_def: Any = None, import_scope: Any = None):
        if queue_runner_def is not None:
            raise OpsdkError("QueueRunner: queue_runner_def is not supported by opsdk.v1")
        if queue is None or not enqueue_ops:
            raise OpsdkError("QueueRunner: give the queue and its enqueue ops")
        self.queue, self.enqueue_ops = queue, list(enqueue_ops)
        self.close_op = close_op if close_op is not None else queue.close()
        self.cancel_op = cancel_op if cancel_op is not None else queue.close(
            cancel_pending_enqueues=True)
        self._closed_types = tuple(queue_closed_exception_types or (
            errors.OutOfRangeError, errors.CancelledError))
        self.name = queue.name
        self.exceptions_raised: list = []

    def create_threads(self, sess: Any, coord: Any = None, daemon: bool = False,
                       start: bool = False) -> list:
        """One thread per enqueue op, and one that cancels pending enqueues when coord stops."""
        left = [len(self.enqueue_ops)]
        lock = threading.Lock()
        threads = [threading.Thread(target=self._run, args=(sess, op, coord, left, lock),
                                    name=f"QueueRunner:{self.name}:{k}", daemon=daemon)
                   for k, op in enumerate(self.enqueue_ops)]
        if coord is not None:
            threads.append(threading.Thread(target=self._close_on_stop, args=(sess, coord),
                                            name=f"QueueRunner:{self.name}:close",
                                            daemon=daemon))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if start:
                t.start()
        return threads

    def _run(self, sess: Any, op: Any, coord: Any, left: list, lock: threading.Lock) -> None:
        try:
            while coord is None or not coord.should_stop():
                try:
                    sess.run(op)
                except self._closed_types:
                    with lock:
                        left[0] -= 1
                        last = left[0] == 0
                    if last:  # the input ended: dequeues take what is left, then end too
                        try:
                            sess.run(self.close_op)
                        except Exception as exc:  # noqa: BLE001 - reported to coord
                            self._report(coord, exc)
                    return
        except Exception as exc:  # noqa: BLE001 - reported to coord, as TF's runner does
            if coord is not None and coord.should_stop():
                return  # the session went away while stopping: not an error
            self._report(coord, exc)

    def _report(self, coord: Any, exc: BaseException) -> None:
        self.exceptions_raised.append(exc)
        # as TF's runner logs it: the dequeues then fail on a closed queue, far from the cause
        logging.getLogger("opsdk.v1").error("Exception in QueueRunner '%s': %s", self.name, exc)
        if coord is not None:
            coord.request_stop(exc)
        else:
            raise exc

    def _close_on_stop(self, sess: Any, coord: Any) -> None:
        coord.wait_for_stop()
        try:
            sess.run(self.cancel_op)
        except Exception:  # noqa: BLE001 - the session may be closed already
            pass


def add_queue_runner(qr: QueueRunner, collection: str = QUEUE_RUNNERS) -> None:
    """Add qr to the graph's collection that start_queue_runners starts."""
    scopes.add_to_collection(collection, qr)


def start_queue_runners(sess: Any = None, coord: Any = None, daemon: bool = True,
                        start: bool = True, collection: str = QUEUE_RUNNERS) -> list:
    """Start the threads of every queue runner of the collection; the threads."""
    sess = _session._session_for("start_queue_runners", sess)
    threads: list = []
    for runner in sess.graph.get_collection(collection):
        threads.extend(runner.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads


# ---------------------------------------------------------------------------------- producers
def _epochs(who: str, num_epochs: Any) -> Optional[int]:
    if num_epochs is None:
        return None
    if isinstance(num_epochs, bool) or not isinstance(num_epochs, (int, np.integer)) \
            or num_epochs < 1:
        raise OpsdkError(f"{who}: num_epochs must be a whole number >= 1 or None, got "
                         f"{num_epochs!r}")
    return int(num_epochs)


def _limited(who: str, tensor: Any, num_epochs: Optional[int], shuffle: bool,
             seed: Any) -> Any:
    """tensor, each run once more (its first axis permuted when shuffle), and OutOfRangeError
    after num_epochs runs: the counter is kept per session."""
    counts: "weakref.WeakKeyDictionary[Any, list]" = weakref.WeakKeyDictionary()
    lock = threading.Lock()

    @takes_step
    def epoch(ctx: Any, x: np.ndarray) -> np.ndarray:
        with lock:
            state = counts.setdefault(ctx.session, [0, np.random.default_rng(seed)])
            if num_epochs is not None and state[0] >= num_epochs:
                raise errors.OutOfRangeError(None, None, f"{who}: reached the limit of "
                                             f"{num_epochs} epochs")
            state[0] += 1
            order = state[1].permutation(len(x)) if shuffle else None
        return x if order is None else x[order]
    out = py_func_node(epoch, [tensor], [tensor.dtype], name=f"{who}_epochs").outputs[0]
    if tensor.shape is not None:
        out.set_shape(list(tensor.shape))
    if strings.is_string(tensor):
        _session.register_decoder(out, strings._decode_list)
    return out


def input_producer(input_tensor: Any, element_shape: Any = None, num_epochs: Any = None,
                   shuffle: bool = True, seed: Any = None, capacity: int = 32,
                   shared_name: Any = None, summary_name: Any = None, name: Any = None,
                   cancel_op: Any = None) -> QueueBase:
    """A FIFOQueue fed the rows of input_tensor (shuffled per epoch when shuffle), num_epochs
    times or forever, by a queue runner of the collection."""
    who = name or "input_producer"
    string = not isinstance(input_tensor, opsdk.Tensor) and _strings_given(input_tensor)
    x = strings.string_constant(list(input_tensor)) if string else _t(input_tensor)
    is_string = strings.is_string(x)
    if element_shape is None:
        element_shape = [] if is_string else (None if x.shape is None else list(x.shape[1:]))
    queue = FIFOQueue(capacity, [dtypes.string if is_string else x.dtype], [element_shape],
                      shared_name=shared_name, name=who)
    limited = _limited(who, x, _epochs(who, num_epochs), shuffle, seed)
    add_queue_runner(QueueRunner(queue, [queue.enqueue_many([limited])], cancel_op=cancel_op))
    return queue


def _strings_given(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and isinstance(value[0], (str, bytes))


def string_input_producer(string_tensor: Any, num_epochs: Any = None, shuffle: bool = True,
                          seed: Any = None, capacity: int = 32, shared_name: Any = None,
                          name: Any = None, cancel_op: Any = None) -> QueueBase:
    """A queue of strings (file names) for a reader, num_epochs times or forever."""
    if not isinstance(string_tensor, opsdk.Tensor) and not _strings_given(string_tensor):
        raise OpsdkError("string_input_producer: give a list of strings or a string tensor")
    return input_producer(string_tensor, [], num_epochs, shuffle, seed, capacity, shared_name,
                          None, name or "input_producer", cancel_op)


def match_filenames_once(pattern: Any, name: Optional[str] = None) -> Any:
    """The names of the files matching pattern (a glob, or a list of them), sorted, as a vector
    of strings read when the step runs (TF's is a local variable set when local variables are
    initialized; initializing them is harmless here)."""
    import glob
    import os

    patterns = [pattern] if isinstance(pattern, (str, bytes)) else list(pattern)

    def matches() -> np.ndarray:
        found = sorted({n for p in patterns for n in glob.glob(os.fsdecode(p))})
        return strings.byte_rows(found)
    out = py_func_node(matches, [], ["uint8"], name=name or "matching_filenames").outputs[0]
    out.set_shape([None, None])
    _session.register_decoder(out, strings._decode_list)
    return out


def range_input_producer(limit: int, num_epochs: Any = None, shuffle: bool = True,
                         seed: Any = None, capacity: int = 32, shared_name: Any = None,
                         name: Any = None) -> QueueBase:
    """A queue of the int32s 0 .. limit-1, num_epochs times or forever."""
    return input_producer(np.arange(int(limit), dtype=np.int32), [], num_epochs, shuffle, seed,
                          capacity, shared_name, None, name or "input_producer")


def slice_input_producer(tensor_list: Any, num_epochs: Any = None, shuffle: bool = True,
                         seed: Any = None, capacity: int = 32, shared_name: Any = None,
                         name: Any = None) -> list:
    """One row of each tensor of tensor_list (the same row of each), num_epochs times over all
    rows or forever."""
    tensors = [_t(t) for t in tensor_list]
    if not tensors or tensors[0].shape is None or tensors[0].shape[0] is None:
        raise OpsdkError("slice_input_producer: give tensors whose first size is known")
    rows = int(tensors[0].shape[0])
    queue = range_input_producer(rows, num_epochs, shuffle, seed, capacity, shared_name,
                                 name or "input_producer")
    index = queue.dequeue()
    return [_ops.gather(t, index, axis=0) for t in tensors]


def limit_epochs(tensor: Any, num_epochs: Any = None, name: Any = None) -> Any:
    """tensor, and OutOfRangeError once it has been run num_epochs times (per session)."""
    x = _t(tensor)
    limit = _epochs("limit_epochs", num_epochs)
    return x if limit is None else _limited(name or "limit_epochs", x, limit, False, None)


# ----------------------------------------------------------------------------------- batching
def _flat(who: str, tensors: Any) -> tuple[list, Callable[[list], Any]]:
    """The tensors of a list, tuple or dict (or one tensor), and how to rebuild that shape (a
    list of one tensor gives the tensor, as TF's batchers do)."""
    if isinstance(tensors, dict):
        keys = list(tensors)
        return [tensors[k] for k in keys], lambda out: dict(zip(keys, out))
    if isinstance(tensors, (list, tuple)):
        if not tensors:
            raise OpsdkError(f"{who}: give at least one tensor")
        return list(tensors), lambda out: out[0] if len(out) == 1 else list(out)
    return [tensors], lambda out: out[0]


def _batcher(who: str, tensor_lists: list, rebuild: Callable, batch_size: Any, capacity: int,
             enqueue_many: bool, shapes: Any, dynamic_pad: bool, allow_smaller: bool,
             num_threads: int, shuffle: Optional[tuple], name: Any) -> Any:
    first = [_value(t) for t in tensor_lists[0]]
    kinds = [dtypes.string if strings.is_string(t) else dtypes.as_dtype(t.dtype) for t in first]
    if shapes is None:
        shapes = []
        for t, kind in zip(first, kinds):
            shape = None if t.shape is None else list(t.shape)
            if shape is not None and kind is dtypes.string:
                shape = shape[:-1]  # a string is a row of bytes
            if shape is not None and enqueue_many:
                shape = shape[1:]
            shapes.append(shape)
    if shuffle is not None:
        queue: QueueBase = RandomShuffleQueue(capacity, shuffle[0], kinds, shapes,
                                              seed=shuffle[1], name=name or who)
    elif dynamic_pad:
        queue = PaddingFIFOQueue(capacity, kinds, shapes, name=name or who)
    else:
        queue = FIFOQueue(capacity, kinds, shapes, name=name or who)
    ops = []
    for tensors in tensor_lists:
        values = [_value(t) for t in tensors]
        enqueue = queue.enqueue_many(values) if enqueue_many else queue.enqueue(values)
        ops.extend([enqueue] * (num_threads if len(tensor_lists) == 1 else 1))
    add_queue_runner(QueueRunner(queue, ops))
    out = queue.dequeue_up_to(batch_size) if allow_smaller else queue.dequeue_many(batch_size)
    return rebuild(out if isinstance(out, list) else [out])


def _value(t: Any) -> Any:
    return t if isinstance(t, opsdk.Tensor) else _t(t)


def batch(tensors: Any, batch_size: Any, num_threads: int = 1, capacity: int = 32,
          enqueue_many: bool = False, shapes: Any = None, dynamic_pad: bool = False,
          allow_smaller_final_batch: bool = False, shared_name: Any = None,
          name: Any = None) -> Any:
    """Batches of batch_size elements of tensors (a list, dict or one tensor), filled by
    num_threads queue-runner threads; dynamic_pad pads unequal shapes with zeros."""
    flat, rebuild = _flat("batch", tensors)
    return _batcher("batch", [flat], rebuild, batch_size, capacity, enqueue_many, shapes,
                    dynamic_pad, allow_smaller_final_batch, num_threads, None, name)


def shuffle_batch(tensors: Any, batch_size: Any, capacity: int, min_after_dequeue: int,
                  num_threads: int = 1, seed: Any = None, enqueue_many: bool = False,
                  shapes: Any = None, allow_smaller_final_batch: bool = False,
                  shared_name: Any = None, name: Any = None) -> Any:
    """As batch, through a RandomShuffleQueue keeping min_after_dequeue elements to draw from."""
    flat, rebuild = _flat("shuffle_batch", tensors)
    return _batcher("shuffle_batch", [flat], rebuild, batch_size, capacity, enqueue_many,
                    shapes, False, allow_smaller_final_batch, num_threads,
                    (min_after_dequeue, seed), name)


def batch_join(tensors_list: Any, batch_size: Any, capacity: int = 32,
               enqueue_many: bool = False, shapes: Any = None, dynamic_pad: bool = False,
               allow_smaller_final_batch: bool = False, shared_name: Any = None,
               name: Any = None) -> Any:
    """As batch, one enqueue thread per list of tensors (each list the same structure)."""
    flats = [_flat("batch_join", t) for t in tensors_list]
    return _batcher("batch_join", [f for f, _ in flats], flats[0][1], batch_size, capacity,
                    enqueue_many, shapes, dynamic_pad, allow_smaller_final_batch, 1, None, name)


def shuffle_batch_join(tensors_list: Any, batch_size: Any, capacity: int,
                       min_after_dequeue: int, seed: Any = None, enqueue_many: bool = False,
                       shapes: Any = None, allow_smaller_final_batch: bool = False,
                       shared_name: Any = None, name: Any = None) -> Any:
    """As shuffle_batch, one enqueue thread per list of tensors."""
    flats = [_flat("shuffle_batch_join", t) for t in tensors_list]
    return _batcher("shuffle_batch_join", [f for f, _ in flats], flats[0][1], batch_size,
                    capacity, enqueue_many, shapes, False, allow_smaller_final_batch, 1,
                    (min_after_dequeue, seed), name)


TOP_LEVEL = {"QueueBase": QueueBase, "FIFOQueue": FIFOQueue,
             "PaddingFIFOQueue": PaddingFIFOQueue, "RandomShuffleQueue": RandomShuffleQueue}
TRAIN = {"QueueRunner": QueueRunner, "add_queue_runner": add_queue_runner,
         "start_queue_runners": start_queue_runners, "input_producer": input_producer,
         "string_input_producer": string_input_producer,
         "match_filenames_once": match_filenames_once,
         "range_input_producer": range_input_producer,
         "slice_input_producer": slice_input_producer, "limit_epochs": limit_epochs,
         "batch": batch, "shuffle_batch": shuffle_batch, "batch_join": batch_join,
         "shuffle_batch_join": shuffle_batch_join}
