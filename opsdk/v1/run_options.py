"""TF1's `tf.RunOptions` and `tf.RunMetadata`: a run's timeout, and the trace of its nodes.

`sess.run(fetches, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
run_metadata=meta)` runs the step once with every node timed (`opsdk.Session.traced_run`) and
fills `meta.step_stats` as TensorFlow does: per device, one NodeExecStats per node run, with
its start (Unix microseconds), duration, thread and a label `name = Type(inputs)`. The
timeline module (`opsdk.v1.timeline`, TF's `tensorflow.python.client.timeline`) turns that
into a Chrome trace; `FileWriter.add_run_metadata` writes it to an event file.

`timeout_in_ms` bounds the run: past it the run stops with a DeadlineExceededError.

What is recorded: node timings only. The memory, output and allocation fields of TF's
NodeExecStats stay empty, `partition_graphs` and `cost_graph` too, and every trace level above
NO_TRACE records the same (opsdk has no hardware tracer). On a cluster every task times its own
nodes (`opsdk.dist.ClusterSession.traced_run`) and each node's device is its task's location;
the times are each machine's clock.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from opsdk.v1 import events


class RunOptions:
    """`tf.RunOptions(trace_level=0, timeout_in_ms=0, ...)`: the fields of TF's message. Two act
    (`trace_level`, `timeout_in_ms`); the others are kept for programs that read them back. A
    field TF's message lacks is refused, as the message refuses it."""

    NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3

    class TraceLevel:
        """The enum as protobuf shows it: `RunOptions.TraceLevel.Value("FULL_TRACE")`."""

        NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3

        @classmethod
        def Value(cls, name: str) -> int:  # noqa: N802 (protobuf's name)
            if name not in ("NO_TRACE", "SOFTWARE_TRACE", "HARDWARE_TRACE", "FULL_TRACE"):
                raise ValueError(f"RunOptions.TraceLevel has no value named {name!r}")
            return int(getattr(cls, name))

        @classmethod
        def Name(cls, number: int) -> str:  # noqa: N802
            names = ("NO_TRACE", "SOFTWARE_TRACE", "HARDWARE_TRACE", "FULL_TRACE")
            if number not in range(len(names)):
                raise ValueError(f"RunOptions.TraceLevel has no value {number!r}")
            return names[number]

    _DEFAULTS: dict[str, Any] = {
        "trace_level": 0, "timeout_in_ms": 0, "inter_op_thread_pool": 0,
        "output_partition_graphs": False, "report_tensor_allocations_upon_oom": False,
        "debug_options": None, "experimental": None}

    def __init__(self, **fields: Any):
        for name, value in self._DEFAULTS.items():
            object.__setattr__(self, name, value)
        for name, value in fields.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._DEFAULTS:
            raise ValueError(f'Protocol message RunOptions has no "{name}" field (opsdk.v1 '
                             f"keeps {', '.join(self._DEFAULTS)})")
        if name in ("trace_level", "timeout_in_ms", "inter_op_thread_pool") and (
                isinstance(value, bool) or not isinstance(value, (int, np.integer))):
            raise TypeError(f"RunOptions.{name}: {value!r} has type {type(value).__name__}, "
                            "but expected a whole number")
        if name == "trace_level" and value not in range(4):
            raise ValueError(f"RunOptions.trace_level: {value!r} is none of NO_TRACE (0), "
                             "SOFTWARE_TRACE (1), HARDWARE_TRACE (2), FULL_TRACE (3)")
        object.__setattr__(self, name, int(value) if name in (
            "trace_level", "timeout_in_ms", "inter_op_thread_pool") else value)

    def __repr__(self) -> str:
        changed = {k: getattr(self, k) for k, v in self._DEFAULTS.items() if getattr(self, k) != v}
        return "RunOptions(" + ", ".join(f"{k}={v!r}" for k, v in changed.items()) + ")"


def read_options(options: Any, who: str) -> tuple[Optional[float], bool]:
    """(the run's timeout in seconds or None, whether to trace it) from `options` (a
    RunOptions or None; anything else is a TypeError, as in TensorFlow)."""
    if options is None:
        return None, False
    if not isinstance(options, RunOptions):
        raise TypeError(f"{who}: options must be a tf.RunOptions, got {type(options).__name__}")
    timeout = options.timeout_in_ms  # both fields were checked when set
    return (timeout / 1000 if timeout > 0 else None), options.trace_level > RunOptions.NO_TRACE


def merge_options(first: Any, second: Any) -> Any:
    """Two runs' options as one (a monitored session's run and its hooks' requests, as TF
    merges them): the higher trace level, the shorter positive timeout, either's partition
    graphs. None when both are None."""
    if first is None or second is None:
        return second if first is None else first
    for options in (first, second):
        read_options(options, "MonitoredSession.run")
    merged = RunOptions(**{name: getattr(first, name) for name in RunOptions._DEFAULTS})
    merged.trace_level = max(first.trace_level, second.trace_level)
    timeouts = [t for t in (first.timeout_in_ms, second.timeout_in_ms) if t > 0]
    merged.timeout_in_ms = min(timeouts) if timeouts else 0
    merged.output_partition_graphs = bool(first.output_partition_graphs
                                          or second.output_partition_graphs)
    return merged


