"""DOT rendering: labels, clusters, control edges, determinism; `render` and `opsdk graph`."""

from __future__ import annotations

import shutil
import stat

import pytest

from opsdk.cli.main import main
from opsdk.runtime.io import dot as dot_module
from opsdk.runtime.control_flow.builders import cond, while_loop
from opsdk.runtime.io.dot import render, to_dot
from opsdk.runtime.ir.graph import Graph, control_dependencies, placeholder
from opsdk.runtime.io.serialize import save_graph


def build(registry) -> Graph:
    """A small graph with nested name scopes, a control edge and both control-flow nodes."""
    g = Graph()
    with g.as_default():
        x = placeholder("float32", shape=[None, 3], name="x")
        with g.name_scope("model"), g.name_scope("layer"):
            y = x * 2.0
        with control_dependencies([y]):
            z = -x
        p = placeholder("bool", shape=[], name="p")
        cond(p, lambda: y + 1.0, lambda: z, name="pick")
        while_loop(lambda i: i < 3, lambda i: i + 1, [0], name="count")
    return g


def test_nodes_edges_and_control_edges(registry):
    text = to_dot(build(registry))
    assert text.startswith('digraph "graph" {') and text.endswith("}\n")
    assert '"model/layer/mul" [label="mul\\nmodel/layer/mul"];' in text
    assert '"x" -> "model/layer/mul" [label="float32[?,3]"];' in text
    assert '"model/layer/mul" -> "neg" [style=dashed, arrowhead=odot];' in text


def test_name_scopes_become_nested_clusters(registry):
    lines = to_dot(build(registry)).splitlines()
    outer = lines.index('  subgraph "cluster_model/" {')
    inner = lines.index('    subgraph "cluster_model/layer/" {')
    node = lines.index('      "model/layer/mul" [label="mul\\nmodel/layer/mul"];')
    assert outer < inner < node
    assert lines[inner + 1].strip().startswith('label="model/layer";')


def test_control_flow_sub_graphs_are_clusters(registry):
    text = to_dot(build(registry))
    for key in ("pick.then_branch", "pick.else_branch", "count.cond", "count.body"):
        assert f'subgraph "cluster_{key}/" {{' in text
    assert '"pick.then_branch/add" -> "pick" [style=dotted, arrowhead=empty];' in text
    # the captured outer tensor feeds the branch's placeholder
    assert '"model/layer/mul" -> "pick.then_branch/capture_model_layer_mul" [style=dotted' in text
    assert '"count.body/arg0" -> "count.body/add" [label="int64[]"];' in text


def test_output_is_deterministic(registry):
    assert to_dot(build(registry)) == to_dot(build(registry))


def test_render_dot_file(registry, tmp_path):
    result = render(build(registry), tmp_path / "g.dot")
    assert result.svg_path is None
    assert (tmp_path / "g.dot").read_text() == to_dot(build(registry))


def test_render_svg_without_graphviz_says_so(registry, tmp_path, monkeypatch):
    monkeypatch.setattr(dot_module.shutil, "which", lambda name: None)
    result = render(build(registry), tmp_path / "g.svg")
    assert result.svg_path is None and (tmp_path / "g.dot").is_file()
    assert "Graphviz's `dot` is not installed" in result.note


def test_render_svg_calls_graphviz(registry, tmp_path):
    fake = tmp_path / "fake_dot"  # records its arguments, writes the -o file
    fake.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\n'
                    'while [ "$1" != "-o" ]; do shift; done\necho "<svg/>" > "$2"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    result = render(build(registry), tmp_path / "g.svg", dot_binary=str(fake))
    assert result.svg_path == tmp_path / "g.svg" and result.svg_path.read_text() == "<svg/>\n"
    assert (tmp_path / "args").read_text().split() == [
        "-Tsvg", str(tmp_path / "g.dot"), "-o", str(tmp_path / "g.svg")]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's `dot` is not installed")
def test_real_graphviz_accepts_the_text(registry, tmp_path):
    result = render(build(registry), tmp_path / "g.svg")
    assert "<svg" in result.svg_path.read_text()


def test_cli_prints_and_writes(registry, tmp_path, capsys):
    path = save_graph(build(registry), tmp_path / "model.json")
    assert main(["graph", str(path)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith('digraph "model" {') and '"pick" [label="cond\\npick"' in printed
    assert main(["graph", str(path), "-o", str(tmp_path / "out.dot")]) == 0
    assert (tmp_path / "out.dot").read_text().count("->") == printed.count("->")


def test_cli_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "opsdk-graph", "version": 1, "nodes": [{"name": "y", "op": "neg",'
                   ' "inputs": ["gone:0"]}]}')
    assert main(["graph", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"opsdk graph: error: {bad}: node 'y': input 'gone:0' names no node in the file"


def test_the_cli_draws_the_file_as_data_exactly_as_the_graph_draws(registry, tmp_path, capsys):
    from opsdk.runtime.io.graph_data import load_graph_data
    graph = build(registry)
    path = save_graph(graph, tmp_path / "model.json")
    assert to_dot(load_graph_data(path), title="model") == to_dot(graph, title="model")
    assert main(["graph", str(path)]) == 0
    assert capsys.readouterr().out == to_dot(graph, title="model")


def _named(doc, name):
    return next(n for n in doc["nodes"] if n["name"] == name)


def _crafted(tmp_path, registry, change):
    import json
    path = save_graph(build(registry), tmp_path / "g.json")
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("change, words", [
    (lambda d: d.update(collections=[1]), "\"collections\" must be an object of lists, not [1]"),
    (lambda d: d.update(collections={"c": [5]}),
     "collection 'c', item 0: must be an object with \"kind\" and \"name\", not 5"),
    (lambda d: d.update(collections={"c": [{"kind": "tensor", "name": "x:7"}]}),
     "collection 'c', item 0: names no tensor of the file"),
    (lambda d: d.update(collections={"variables": [{"kind": "variable", "name": "x",
                                                     "initializer": "neg", "trainable": True}]}),
     "collection 'variables', item 0: variable 'x' must name a variable node and its "
     "initializer an assign node"),
    (lambda d: d["nodes"][0]["outputs"][0].update(dtype="float32; import os"),
     "node 'x': output 0: dtype 'float32; import os' is not a dtype name (bool, "),
    (lambda d: d["nodes"][0]["outputs"][0].update(shape={"3": 1}),
     "node 'x': output 0: shape {'3': 1} must be a list of non-negative ints and nulls, or null"),
    (lambda d: _named(d, "neg")["inputs"].__setitem__(0, "x:3"),
     "node 'neg' (opsdk::neg): input 'x:3': node 'x' has 1 output(s)"),
    (lambda d: _named(d, "neg")["attrs"].update(k={"type": "bool", "value": "false"}),
     "attr 'k': a bool attr's value must be a JSON true or false, not 'false'"),
])
def test_the_cli_reports_a_crafted_file_in_one_located_line(registry, tmp_path, capsys, change,
                                                             words):
    path = _crafted(tmp_path, registry, change)
    assert main(["graph", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"opsdk graph: error: {path}: ") and words in err
