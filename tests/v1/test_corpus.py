"""The corpus tooling: the manifest's form, the adaptation rules, the coverage report and the
refusals of names opsdk.v1 lacks (the public programs themselves are never in the repository)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import opsdk.v1 as tf
from opsdk.v1 import coverage

CORPUS = Path(__file__).parent / "corpus"
sys.path.insert(0, str(CORPUS))
import build  # noqa: E402 - tests/v1/corpus/build.py

sys.path.remove(str(CORPUS))


def test_the_manifest_names_at_least_40_programs_from_6_repositories_at_exact_commits():
    entries = build.read_manifest()
    assert len(entries) >= 40 and len({e.repo for e in entries}) >= 6
    assert all(len(e.commit) == 40 and e.license for e in entries)
    assert len({e.cache_name for e in entries}) == len(entries)
    assert not list(CORPUS.glob("*__*.py"))  # no public program is kept here


def test_the_adaptation_rules_mark_each_changed_line():
    source = "\n".join([
        "import tensorflow as tf",
        "from tensorflow.examples.tutorials.mnist import input_data",
        "import tensorflow.examples.tutorials.mnist.input_data as input_data",
        "training_epochs = 15",
        "training_epochs = 1",
        "num_steps = 500 # Total steps",
        "for step in range(2001):",
        "for i in range(10):",
        "n_steps = 28",
        "    plt.waitforbuttonpress()",
        "for epoch in range(15):",
        "training_epoch = 20",
        "    for i in range(start, 100):",
        "        for batch_i in range(mnist.train.num_examples // batch_size):",
        "for i in range(start, 10):",
    ])
    lines = build.adapt(source).splitlines()
    assert lines[0] == "import tensorflow as tf"
    assert lines[1] == ("import input_data  # opsdk-corpus: was "
                        "from tensorflow.examples.tutorials.mnist import input_data")
    assert lines[2].startswith("import input_data  # opsdk-corpus: was import tensorflow.")
    lines = lines[:2] + lines[3:]
    assert lines[2].startswith("training_epochs = 2  # opsdk-corpus: was training_epochs = 15")
    assert lines[3] == "training_epochs = 1" and lines[7] == "n_steps = 28"  # timesteps stay
    assert lines[4].startswith("num_steps = 20  # opsdk-corpus: was num_steps = 500")
    assert lines[5].startswith("for step in range(2):  # opsdk-corpus: was")
    assert lines[6] == "for i in range(10):"
    assert lines[8] == "    pass  # opsdk-corpus: was plt.waitforbuttonpress()"
    assert lines[9] == "for epoch in range(2):  # opsdk-corpus: was for epoch in range(15):"
    assert lines[10] == "training_epoch = 2  # opsdk-corpus: was training_epoch = 20"
    assert lines[11] == ("    for i in range(start, min(100, start + 2)):  # opsdk-corpus: was "
                         "for i in range(start, 100):")
    assert lines[12] == ("        for batch_i in range(min(20, mnist.train.num_examples // "
                         "batch_size)):  # opsdk-corpus: was for batch_i in "
                         "range(mnist.train.num_examples // batch_size):")
    assert lines[13] == "for i in range(start, 10):"


def committed(clone):
    """Make `clone` a git repository of its files, one commit; that commit."""
    import subprocess

    for command in (["init", "-q"], ["add", "."],
                    ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
        subprocess.run(["git", "-C", str(clone), *command], check=True)
    return subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def helpers_of(tmp_path, clone, repo, path):
    """The cache folder after build.py's helpers rule for the program `path` of `clone`."""
    entry = build.Entry(repo, committed(clone), path, "MIT")
    cache = tmp_path / "cache"
    cache.mkdir()
    build._helpers(tmp_path / "sources", entry, (clone / path).read_text(), cache)
    return cache


