"""The GraphDef of a graph (opsdk/v1/graph_def.py): a FileWriter writes it to the event file for
TensorBoard, with each node's name, op type, inputs, device and output shapes."""

from __future__ import annotations

import importlib.util

import pytest

import opsdk.v1 as tf
from opsdk.v1 import events
from protobuf_fields import fields


def _graph_nodes(path) -> list[dict]:
    """The nodes of the GraphDef event in an event file: name, op, inputs, device, and the dims
    of each output's shape (from attr _output_shapes)."""
    [graph] = [fields(r)[4][0] for r in events.read_records(path) if 4 in fields(r)]
    nodes = []
    for raw in fields(graph)[1]:
        node = fields(raw)
        shapes = []
        for entry in node.get(5, []):  # map entries: key 1, AttrValue 2 holding a list (1)
            attr = fields(entry)
            assert attr[1] == [b"_output_shapes"]
            for shape in fields(fields(attr[2][0])[1][0]).get(7, []):
                dims = [fields(d).get(1, [0])[0] for d in fields(shape).get(2, [])]
                shapes.append([d - (1 << 64) if d >= 1 << 63 else d for d in dims])
        nodes.append({"name": node[1][0].decode(), "op": node[2][0].decode(),
                      "inputs": [i.decode() for i in node.get(3, [])],
                      "device": node.get(4, [b""])[0].decode(), "shapes": shapes})
    return nodes


def test_the_graph_goes_to_the_event_file_for_tensorboard(tmp_path):
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    with tf.device("/cpu:0"):
        w = tf.Variable(tf.ones([3, 2]), name="w")
    y = tf.matmul(x, w, name="y")
    with tf.control_dependencies([y]):
        done = tf.no_op(name="done")
    writer = tf.summary.FileWriter(str(tmp_path), tf.get_default_graph())
    writer.close()
    nodes = {n["name"]: n for n in _graph_nodes(writer.path)}
    assert set(nodes) == {op.name for op in tf.get_default_graph().get_operations()}
    assert nodes["y"]["op"] == "matmul" and nodes["y"]["inputs"][0] == "x"
    assert nodes["y"]["shapes"] == [[-1, 2]]
    assert nodes["done"]["inputs"] == ["^y"] and nodes["done"]["shapes"] == []
    assert nodes["w"]["device"].endswith("CPU:0")
    with pytest.raises(tf.OpsdkError, match="give a tf.Graph"):
        tf.summary.FileWriter(str(tmp_path)).add_graph("graph")


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow is not installed (pip install opsdk[tf]): nothing to "
                           "read the graph with but this module")
def test_tensorflow_reads_the_graph_from_the_event_file(tmp_path):
    import tensorflow as real_tf

    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    tf.nn.softmax(tf.matmul(x, tf.Variable(tf.zeros([4, 2]), name="w")), name="probs")
    writer = tf.summary.FileWriter(str(tmp_path), tf.get_default_graph())
    writer.close()
    [graph] = [e.graph_def for e in real_tf.compat.v1.train.summary_iterator(str(writer.path))
               if e.graph_def]
    parsed = real_tf.compat.v1.GraphDef.FromString(graph)
    ours = {op.name: op for op in tf.get_default_graph().get_operations()}
    assert [n.name for n in parsed.node] == list(ours)
    probs = next(n for n in parsed.node if n.name == "probs")
    assert probs.op == ours["probs"].type and list(probs.input) == [ours["probs"].inputs[0].op.name]
    assert [d.size for d in probs.attr["_output_shapes"].list.shape[0].dim] == [-1, 2]


def _model():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.Variable(tf.zeros([3, 2]), name="w")
    y = tf.matmul(x, w, name="y")
    with tf.control_dependencies([y]):
        tf.no_op(name="done")
    return y


def test_as_graph_def_describes_the_graph_and_write_graph_writes_it(tmp_path):
    y = _model()
    graph = tf.get_default_graph()
    graph_def = graph.as_graph_def()
    with tf.Session() as sess:
        assert [n.name for n in sess.graph_def.node] == [n.name for n in graph_def.node]
    nodes = {n.name: n for n in graph_def.node}
    assert [n.name for n in graph_def.node] == [op.name for op in graph.get_operations()]
    assert nodes["y"].op == "matmul" and nodes["y"].input == ["x", "w"]
    assert nodes["y"].output_shapes == [[-1, 2]] and nodes["done"].input == ["^y"]
    binary = tf.train.write_graph(graph_def, str(tmp_path / "out"), "g.pb", as_text=False)
    assert open(binary, "rb").read() == graph_def.SerializeToString()
    assert len(graph_def.SerializeToString()) == graph_def.ByteSize()
    text = tf.train.write_graph(graph, str(tmp_path / "out"), "g.pbtxt")  # a Graph too
    written = open(text).read()
    assert 'name: "y"\n  op: "matmul"\n  input: "x"\n  input: "w"' in written
    assert 'input: "^y"' in written and written.endswith("versions {\n  producer: 27\n}\n")
    # the event file takes the GraphDef as well as the graph
    writer = tf.summary.FileWriter(str(tmp_path))
    writer.add_graph(None, graph_def=graph_def)
    writer.close()
    assert [n["name"] for n in _graph_nodes(writer.path)] == list(nodes)
    with pytest.raises(tf.OpsdkError, match="write_graph: give a tf.Graph"):
        tf.train.write_graph("graph", str(tmp_path), "x.pbtxt")


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow is not installed (pip install opsdk[tf]): nothing to "
                           "parse the files with but this module")
def test_tensorflow_parses_both_forms_that_write_graph_writes(tmp_path):
    from google.protobuf import text_format
    import tensorflow as real_tf

    _model()
    graph_def = tf.get_default_graph().as_graph_def()
    binary = real_tf.compat.v1.GraphDef.FromString(open(tf.train.write_graph(
        graph_def, str(tmp_path), "g.pb", as_text=False), "rb").read())
    text = text_format.Parse(open(tf.train.write_graph(graph_def, str(tmp_path), "g.pbtxt")).read(),
                             real_tf.compat.v1.GraphDef())
    assert binary == text
    assert [(n.name, n.op, list(n.input)) for n in text.node] == [
        (n.name, n.op, n.input) for n in graph_def.node]
    assert text.versions.producer == 27