# --------------------------------------------------------------------------- the trace
class NodeExecStats:
    """One node run: TF's NodeExecStats, the timing fields filled."""

    def __init__(self, node_name: str = "", all_start_micros: int = 0,
                 op_start_rel_micros: int = 0, op_end_rel_micros: int = 0,
                 all_end_rel_micros: int = 0, timeline_label: str = "",
                 scheduled_micros: int = 0, thread_id: int = 0):
        self.node_name = node_name
        self.all_start_micros = all_start_micros
        self.op_start_rel_micros = op_start_rel_micros
        self.op_end_rel_micros = op_end_rel_micros
        self.all_end_rel_micros = all_end_rel_micros
        self.timeline_label = timeline_label
        self.scheduled_micros = scheduled_micros
        self.thread_id = thread_id
        self.memory: list = []
        self.output: list = []

    def SerializeToString(self) -> bytes:  # noqa: N802 (protobuf's name)
        return (_string(1, self.node_name) + _int(2, self.all_start_micros)
                + _int(3, self.op_start_rel_micros) + _int(4, self.op_end_rel_micros)
                + _int(5, self.all_end_rel_micros) + _string(8, self.timeline_label)
                + _int(9, self.scheduled_micros) + _int(10, self.thread_id))

    def __repr__(self) -> str:
        return (f"NodeExecStats({self.node_name!r}, start={self.all_start_micros}, "
                f"micros={self.all_end_rel_micros}, thread={self.thread_id})")


class DeviceStepStats:
    def __init__(self, device: str = "", node_stats: Optional[list] = None):
        self.device = device
        self.node_stats: list[NodeExecStats] = list(node_stats or [])

    def SerializeToString(self) -> bytes:  # noqa: N802
        return _string(1, self.device) + b"".join(
            events._bytes_field(2, n.SerializeToString()) for n in self.node_stats)


class StepStats:
    def __init__(self, dev_stats: Optional[list] = None):
        self.dev_stats: list[DeviceStepStats] = list(dev_stats or [])

    def SerializeToString(self) -> bytes:  # noqa: N802
        return b"".join(events._bytes_field(1, d.SerializeToString()) for d in self.dev_stats)


class RunMetadata:
    """`tf.RunMetadata()`: given to `run` with a tracing RunOptions, its `step_stats` holds the
    run's node timings. `partition_graphs` and `cost_graph` stay empty."""

    def __init__(self) -> None:
        self.step_stats = StepStats()
        self.partition_graphs: list = []
        self.function_graphs: list = []
        self.cost_graph = None

    def Clear(self) -> None:  # noqa: N802
        self.__init__()  # type: ignore[misc]

    def CopyFrom(self, other: "RunMetadata") -> None:  # noqa: N802
        self.step_stats = other.step_stats
        self.partition_graphs = list(other.partition_graphs)

    def HasField(self, name: str) -> bool:  # noqa: N802
        if name == "step_stats":
            return bool(self.step_stats.dev_stats)
        if name == "cost_graph":
            return False
        raise ValueError(f'Protocol message RunMetadata has no singular "{name}" field')

    def SerializeToString(self) -> bytes:  # noqa: N802
        return events._bytes_field(1, self.step_stats.SerializeToString())


def check_metadata(run_metadata: Any, who: str) -> None:
    if run_metadata is not None and not isinstance(run_metadata, RunMetadata):
        raise TypeError(f"{who}: run_metadata must be a tf.RunMetadata, got "
                         f"{type(run_metadata).__name__}")


_HOST = "/job:localhost/replica:0/task:0/device:CPU:0"  # a node placement left to the default


def record(run_metadata: RunMetadata, profile: Any, graph: Any) -> None:
    """Fill `run_metadata.step_stats` from a traced run's StepProfile (Session.traced_run)."""
    devices = {node.name: node.device for node in profile.nodes}
    record_runs(run_metadata, [(devices.get(name) or _HOST, name, op_type, thread,
                                profile.started + start, profile.started + end)
                               for name, op_type, thread, start, end in profile.events], graph)


def record_cluster(run_metadata: RunMetadata, runs: list, graph: Any) -> None:
    """Fill `run_metadata.step_stats` from a cluster's traced run (ClusterSession.traced_run):
    each node's device is its task's location."""
    record_runs(run_metadata, [(_located(task, device), name, op_type, thread, start, end)
                               for task, name, op_type, device, thread, start, end in runs], graph)


def _located(task: str, device: str) -> str:
    if device.startswith("/job:"):
        return device
    return task + (device if device.startswith("/device:") else "/device:CPU:0")


def record_runs(run_metadata: RunMetadata, runs: list, graph: Any) -> None:
    """Fill `run_metadata.step_stats` from node runs (device, node, op type, thread, start,
    end; times in Unix seconds): a DeviceStepStats per device in the order the devices first
    ran a node, its nodes in the order they started. A node the plan made (a copy, a fused
    region, a send or receive) has no inputs in its label."""
    ops = {op.name: op for op in graph.operations}
    by_device: dict[str, DeviceStepStats] = {}
    for device, name, op_type, thread, start, end in sorted(runs, key=lambda r: r[4]):
        stats = by_device.setdefault(device, DeviceStepStats(device))
        micros = max(int(round((end - start) * 1e6)), 0)
        stats.node_stats.append(NodeExecStats(
            node_name=name, all_start_micros=int(start * 1e6),
            op_start_rel_micros=0, op_end_rel_micros=micros, all_end_rel_micros=micros,
            timeline_label=f"{name} = {op_type}({', '.join(_inputs(ops.get(name)))})",
            thread_id=thread))
    run_metadata.step_stats = StepStats(list(by_device.values()))


def _inputs(op: Any) -> list[str]:
    return [] if op is None else [t.name for t in op.inputs if t is not None]


def _string(field: int, text: str) -> bytes:
    return events._bytes_field(field, text.encode()) if text else b""


def _int(field: int, value: int) -> bytes:
    return events._key(field, 0) + events._varint(int(value)) if value else b""
