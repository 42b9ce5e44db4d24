"""A crafted checkpoint (its sha256 recomputed, so the integrity check passes) is refused with an
error naming the file and the entry, never a raw NumPy exception, never last-one-wins; a save
that cannot write says what was asked and why."""

from __future__ import annotations

import errno
import hashlib
import json
import os

import numpy as np
import pytest

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph
from opsdk.runtime.train import saver as saver_module
from opsdk.runtime.train.saver import MAGIC, Saver, read_checkpoint


def _saved(tmp_path):
    graph = Graph()
    with graph.as_default():
        Variable(np.arange(3, dtype=np.float32), name="w")
        Variable(np.ones((2,), np.int64), name="v")
        saver = Saver()
    sess = Session(graph)
    sess.run(global_variables_initializer(graph))
    return saver, sess, saver.save(sess, tmp_path / "model")


def _rewrite(path, change):
    """Edit the header of the checkpoint at `path` and recompute its sha256."""
    data = open(path, "rb").read()
    payload = data[len(MAGIC) + 32:]
    length = int.from_bytes(payload[:8], "little")
    header = json.loads(payload[8:8 + length])
    change(header)
    text = json.dumps(header).encode()
    payload = len(text).to_bytes(8, "little") + text + payload[8 + length:]
    with open(path, "wb") as out:
        out.write(MAGIC + hashlib.sha256(payload).digest() + payload)


def _set(i, key, value):
    return lambda h: h["variables"][i].__setitem__(key, value)


@pytest.mark.parametrize("change, words", [
    (_set(1, "dtype", "O"), "checkpoint entry 1 ('w'): dtype 'O' is not a variable dtype (bool, "),
    (_set(1, "dtype", "float33"), "checkpoint entry 1 ('w'): dtype 'float33' is not a variable"),
    (_set(1, "shape", [3.0]), "checkpoint entry 1 ('w'): shape [3.0] must be a list of "
                              "non-negative ints"),
    (_set(1, "shape", {"3": 1}), "shape {'3': 1} must be a list of non-negative ints"),
    (_set(1, "offset", -4), "checkpoint entry 1 ('w'): offset -4 must be a non-negative int"),
    (_set(1, "nbytes", True), "checkpoint entry 1 ('w'): nbytes True must be a non-negative int"),
    (_set(1, "name", 7), "checkpoint entry 1: the variable name must be a non-empty string, got 7"),
    (_set(1, "name", "v"), "checkpoint entry 1: variable 'v' is listed twice"),
    (_set(1, "shape", [4]), "checkpoint entry 1 ('w'): its 12 bytes at offset 16 do not fit "
                            "dtype float32 shape [4]"),
    (lambda h: h["variables"].append(5), "checkpoint entry 2: must be an object with keys"),
    (lambda h: h.update(variables={"w": 1}), "checkpoint header is not"),
    (lambda h: h["variables"][0].update(extra=1), "checkpoint entry 0: must be an object with "
                                                  "keys dtype, name, nbytes, offset, shape"),
])
def test_a_crafted_entry_is_a_clear_error_naming_it(tmp_path, change, words):
    saver, sess, path = _saved(tmp_path)
    _rewrite(path, change)
    with pytest.raises(OpsdkError) as info:
        read_checkpoint(path)
    assert str(info.value).startswith(f"{path}: ") and words in str(info.value)
    with pytest.raises(OpsdkError):
        saver.restore(sess, path)
    sess.close()


def test_the_untouched_checkpoint_reads(tmp_path):
    _, sess, path = _saved(tmp_path)
    _rewrite(path, lambda h: None)
    assert read_checkpoint(path)["w"].tolist() == [0.0, 1.0, 2.0]
    sess.close()


def test_saving_to_an_empty_path_or_onto_a_folder_says_what_to_give(tmp_path):
    saver, sess, _ = _saved(tmp_path)
    with pytest.raises(OpsdkError, match=r"^Saver.save: save_path is empty; give a checkpoint "
                                         r"file path such as 'ckpt/model'$"):
        saver.save(sess, "")
    (tmp_path / "folder").mkdir()
    with pytest.raises(OpsdkError, match=r"^Saver.save: save_path '.*folder' is a folder; a "
                                         r"checkpoint is a file: give a path inside it, such as "
                                         r"'.*folder/model'$"):
        saver.save(sess, tmp_path / "folder")
    sess.close()


