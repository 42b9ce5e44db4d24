"""Saver: round trips, keeping the last K, checksums, mismatches, a crash mid-write, the index as
data (names inside its folder only), temp files of killed saves, TF's names."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.ir.graph import Graph
from opsdk.runtime.train.saver import (MAGIC, Saver, get_checkpoint_state, latest_checkpoint,
                                       read_checkpoint, temp_name)
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
        with pytest.raises(OpsdkError, match=r"^Saver.save: cannot write the checkpoint "
                                             r"'.*model': disk full"):
            saver.save(sess, tmp_path / "model")
        monkeypatch.undo()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint", "model"]  # no temp
        assert latest_checkpoint(tmp_path) == good
        saver.restore(sess, good)
        np.testing.assert_array_equal(sess.run(w), np.zeros(3))


# ------------------------------------------------------------------ the index is data (issue 10)
def _saved(tmp_path, max_to_keep=1):
    """A session with one variable, its Saver, and one checkpoint in tmp_path/ckpt."""
    graph, w, step, bump = build(np.zeros(2))
    with graph.as_default():
        saver = Saver(max_to_keep=max_to_keep)
    sess = Session(graph)
    sess.run(global_variables_initializer(graph))
    folder = tmp_path / "ckpt"
    saver.save(sess, folder / "model", global_step=0)
    return sess, saver, folder


@pytest.mark.parametrize("entry", ["/VICTIM", "../victim", "sub/../../victim", "..", "."])
def test_a_crafted_index_never_deletes_or_returns_a_file_outside_its_folder(tmp_path, entry):
    sess, saver, folder = _saved(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(MAGIC + b"looks like a checkpoint")
    named = str(victim) if entry == "/VICTIM" else entry
    (folder / "checkpoint").write_text(json.dumps({"checkpoints": [named, "model-0"]}))
    message = rf"{re.escape(str(folder / 'checkpoint'))}: the index names {re.escape(repr(named))}"
    with pytest.raises(OpsdkError, match=message):
        saver.save(sess, folder / "model", global_step=1)
    assert victim.read_bytes().startswith(MAGIC)
    with pytest.raises(OpsdkError, match=message):
        latest_checkpoint(folder)
    with pytest.raises(OpsdkError, match=message):
        get_checkpoint_state(folder)
    sess.close()


def test_an_index_entry_linking_out_of_the_folder_is_refused(tmp_path):
    sess, saver, folder = _saved(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(MAGIC)
    os.symlink(victim, folder / "model-link")
    (folder / "checkpoint").write_text(json.dumps({"checkpoints": ["model-link", "model-0"]}))
    with pytest.raises(OpsdkError, match=r"checkpoint: the index names 'model-link', which "
                                         r"links outside"):
        saver.save(sess, folder / "model", global_step=1)
    assert victim.exists()
    sess.close()


@pytest.mark.parametrize("text, message", [
    ("{not json", r"checkpoint: unreadable checkpoint index"),
    ('["model-0"]', r"checkpoint: the index is not .*\{\"checkpoints\": \[names\]\}"),
    ('{"checkpoints": [3]}', r"checkpoint: the index is not .*\{\"checkpoints\": \[names\]\}"),
])
def test_a_malformed_index_is_a_clear_error(tmp_path, text, message):
    sess, saver, folder = _saved(tmp_path)
    (folder / "checkpoint").write_text(text)
    with pytest.raises(OpsdkError, match=message):
        latest_checkpoint(folder)
    sess.close()


def test_a_listed_file_that_is_no_checkpoint_is_never_deleted(tmp_path):
    sess, saver, folder = _saved(tmp_path)
    notes = folder / "notes.txt"
    notes.write_text("mine")
    (folder / "checkpoint").write_text(json.dumps({"checkpoints": ["notes.txt", "model-0"]}))
    saver.save(sess, folder / "model", global_step=1)
    assert notes.read_text() == "mine"
    assert not (folder / "model-0").exists()
    assert latest_checkpoint(folder) == str(folder / "model-1")
    sess.close()


# ------------------------------------------------------------ temporary files of interrupted saves
def test_a_killed_save_leaves_a_temp_file_that_the_next_save_removes(tmp_path):
    sess, saver, folder = _saved(tmp_path, max_to_keep=5)
    # A save killed (SIGKILL) between writing and renaming: run one in a child and kill it there.
    child = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(folder)], capture_output=True,
                           text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    left = [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert len(left) == 1, sorted(p.name for p in folder.iterdir())
    saver.save(sess, folder / "model", global_step=1)
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint", "model-0", "model-1"]
    sess.close()


def test_a_temp_file_of_a_live_save_is_left_alone(tmp_path):
    sess, saver, folder = _saved(tmp_path, max_to_keep=5)
    live = folder / temp_name("model-7", os.getppid())  # a process that is alive: another save
    live.write_bytes(b"half")
    saver.save(sess, folder / "model", global_step=1)
    assert live.exists()
    sess.close()


def test_an_exception_mid_write_removes_the_temp_file(tmp_path, monkeypatch):
    sess, saver, folder = _saved(tmp_path, max_to_keep=5)

    def fail(fd):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(KeyboardInterrupt):
        saver.save(sess, folder / "model", global_step=1)
    monkeypatch.undo()
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint", "model-0"]
    sess.close()


KILLED_SAVE = """\
import os, signal, sys
import numpy as np
from opsdk.runtime.ir.graph import Graph
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.train import saver as saver_module

graph = Graph()
with graph.as_default():
    Variable(np.zeros(1000), name="w")
    saver = saver_module.Saver()
sess = Session(graph)
sess.run(global_variables_initializer(graph))
os.replace = lambda src, dst: os.kill(os.getpid(), signal.SIGKILL)  # dies before the rename
saver.save(sess, os.path.join(sys.argv[1], "model"), global_step=9)
"""


# ----------------------------------------------------------------------- TF's names and layout
def test_global_step_names_the_file_and_the_state_is_tf_like(tmp_path):
    graph, w, step, bump = build(np.zeros(2))
    with graph.as_default():
        saver = Saver(max_to_keep=2)
    folder = tmp_path / "run"
    assert get_checkpoint_state(folder) is None
    with Session(graph) as sess:
        sess.run(global_variables_initializer(graph))
        written = [saver.save(sess, str(folder / "model.ckpt"), global_step=n) for n in (10, 20)]
        sess.run(bump)
        written.append(saver.save(sess, str(folder / "model.ckpt"), global_step=step))
    assert written == [str(folder / "model.ckpt-10"), str(folder / "model.ckpt-20"),
                       str(folder / "model.ckpt-1")]
    state = get_checkpoint_state(str(folder))
    assert state.model_checkpoint_path == str(folder / "model.ckpt-1")
    assert state.all_model_checkpoint_paths == (str(folder / "model.ckpt-20"),
                                                str(folder / "model.ckpt-1"))
    assert latest_checkpoint(folder) == state.model_checkpoint_path


def test_a_global_step_that_is_not_an_integer_is_refused(tmp_path):
    sess, saver, folder = _saved(tmp_path)
    with pytest.raises(OpsdkError, match=r"Saver\.save: global_step must be an integer, got 1\.5"):
        saver.save(sess, folder / "model", global_step=1.5)
    sess.close()
