"""TF's `tensorflow.python.client.timeline`: a traced run's step stats as a Chrome trace.

    run_metadata = tf.RunMetadata()
    sess.run(train_op, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=run_metadata)
    trace = timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format()
    open("timeline.json", "w").write(trace)      # chrome://tracing or Perfetto opens it

A program changing its imports writes `from opsdk.v1 import timeline`; run through
`python -m opsdk.v1.run --as-tensorflow`, its own `from tensorflow.python.client import
timeline` finds this module. Each device is a process of the trace, each thread a row, each
node run an event named by its op type (its node name and inputs in the event's arguments);
with `show_dataflow` an arrow goes from a node's end to each node that read its output and
started after. opsdk records no memory per node, so `show_memory` adds nothing.
"""

from __future__ import annotations

import json
import re
from typing import Any

from opsdk.registry.errors import OpsdkError

_LABEL = re.compile(r"^(.*?) = (.*?)\((.*)\)$")


class Timeline:
    """`Timeline(step_stats, graph=None)`: `step_stats` from a RunMetadata filled by a traced
    run (`graph` is accepted and not needed: the labels name each node's inputs)."""

    def __init__(self, step_stats: Any, graph: Any = None):
        if not hasattr(step_stats, "dev_stats"):
            raise OpsdkError("Timeline: give a RunMetadata's step_stats (run with "
                             "options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE) and "
                             f"run_metadata=...), not a {type(step_stats).__name__}")
        self._step_stats = step_stats

    def generate_chrome_trace_format(self, show_dataflow: bool = True, show_memory: bool = False,
                                     op_time: str = "schedule") -> str:
        """The trace as JSON text (`{"traceEvents": [...]}`), times in microseconds."""
        if op_time not in ("schedule", "gpu", "all"):
            raise OpsdkError(f"Timeline: op_time={op_time!r}; give 'schedule', 'gpu' or 'all'")
        events: list[dict[str, Any]] = []
        ends: dict[str, tuple[int, int, int]] = {}  # node -> (pid, thread, end) of its last run
        runs: list[tuple[int, Any, list[str]]] = []
        for pid, device in enumerate(self._step_stats.dev_stats):
            events.append({"name": "process_name", "ph": "M", "pid": pid,
                           "args": {"name": f"{device.device} Compute"}})
            events.append({"name": "process_sort_index", "ph": "M", "pid": pid,
                           "args": {"sort_index": pid}})
            for node in device.node_stats:
                match = _LABEL.match(node.timeline_label)
                op_type = match.group(2) if match else node.node_name
                inputs = [i.strip() for i in match.group(3).split(",")] if match else []
                inputs = [i for i in inputs if i]
                args = {"name": node.node_name, "op": op_type}
                args.update({f"input{i}": name for i, name in enumerate(inputs)})
                start, micros = node.all_start_micros, node.all_end_rel_micros
                events.append({"name": op_type, "cat": "Op", "ph": "X", "pid": pid,
                               "tid": node.thread_id, "ts": start, "dur": micros, "args": args})
                ends[node.node_name] = (pid, node.thread_id, start + micros)
                runs.append((pid, node, inputs))
        if show_dataflow:
            flow = 0
            for pid, node, inputs in runs:
                for tensor in inputs:
                    producer = ends.get(tensor.lstrip("^").split(":")[0])
                    if producer is None or producer[2] > node.all_start_micros:
                        continue
                    flow += 1
                    events.append({"name": tensor, "cat": "DataFlow", "ph": "s", "id": flow,
                                   "pid": producer[0], "tid": producer[1], "ts": producer[2]})
                    events.append({"name": tensor, "cat": "DataFlow", "ph": "t", "id": flow,
                                   "pid": pid, "tid": node.thread_id,
                                   "ts": node.all_start_micros})
        return json.dumps({"traceEvents": events}, separators=(",", ":"))
