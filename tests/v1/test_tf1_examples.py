"""The TF1 programs of examples/ and the issue's sample program run as written under opsdk.v1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_mnist_softmax_tutorial_runs_and_learns():
    out = subprocess.run([sys.executable, "examples/mnist_softmax.py"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    accuracy = float(out.stdout.strip().splitlines()[-1])
    assert accuracy > 0.9  # 10 classes: chance is 0.1


def test_the_sample_program_as_written_learns_learnable_labels():
    # The program's graph and loop (the same lines make demo shows), its labels made learnable.
    import opsdk.v1 as tf
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import demo
    finally:
        sys.path.remove(str(ROOT / "examples"))
    tf.reset_default_graph()
    losses = demo.sample_program_with_learnable_labels(steps=10000)  # the program's NUM_STEPS
    assert np.mean(losses[-1000:]) < 0.7 * np.mean(losses[:1000])


def test_the_sample_program_file_runs_exactly_as_written():
    source = (ROOT / "examples" / "tf1_sample.py").read_text()
    assert source.startswith("import opsdk.v1 as tf\n")  # the only line that differs from TF's
    out = subprocess.run([sys.executable, "examples/tf1_sample.py"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
