"""Saver: round trips, keeping the last K, checksums, mismatches, and a crash mid-write."""

from __future__ import annotations

import os

import numpy as np
import pytest

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.ir.graph import Graph
from opsdk.runtime.train.saver import MAGIC, Saver, latest_checkpoint, read_checkpoint
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer


def build(w_value, step_value=np.int64(0)):
    graph = Graph()
    with graph.as_default():
        w = Variable(w_value, name="layer/w")
        step = Variable(step_value, name="step", trainable=False)
        bump = [w.assign_add(np.ones_like(w_value)), step.assign_add(np.int64(1))]
    return graph, w, step, bump


def test_round_trip_into_a_fresh_session(tmp_path):
    graph, w, step, bump = build(np.arange(6, dtype=np.float32).reshape(2, 3))
    with graph.as_default():
        saver = Saver()
    with Session(graph) as sess:
        sess.run(global_variables_initializer(graph))
        sess.run(bump)
        path = saver.save(sess, tmp_path / "model", global_step=1)
        assert path == str(tmp_path / "model-1") and latest_checkpoint(tmp_path) == path
        saved = sess.run([w, step])
    with Session(graph) as other:  # never initialised: restore alone provides the values
        saver.restore(other, path)
        got = other.run([w, step])
    np.testing.assert_array_equal(got[0], saved[0])
    assert got[0].dtype == np.float32 and got[1] == 1
    assert open(path, "rb").read().startswith(MAGIC)


def test_keeps_the_last_k(tmp_path):
    graph, w, step, bump = build(np.zeros(3))
    with graph.as_default():
        saver = Saver(max_to_keep=2)
    with Session(graph) as sess:
        sess.run(global_variables_initializer(graph))
        paths = []
        for i in range(4):
            sess.run(bump)
            paths.append(saver.save(sess, tmp_path / "ck", global_step=i))
    assert [os.path.exists(p) for p in paths] == [False, False, True, True]
    assert latest_checkpoint(tmp_path) == paths[-1]
    np.testing.assert_array_equal(read_checkpoint(paths[-1])["layer/w"], np.full(3, 4.0))


def test_corruption_is_detected_and_changes_nothing(tmp_path):
    graph, w, step, bump = build(np.zeros(4))
    with graph.as_default():
        saver = Saver()
    with Session(graph) as sess:
        sess.run(global_variables_initializer(graph))
        path = saver.save(sess, tmp_path / "model")
        data = bytearray(open(path, "rb").read())
        data[-3] ^= 0xFF  # one flipped byte in a value
        open(path, "wb").write(bytes(data))
        sess.run(bump)
        with pytest.raises(OpsdkError, match=r"model: checkpoint is corrupt \(sha256 mismatch\)"):
            saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(w), np.ones(4))
        open(path, "wb").write(b"garbage")
        with pytest.raises(OpsdkError, match="not an opsdk checkpoint"):
            saver.restore(sess, path)
        with pytest.raises(OpsdkError, match="cannot read checkpoint"):
            saver.restore(sess, tmp_path / "missing")


def test_mismatched_variables_are_named(tmp_path):
    graph, w, step, bump = build(np.zeros((2, 3), np.float32))
    with graph.as_default():
        saver = Saver()
    with Session(graph) as sess:
        sess.run(global_variables_initializer(graph))
        path = saver.save(sess, tmp_path / "model")
    for value, message in [
            (np.zeros((3, 2), np.float32), r"variable 'layer/w' is float32 \[2, 3\] in the "
                                           r"checkpoint but float32 \[3, 2\] in the graph"),
            (np.zeros((2, 3), np.float64), r"variable 'layer/w' is float32 \[2, 3\] in the "
                                           r"checkpoint but float64 \[2, 3\] in the graph")]:
        other, *_ = build(value)
        with other.as_default():
            other_saver = Saver()
        with Session(other) as sess, pytest.raises(OpsdkError, match=message):
            other_saver.restore(sess, path)
    extra = Graph()
    with extra.as_default():
        Variable(np.zeros(2), name="bias")
        extra_saver = Saver()
    with Session(extra) as sess, pytest.raises(OpsdkError, match="has no variable 'bias'"):
        extra_saver.restore(sess, path)


def test_a_crash_mid_write_leaves_the_last_good_checkpoint(tmp_path, monkeypatch):
    graph, w, step, bump = build(np.zeros(3))
    with graph.as_default():
        saver = Saver()
    with Session(graph) as sess:
        sess.run(global_variables_initializer(graph))
        good = saver.save(sess, tmp_path / "model")
        sess.run(bump)

        def crash(src, dst):
            raise OSError("disk full")
        monkeypatch.setattr(os, "replace", crash)
        with pytest.raises(OSError, match="disk full"):
            saver.save(sess, tmp_path / "model")
        monkeypatch.undo()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint", "model"]  # no temp
        assert latest_checkpoint(tmp_path) == good
        saver.restore(sess, good)
        np.testing.assert_array_equal(sess.run(w), np.zeros(3))
