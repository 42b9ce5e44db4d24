"""Graph export/import: deterministic text, round trips that run to the same values (control
flow and variables included), typed attrs, and clear errors for bad files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.control_flow.builders import cond, while_loop
from opsdk.runtime.ir.graph import Graph, constant, placeholder
from opsdk.runtime.io.serialize import (VERSION, GraphFileError, decode_attr, encode_attr,
                                     export_graph, import_graph, load_graph, save_graph)
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.variables import Variable, global_variables, global_variables_initializer

F32 = np.float32


def round_trip(graph: Graph, registry) -> Graph:
    text = export_graph(graph)
    imported = import_graph(text, registry)
    assert export_graph(imported) == text  # nothing lost or reordered on the way
    return imported


def run_both(graph, imported, fetches, feeds, setup=None):
    """The same fetches (by name) on both graphs, each in a fresh session."""
    results = []
    for g in (graph, imported):
        with Session(g) as sess:
            if setup:
                sess.run(setup)
            results.append(sess.run(fetches, feeds))
    return results


def test_export_is_deterministic_and_versioned(graph):
    x = placeholder("float32", shape=[None, 3], name="x")
    y = x * 2.0 + 1.0
    first, second = export_graph(graph), export_graph(graph)
    assert first == second
    doc = json.loads(first)
    assert doc["format"] == "opsdk-graph" and doc["version"] == VERSION
    assert [n["name"] for n in doc["nodes"]][:1] == ["x"]
    assert doc["nodes"][0]["outputs"] == [{"dtype": "float32", "shape": [None, 3]}]
    mul = next(n for n in doc["nodes"] if n["op"] == "opsdk::mul")
    assert mul["inputs"] == ["x:0", "Const:0"]
    assert doc["nodes"][-1]["name"] == y.op.name


def test_round_trip_runs_to_the_same_values(graph, registry):
    x = placeholder("float32", shape=[None, 3], name="x")
    y = placeholder("float32", shape=[None, 3], name="y")
    with graph.name_scope("dist"):
        d = apply_op(registry, "l1_dist", [x, y], {}, name="l1")
    total = apply_op(registry, "reduce_sum", [d], {"axes": [1]}, name="total")
    s, diff = apply_op(registry, "split_sum", [total, total * 0.5], {}, name="pair")
    imported = round_trip(graph, registry)
    feeds = {"x:0": np.arange(6, dtype=F32).reshape(2, 3), "y:0": np.ones((4, 3), F32)}
    a, b = run_both(graph, imported, ["dist/l1:0", "pair:0", "pair:1"], feeds)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert imported.get_operation("dist/l1").type == "l1_dist"


def test_round_trip_control_flow(graph, registry):
    x = placeholder("float32", shape=[3], name="x")
    p = placeholder("bool", shape=[], name="p")
    c = cond(p, lambda: cond(p, lambda: x * 2.0, lambda: x), lambda: -x, name="c")
    i, s = while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s + c), [0, x], name="loop",
                      keep_intermediates=True)
    imported = round_trip(graph, registry)
    assert imported.get_operation("loop").attrs["body"].graph.outer_graph is imported
    for pred in (True, False):
        a, b = run_both(graph, imported, ["c:0", "loop:0", "loop:1", "loop:3"],
                        {"x:0": np.array([1, 2, 3], F32), "p:0": pred})
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)


def test_round_trip_variables_and_initialisers(graph, registry, tmp_path):
    w = Variable(np.array([1.0, 2.0], F32), name="w")
    step = w.assign_add(np.ones(2, F32), name="bump")
    global_variables_initializer()
    path = save_graph(graph, tmp_path / "g.json")
    imported = load_graph(path, registry)
    assert [v.name for v in global_variables(imported)] == ["w"]
    results = []
    for g in (graph, imported):
        with Session(g) as sess:
            sess.run("init")
            sess.run(g.get_tensor("bump:0"))
            results.append(sess.run("w:0"))
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[1], [2.0, 3.0])
    with Session(imported) as sess:  # the restored collection drives the initializer too
        sess.run(global_variables_initializer(imported))
        np.testing.assert_array_equal(sess.run("w:0"), [1.0, 2.0])
    assert step.op.name == "bump"


@pytest.mark.parametrize("value", [
    None, True, 7, -2.5, float("inf"), float("nan"), "sum", (None, 3), (), [1, 2], [[1.0], "a"],
    np.dtype("float64"), np.float32(1.5), np.arange(6, dtype=np.int32).reshape(2, 3),
    np.linspace(0, 1, 100).astype(F32), np.array([np.nan, 1.0]), np.array([1 + 2j]),
])
def test_attr_values_round_trip_with_their_types(value):
    encoded = encode_attr(value, "test")
    back = decode_attr(json.loads(json.dumps(encoded)), "test", Graph(), None)
    if isinstance(value, float) and np.isnan(value):
        assert isinstance(back, float) and np.isnan(back)
    elif isinstance(value, (np.ndarray, np.generic)):
        assert type(back) is type(value) and back.dtype == value.dtype
        np.testing.assert_array_equal(back, value)
    else:
        assert back == value and type(back) is type(value)


def test_constant_of_a_large_tensor_survives(graph, registry):
    big = constant(np.random.default_rng(0).standard_normal((20, 30)).astype(F32), name="big")
    imported = round_trip(graph, registry)
    a, b = run_both(graph, imported, ["big:0"], {})
    np.testing.assert_array_equal(a[0], b[0])
    assert big.shape == (20, 30)


def _doc(*nodes, version=VERSION):
    return json.dumps({"format": "opsdk-graph", "version": version, "nodes": list(nodes)})


def _node(name, op, inputs=(), attrs=None, outputs=None, control=()):
    return {"name": name, "op": op, "inputs": list(inputs), "control_inputs": list(control),
            "attrs": attrs or {}, "type_attrs": {}, "device": "",
            "outputs": outputs if outputs is not None else [{"dtype": "float32", "shape": [2]}]}


PH = {"shape": {"type": "shape", "value": [2]}, "dtype": {"type": "str", "value": "float32"}}


def test_unknown_op_says_did_you_mean(registry):
    text = _doc(_node("x", "placeholder", attrs=PH), _node("y", "ad", ["x:0", "x:0"]))
    with pytest.raises(GraphFileError, match=r"node 'y' \(ad\): unknown op 'ad' "
                                             r"\(did you mean 'add'\?\)"):
        import_graph(text, registry)


def test_missing_input_node_is_named(registry):
    text = _doc(_node("y", "neg", ["nowhere:0"]))
    with pytest.raises(GraphFileError, match=r"node 'y': input 'nowhere:0' names no node"):
        import_graph(text, registry)


def test_cycle_is_reported(registry):
    text = _doc(_node("a", "neg", ["b:0"]), _node("b", "neg", ["a:0"]))
    with pytest.raises(GraphFileError, match=r"cycle among nodes 'a', 'b'"):
        import_graph(text, registry)


def test_version_mismatch(registry):
    with pytest.raises(GraphFileError, match=r"version 99 is not readable.*reads version 1.*upgrade"):
        import_graph(_doc(version=99), registry)
    with pytest.raises(GraphFileError, match=r"not a graph file"):
        import_graph("[1, 2]", registry)
    with pytest.raises(GraphFileError, match=r"invalid JSON at line 1"):
        import_graph("{", registry)


def test_a_file_that_no_longer_fits_the_op_names_the_node(registry):
    text = _doc(_node("x", "placeholder", attrs=PH),
                _node("s", "reduce_sum", ["x:0"], {"axes": {"type": "list", "value": [
                    {"type": "int", "value": 5}]}}))
    with pytest.raises(OpsdkError, match=r"reduce_sum \(node 's'\)"):
        import_graph(text, registry)


def test_dtype_in_file_must_match_what_the_op_gives(registry):
    text = _doc(_node("x", "placeholder", attrs=PH),
                _node("y", "neg", ["x:0"], outputs=[{"dtype": "int32", "shape": [2]}]))
    with pytest.raises(GraphFileError, match=r"node 'y' \(neg\): output 0 is float32 but the "
                                             r"file says int32"):
        import_graph(text, registry)


def test_missing_file(tmp_path):
    with pytest.raises(GraphFileError, match=r"nope.json: cannot read the graph file"):
        load_graph(tmp_path / "nope.json")


# ---- malformed files: a located error, never a traceback ---------------------------------------
def _file_with(nodes):
    import json
    from opsdk.runtime.io.serialize import FORMAT, VERSION
    return json.dumps({"format": FORMAT, "version": VERSION, "nodes": nodes})


@pytest.mark.parametrize("text, words", [
    (lambda: _file_with([{"name": "a", "op": "exp", "inputs": 5}]),
     "node 'a': \"inputs\" must be a list of 'node:index' strings, not 5"),
    (lambda: _file_with([{"name": "a", "op": "exp", "inputs": [3]}]),
     "node 'a': \"inputs\" must hold strings only"),
    (lambda: _file_with([7]), "node #0: must be an object, not int"),
    (lambda: _file_with([{"name": "a", "op": "const", "attrs": {"value": {"type": "list", "value": 5}}}]),
     "node 'a' (const): attr 'value': a list attr's value must be a JSON list, not 5"),
    (lambda: _file_with([{"name": "a", "op": "exp", "inptus": []}]),
     "node 'a': unknown key 'inptus' (did you mean 'inputs'?)"),
    (lambda: '{"format": ' + "[" * 100000 + "]" * 100000 + "}", "nested too deeply"),
    (lambda: '{"format": ' + "9" * 5000 + "}", "not a graph file: Exceeds the limit"),
    (lambda: _file_with([{"name": "c", "op": "const",
                    "attrs": {"value": {"type": "tensor", "dtype": "float64", "shape": [2],
                                        "value": [1.0, 2.0]}},
                    "outputs": [{"dtype": "float32", "shape": [2]}]}]),
     "node 'c' (const): const (node 'c'): its output is declared float32 but its value is float64"),
])
def test_a_malformed_graph_file_is_a_located_error(text, words):
    from opsdk.runtime.io.serialize import GraphFileError, import_graph
    with pytest.raises(GraphFileError) as info:
        import_graph(text())
    assert words in str(info.value)


def test_the_cli_reports_a_malformed_graph_file_in_one_line(tmp_path, capsys):
    from opsdk.cli.main import main
    path = tmp_path / "g.json"
    path.write_text(_file_with([{"name": "a", "op": "exp", "inputs": 5}]))
    assert main(["graph", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: node 'a': \"inputs\" must be a list" in err