def test_saving_where_nothing_can_be_written_names_the_checkpoint_not_a_temp_file(tmp_path,
                                                                                  monkeypatch):
    saver, sess, _ = _saved(tmp_path)
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(OpsdkError, match=r"^Saver.save: cannot write the checkpoint "
                                         r"'.*a_file/model': '.*a_file' is a file, not a "
                                         r"folder$"):
        saver.save(sess, tmp_path / "a_file" / "model")
    real_open = open

    def read_only(path, mode="r", *args, **kwargs):  # a read-only file system, even for root
        if "x" in mode or "w" in mode:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, mode, *args, **kwargs)
    monkeypatch.setattr(saver_module, "open", read_only, raising=False)
    with pytest.raises(OpsdkError) as info:
        saver.save(sess, tmp_path / "ro" / "model")
    text = str(info.value)
    assert text.startswith(f"Saver.save: cannot write the checkpoint '{tmp_path / 'ro' / 'model'}'"
                           f": Read-only file system (in folder '{tmp_path / 'ro'}')")
    assert ".tmp" not in text
    sess.close()


def _sharded(tmp_path, shards=None):
    """A sharded checkpoint as a cluster writes it: w on one task's shard, v on another's."""
    from opsdk.runtime.train.saver import encode

    records = {}
    for task, values in {"/job:ps/task:0": {"w": np.arange(3, dtype=np.float32)},
                         "/job:ps/task:1": {"v": np.full(2, 7, np.int64)}}.items():
        name = f"ckpt-5.{task[-1]}.shard"
        data = encode(values)
        (tmp_path / name).write_bytes(data)
        records[task] = {"file": name, "sha256": hashlib.sha256(data).hexdigest(),
                         "variables": sorted(values)}
    index = tmp_path / "ckpt-5.index"
    index.write_text(json.dumps({"format": 1, "step": 5, "shards": shards or records}))
    (tmp_path / "checkpoint").write_text(json.dumps({"checkpoints": [index.name]}))
    return index, records


def test_a_sharded_checkpoint_restores_in_one_process(tmp_path):
    index, _ = _sharded(tmp_path)
    assert saver_module.latest_checkpoint(tmp_path) == str(index)
    saver, sess, _ = _saved(tmp_path / "other")
    saver.restore(sess, index)
    np.testing.assert_array_equal(sess.variables.read("w"), np.arange(3))
    np.testing.assert_array_equal(sess.variables.read("v"), [7, 7])


@pytest.mark.parametrize("change, words", [
    (lambda r: r["/job:ps/task:0"].update(file="../outside.shard"), "not a checkpoint file in"),
    (lambda r: r["/job:ps/task:0"].update(file="checkpoint"), "not a checkpoint file in"),
    (lambda r: r["/job:ps/task:1"].update(sha256="0" * 64), "sha256 differs"),
    (lambda r: r["/job:ps/task:1"].pop("sha256"), "is not {\"file\""),
    (lambda r: r.update({"/job:ps/task:1": {"file": "ckpt-5.index", "sha256":
                                            "x"}}), "sha256 differs"),
])
def test_a_crafted_sharded_index_is_refused_naming_it(tmp_path, change, words):
    _, records = _sharded(tmp_path)
    change(records)
    index, _ = _sharded(tmp_path, records)
    with pytest.raises(OpsdkError, match=words.replace("(", r"\(").replace("{", r"\{")) as err:
        read_checkpoint(index)
    assert str(tmp_path) in str(err.value)


def test_a_shard_must_be_a_file_of_arrays_not_another_index(tmp_path):
    index, records = _sharded(tmp_path)
    inner = tmp_path / "inner.index"
    inner.write_text(index.read_text())
    records["/job:ps/task:1"] = {"file": inner.name,
                                 "sha256": hashlib.sha256(inner.read_bytes()).hexdigest()}
    index, _ = _sharded(tmp_path, records)
    with pytest.raises(OpsdkError, match="not an opsdk checkpoint"):
        read_checkpoint(index)
