"""The conformance suite: each TF1 program of tests/v1/programs runs under opsdk.v1 with its
loss falling, and (where TensorFlow is installed and runs it) under TF's compat.v1 too."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from opsdk.v1.check import check_folder, main, run_program
from opsdk.v1 import events

PROGRAMS = sorted((Path(__file__).parent / "programs").glob("*.py"))
# A program with this line starts from fixed values and draws nothing at random in the graph.
SAME_LOSSES = "# opsdk-check: same-losses"


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_program_runs_under_opsdk_and_its_loss_falls(path):
    outcome = run_program(path, timeout=300)
    assert outcome.ok, outcome.failure
    assert len(outcome.losses) >= 2 and outcome.losses[-1] < outcome.losses[0]


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_program_agrees_with_tensorflow(path):
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed (pip install opsdk[tf])")
    theirs = run_program(path, timeout=300, backend="tf")
    if not theirs.ok:
        pytest.skip(f"TensorFlow's compat.v1 itself cannot run it: {theirs.failure}")
    ours = run_program(path, timeout=300)
    assert ours.ok, ours.failure
    assert theirs.losses[-1] < theirs.losses[0] and ours.losses[-1] < ours.losses[0]
    assert len(ours.losses) == len(theirs.losses)
    if SAME_LOSSES in path.read_text():  # no random op: every printed loss must agree
        assert ours.losses == pytest.approx(theirs.losses, rel=2e-3, abs=1e-4), (ours, theirs)


def test_the_checker_reports_the_first_failure(tmp_path, capsys):
    (tmp_path / "good.py").write_text("import tensorflow as tf\nprint('loss: 1')\nprint('loss: 0.5')\n")
    (tmp_path / "bad.py").write_text("import tensorflow as tf\nx = tf.no_such_function(3)\n")
    outcomes = {o.program: o for o in check_folder(tmp_path, timeout=120)}
    assert outcomes["good.py"].ok and outcomes["good.py"].losses == (1.0, 0.5)
    assert not outcomes["bad.py"].ok and "no_such_function" in outcomes["bad.py"].failure
    assert "bad.py:2" in outcomes["bad.py"].failure.replace('", line ', ":")
    assert main([str(tmp_path), "--timeout", "120", "--opsdk-only"]) == 1
    assert "1 of 2 programs ran" in capsys.readouterr().out


def test_a_program_killed_by_a_signal_is_reported_with_the_signal(tmp_path):
    (tmp_path / "killed.py").write_text("import os, signal\nprint('loss: 1')\n"
                                        "os.kill(os.getpid(), signal.SIGKILL)\n")
    (tmp_path / "silent.py").write_text("import sys\nsys.exit(3)\n")
    outcomes = {o.program: o for o in check_folder(tmp_path, timeout=120)}
    assert outcomes["killed.py"].failure == ("killed by signal SIGKILL (the kernel's "
                                             "out-of-memory killer sends it)")
    assert outcomes["silent.py"].failure == "exited with status 3 and printed nothing"


def test_contrib_submodules_import_as_tf1_programs_write_them(tmp_path):
    (tmp_path / "imports.py").write_text(
        "from tensorflow.contrib.factorization import KMeans\n"
        "from tensorflow.contrib.framework import arg_scope\n"
        "from tensorflow.contrib.layers import batch_norm, dropout\n")
    [outcome] = check_folder(tmp_path, timeout=120)
    assert outcome.ok, outcome.failure


def test_the_table_names_the_framework_that_ran(capsys):
    from opsdk.v1.check import Outcome, print_table
    print_table([Outcome("p.py", False, 1.0, failure="boom")], None, "TensorFlow compat.v1")
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[1:4] == ["TensorFlow", "compat.v1"]
    assert "TensorFlow compat.v1: boom" in out and "opsdk.v1" not in out


def test_the_checker_refuses_a_missing_folder(tmp_path, capsys):
    assert main([str(tmp_path / "nothing")]) == 1
    assert "is not a folder" in capsys.readouterr().err


def test_event_files_read_back(tmp_path):
    import numpy as np
    import opsdk.v1 as tf
    tf.reset_default_graph()
    v = tf.placeholder(tf.float32, [3])
    tf.summary.scalar("mean", tf.reduce_mean(v))
    tf.summary.histogram("values", v)
    merged = tf.summary.merge_all()
    writer = tf.summary.FileWriter(str(tmp_path))
    with tf.Session() as sess:
        for step in range(3):
            writer.add_summary(sess.run(merged, {v: np.arange(3) + step}), step)
    writer.close()
    records = list(events.read_records(writer.path))
    assert len(records) == 4 and b"brain.Event:2" in records[0]
    assert b"mean" in records[1] and b"values" in records[3]
    if importlib.util.find_spec("tensorflow") is not None:
        from tensorflow.compat.v1.train import summary_iterator
        found = [(e.step, val.tag, val.simple_value) for e in summary_iterator(str(writer.path))
                 for val in e.summary.value if val.tag == "mean"]
        assert found == [(0, "mean", 1.0), (1, "mean", 2.0), (2, "mean", 3.0)]


def test_a_corrupt_event_file_is_refused(tmp_path):
    path = tmp_path / "events.out.tfevents.1.x"
    data = events.record(events.event(1, summary_bytes=events.summary([events.scalar_value("a", 1)])))
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ValueError, match="corrupt record data"):
        list(events.read_records(path))


def test_the_checker_runs_programs_side_by_side_and_reads_their_costs(tmp_path, capsys):
    (tmp_path / "a.py").write_text("import tensorflow as tf\nprint('Epoch: 1 cost= 0.25')\n"
                                   "print('Minibatch Loss= 1e-2')\n")
    (tmp_path / "b.py").write_text("import tensorflow as tf\nraise ValueError('no')\n")
    outcomes = check_folder(tmp_path, timeout=120, jobs=2)
    assert [o.program for o in outcomes] == ["a.py", "b.py"]
    assert outcomes[0].losses == (0.25, 0.01)
    assert main([str(tmp_path), "--timeout", "120", "--jobs", "2", "--opsdk-only"]) == 1
    out = capsys.readouterr().out
    assert "opsdk.v1: ValueError: no" in out and "1 of 2 programs ran" in out


def test_run_as_tensorflow_answers_the_programs_own_import(tmp_path):
    import subprocess
    import sys

    program = tmp_path / "program.py"
    program.write_text("import sys\nimport tensorflow as tf\nfrom tensorflow.nn import relu\n"
                       "from tensorflow.errors import OutOfRangeError\n"
                       "print(tf.__name__, relu is tf.nn.relu, sys.argv[1:])\n"
                       "print(tf.Session().run(relu(tf.constant([-1.0, 2.0]))))\n")
    done = subprocess.run([sys.executable, "-m", "opsdk.v1.run", "--as-tensorflow",
                           str(program), "--task_index=1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["opsdk.v1 True ['--task_index=1']", "[0. 2.]"]