def test_a_module_beside_the_program_comes_along_as_a_package(tmp_path):
    clone = tmp_path / "sources" / "someone+tutorials"
    (clone / "ch9").mkdir(parents=True)
    (clone / "ch9" / "driver.py").write_text("from model import net\nimport numpy\n")
    (clone / "ch9" / "model.py").write_text("for i in range(500):\n    pass\n")
    (clone / "ch9" / "unused.py").write_text("x = 1\n")
    cache = helpers_of(tmp_path, clone, "someone/tutorials", "ch9/driver.py")
    helper = (cache / "model" / "__init__.py").read_text()
    assert helper.startswith("for i in range(2):  # opsdk-corpus: was")  # adapted as programs are
    assert sorted(p.name for p in cache.iterdir()) == ["model"]  # not numpy, not unused


def test_a_data_file_the_repository_holds_beside_the_program_comes_along(tmp_path):
    clone = tmp_path / "sources" / "someone+labs"
    (clone / "lab").mkdir(parents=True)
    (clone / "lab" / "p.py").write_text(
        "xy = np.loadtxt('scores.csv')\nq = ['data/more.txt', 'absent.csv', 'x.py']\n")
    (clone / "lab" / "scores.csv").write_bytes(b"1,2\r\n3,4\n")
    (clone / "lab" / "data").mkdir()
    (clone / "lab" / "data" / "more.txt").write_text("hello\n")
    (clone / "lab" / "other.csv").write_text("unused\n")
    cache = helpers_of(tmp_path, clone, "someone/labs", "lab/p.py")
    assert (cache / "scores.csv").read_bytes() == b"1,2\r\n3,4\n"  # unchanged
    assert (cache / "data" / "more.txt").read_text() == "hello\n"
    assert sorted(p.name for p in cache.iterdir()) == ["data", "scores.csv"]


def test_the_cache_is_refused_inside_the_repository(tmp_path):
    with pytest.raises(SystemExit, match="outside the repository"):
        build.build(tmp_path, CORPUS / "cache")


def test_names_opsdk_lacks_are_refused_naming_them():
    for owner, path in ((tf.nn, "nn.no_such"), (tf.train, "train.no_such"),
                        (tf.losses, "losses.no_such"), (tf.summary, "summary.no_such")):
        assert not hasattr(owner, "no_such")
        with pytest.raises(AttributeError, match=rf"tf\.{path} is not provided by opsdk.v1"):
            getattr(owner, "no_such")
    assert coverage.status("nn", "relu")[0] == "provided"
    assert coverage.status("", "arg_max")[0] == "provided"
    assert coverage.status("nn", "no_such")[0] == "refused"


def test_the_generated_section_replaces_only_its_markers(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Title\n\nbefore\n\n{coverage.BEGIN}\nold\n{coverage.END}\n\nafter\n")
    coverage.write(doc, f"{coverage.BEGIN}\nnew\n{coverage.END}\n")
    assert doc.read_text() == f"# Title\n\nbefore\n\n{coverage.BEGIN}\nnew\n{coverage.END}\n\nafter\n"


def test_the_coverage_report_in_the_docs_is_current():
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed (pip install opsdk[tf]): no listing to compare")
    section, statuses = coverage.report()
    assert statuses["nn"]["relu"][0] == "provided"
    docs = (Path(__file__).resolve().parents[2] / "docs" / "tf1.md").read_text()
    assert section.strip() in docs, "run: python -m opsdk.v1.coverage --write docs/tf1.md"


def test_the_mnist_stand_in_keeps_uint8_pixels_when_asked():
    # TF's read_data_sets(dtype=tf.uint8) keeps the pixels 0..255; a program writing them to a
    # TFRecord as bytes (784 per image) depends on it
    import numpy as np

    spec = importlib.util.spec_from_file_location("input_data",
                                                  build.ROOT / "examples" / "input_data.py")
    input_data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(input_data)
    raw = input_data.read_data_sets("", dtype=tf.uint8, one_hot=True)
    scaled = input_data.read_data_sets("", one_hot=True)
    assert raw.train.images.dtype == np.uint8 and raw.train.images.max() == 255
    assert scaled.train.images.dtype == np.float32 and scaled.train.images.max() == 1.0
    np.testing.assert_allclose(raw.train.images / 255.0, scaled.train.images, atol=0.5 / 255)
