"""`tf.RunOptions` and `tf.RunMetadata` (opsdk/v1/run_options.py): a traced run fills the step
stats with every node run and still computes and trains as an untraced one; the timeline module
makes a Chrome trace of them; `timeout_in_ms` stops a run that would not end; the metadata goes
to an event file; `tf.train.ProfilerHook` traces every N steps of a monitored session; wrong
fields and arguments are errors that name them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.v1 import events, timeline
from opsdk.v1.run_options import merge_options
from protobuf_fields import fields


def _model():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.Variable(tf.ones([3, 2]), name="w")
    loss = tf.reduce_sum(tf.matmul(tf.exp(x), w, name="product"), name="loss")
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    return x, w, loss, train


def _traced(fetch: str = "train", level: int = tf.RunOptions.FULL_TRACE):
    """The RunMetadata of one traced run of the model's training step (or its loss)."""
    x, _, loss, train = _model()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        meta = tf.RunMetadata()
        sess.run(train if fetch == "train" else loss, {x: np.ones((2, 3))}, run_metadata=meta,
                 options=tf.RunOptions(trace_level=level))
    return meta


def test_a_traced_run_records_every_node_and_still_trains():
    x, w, loss, train = _model()
    feed = {x: np.full((4, 3), 0.25, np.float32)}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        meta = tf.RunMetadata()
        assert not meta.HasField("step_stats")
        before = time.time()
        value, _ = sess.run([loss, train], feed, run_metadata=meta,
                            options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))
        after = time.time()
        # the traced step computed and trained as an untraced one: loss = sum(exp(x) @ w)
        e = np.exp(np.float32(0.25))
        np.testing.assert_allclose(value, 4 * 3 * e * 2, rtol=1e-6)
        np.testing.assert_allclose(sess.run(w), np.ones((3, 2)) - 0.5 * 4 * e, rtol=1e-6)
    assert meta.HasField("step_stats")
    stats = [n for d in meta.step_stats.dev_stats for n in d.node_stats]
    names = [n.node_name for n in stats]
    assert len(names) == len(set(names))  # every node once: one step ran
    assert {"product", "loss", "w"} <= set(names)
    by_name = {n.node_name: n for n in stats}
    assert by_name["product"].timeline_label == "product = matmul(exp:0, w:0)"
    for node in stats:
        assert before * 1e6 - 1 <= node.all_start_micros <= after * 1e6 + 1
        assert node.all_end_rel_micros == node.op_end_rel_micros >= 0
    # each device's nodes in the order they started; a node starts after what it reads ended
    for device in meta.step_stats.dev_stats:
        starts = [n.all_start_micros for n in device.node_stats]
        assert starts == sorted(starts)
    ends = {n.node_name: n.all_start_micros + n.all_end_rel_micros for n in stats}
    assert by_name["loss"].all_start_micros >= ends["product"] - 1


def test_runs_without_a_trace_level_or_metadata_record_nothing():
    x, _, loss, _ = _model()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        meta = tf.RunMetadata()
        sess.run(loss, {x: np.ones((2, 3))}, options=tf.RunOptions(), run_metadata=meta)
        assert meta.step_stats.dev_stats == []
        # a trace level without metadata to fill is a plain run
        sess.run(loss, {x: np.ones((2, 3))},
                 options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))


def test_the_timeline_is_a_chrome_trace_of_the_step_with_its_dataflow():
    meta = _traced(level=tf.RunOptions.SOFTWARE_TRACE)
    trace = json.loads(timeline.Timeline(meta.step_stats).generate_chrome_trace_format())
    ops = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    stats = [n for d in meta.step_stats.dev_stats for n in d.node_stats]
    assert sorted(e["args"]["name"] for e in ops) == sorted(n.node_name for n in stats)
    product = next(e for e in ops if e["args"]["name"] == "product")
    assert product["name"] == "matmul" and product["args"]["input0"] == "exp:0"
    processes = [e for e in trace["traceEvents"] if e.get("name") == "process_name"]
    assert len(processes) == len(meta.step_stats.dev_stats)
    flows = [e for e in trace["traceEvents"] if e["ph"] in "st"]
    assert flows and len(flows) % 2 == 0
    starts = {e["id"]: e for e in flows if e["ph"] == "s"}
    for end in (e for e in flows if e["ph"] == "t"):
        assert starts[end["id"]]["ts"] <= end["ts"]  # an arrow never runs back in time
    plain = json.loads(timeline.Timeline(meta.step_stats).generate_chrome_trace_format(
        show_dataflow=False))
    assert not [e for e in plain["traceEvents"] if e["ph"] in "st"]
    with pytest.raises(tf.OpsdkError, match="step_stats"):
        timeline.Timeline(meta)
    with pytest.raises(tf.OpsdkError, match="op_time"):
        timeline.Timeline(meta.step_stats).generate_chrome_trace_format(op_time="wall")


def test_a_run_past_its_timeout_is_a_deadline_exceeded_error():
    tf.reset_default_graph()
    forever = tf.while_loop(lambda i: i >= 0, lambda i: i + 1 - 1, [tf.constant(0)])
    with tf.Session() as sess:
        start = time.monotonic()
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(forever, options=tf.RunOptions(timeout_in_ms=300))
        assert time.monotonic() - start < 30
        # a timeout the run keeps within changes nothing
        assert sess.run(tf.constant(3) * 2, options=tf.RunOptions(timeout_in_ms=60_000)) == 6


def test_wrong_fields_and_arguments_are_refused_naming_them():
    with pytest.raises(ValueError, match='no "trace" field'):
        tf.RunOptions(trace=3)
    options = tf.RunOptions()
    with pytest.raises(TypeError, match="timeout_in_ms"):
        options.timeout_in_ms = "1s"
    with pytest.raises(ValueError, match="FULL_TRACE"):
        options.trace_level = 7
    assert tf.RunOptions.TraceLevel.Value("FULL_TRACE") == tf.RunOptions.FULL_TRACE == 3
    assert tf.RunOptions.TraceLevel.Name(1) == "SOFTWARE_TRACE"
    tf.reset_default_graph()
    c = tf.constant(1.0)
    with tf.Session() as sess:
        with pytest.raises(TypeError, match="options must be a tf.RunOptions"):
            sess.run(c, options={"trace_level": 3})
        with pytest.raises(TypeError, match="run_metadata must be a tf.RunMetadata"):
            sess.run(c, options=tf.RunOptions(trace_level=3), run_metadata=[])


def test_options_of_a_run_and_its_hooks_merge_as_in_tensorflow():
    a = tf.RunOptions(trace_level=tf.RunOptions.NO_TRACE, timeout_in_ms=5000)
    b = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, timeout_in_ms=0)
    merged = merge_options(a, b)
    assert (merged.trace_level, merged.timeout_in_ms) == (3, 5000)
    assert merge_options(a, tf.RunOptions(timeout_in_ms=100)).timeout_in_ms == 100
    assert merge_options(None, b) is b and merge_options(a, None) is a
    assert (a.trace_level, b.timeout_in_ms) == (0, 0)  # the inputs are left as they were


def test_run_metadata_goes_to_the_event_file_under_its_tag(tmp_path):
    meta = _traced("loss")
    writer = tf.summary.FileWriter(str(tmp_path))
    writer.add_run_metadata(meta, "step_7", global_step=7)
    with pytest.raises(tf.OpsdkError, match="already used"):
        writer.add_run_metadata(meta, "step_7")
    with pytest.raises(tf.OpsdkError, match="tf.RunMetadata"):
        writer.add_run_metadata(b"", "other")
    writer.close()
    records = list(events.read_records(writer.path))
    tagged = [fields(r) for r in records if 8 in fields(r)]
    assert len(tagged) == 1 and tagged[0][2] == [7]
    inner = fields(tagged[0][8][0])
    assert inner[1] == [b"step_7"] and inner[2] == [meta.SerializeToString()]
    # RunMetadata > StepStats > DeviceStepStats > NodeExecStats, field by field
    step_stats = fields(fields(inner[2][0])[1][0])
    nodes = [fields(n) for d in step_stats[1] for n in fields(d)[2]]
    names = sorted(n[1][0].decode() for n in nodes)
    assert names == sorted(n.node_name for d in meta.step_stats.dev_stats for n in d.node_stats)
    product = next(n for n in nodes if n[1] == [b"product"])
    assert product[8] == [b"product = matmul(exp:0, w:0)"] and product[2][0] > 10**15


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow is not installed (pip install opsdk[tf]): nothing to "
                           "read the metadata with but this module")
def test_tensorflow_reads_the_metadata_and_draws_its_timeline():
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.client import timeline as tf_timeline

    meta = _traced()
    theirs = config_pb2.RunMetadata.FromString(meta.SerializeToString())
    ours = [(n.node_name, n.all_start_micros, n.all_end_rel_micros, n.timeline_label, n.thread_id)
            for d in meta.step_stats.dev_stats for n in d.node_stats]
    assert [(n.node_name, n.all_start_micros, n.all_end_rel_micros, n.timeline_label, n.thread_id)
            for d in theirs.step_stats.dev_stats for n in d.node_stats] == ours
    drawn = json.loads(tf_timeline.Timeline(theirs.step_stats).generate_chrome_trace_format())
    assert {e["args"]["name"] for e in drawn["traceEvents"] if e.get("ph") == "X"} == {
        n[0] for n in ours}


def test_the_profiler_hook_traces_every_n_steps_of_a_monitored_session(tmp_path):
    x, _, loss, _ = _model()
    step = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    hook = tf.train.ProfilerHook(save_steps=2, output_dir=str(tmp_path))
    with tf.train.MonitoredTrainingSession(hooks=[hook], save_checkpoint_secs=None,
                                           save_summaries_steps=None) as sess:
        for _ in range(7):
            sess.run(train, {x: np.ones((2, 3))})
    written = sorted(int(p.stem.split("-")[1]) for p in tmp_path.glob("timeline-*.json"))
    # the first run (global step 0) sets the timer off and is not traced; then every 2 steps,
    # each file named by the global step after its run
    assert written == [2, 4, 6]
    trace = json.loads((tmp_path / "timeline-4.json").read_text())
    assert any(e.get("args", {}).get("name") == "product" for e in trace["traceEvents"])
    (path,) = tmp_path.glob("events.out.tfevents.*")
    tags = [fields(fields(r)[8][0])[1][0] for r in events.read_records(path) if 8 in fields(r)]
    assert tags == [b"step_2", b"step_4", b"step_6"]
    with pytest.raises(tf.OpsdkError, match="exactly one"):
        tf.train.ProfilerHook(save_steps=2, save_secs=1)


def test_a_program_run_as_tensorflow_imports_the_timeline_module(tmp_path):
    program = tmp_path / "traced.py"
    program.write_text(
        "import tensorflow as tf\n"
        "from tensorflow.python.client import timeline\n"
        "meta = tf.RunMetadata()\n"
        "with tf.Session() as sess:\n"
        "    sess.run(tf.constant(2.0) * 3.0, run_metadata=meta,\n"
        "             options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))\n"
        "print(len(timeline.Timeline(meta.step_stats).generate_chrome_trace_format()) > 0)\n")
    done = subprocess.run([sys.executable, "-m", "opsdk.v1.run", "--as-tensorflow", str(program)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
