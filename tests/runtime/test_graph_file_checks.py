"""A crafted graph file cannot make a step compute silently wrong results: every recorded output
is what the node gives, every attr value has exactly its type, collections are checked; each
mistake is a GraphFileError naming the node or collection and the field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.io.serialize import GraphFileError, export_graph, import_graph
from opsdk.runtime.ir.graph import Graph, placeholder


def _document() -> dict:
    graph = Graph()
    with graph.as_default():
        w = Variable(np.ones(3, np.float32), name="w")
        x = placeholder("float32", [3], name="x")
        graph.create_op("identity", [x], {}, [(x.shape, x.dtype)], name="same")
        w.assign(x, name="store")
        global_variables_initializer()
    return json.loads(export_graph(graph))


def _node(doc: dict, name: str) -> dict:
    return next(n for n in doc["nodes"] if n["name"] == name)


def _refused(doc: dict, words: str) -> None:
    with pytest.raises(GraphFileError) as info:
        import_graph(json.dumps(doc))
    assert words in str(info.value)


def test_the_untouched_file_imports():
    import_graph(json.dumps(_document()))


def test_an_assign_recorded_with_another_dtype_than_its_variable_is_refused():
    doc = _document()
    _node(doc, "store")["outputs"][0]["dtype"] = "float64"
    _refused(doc, "node 'store' (assign): output 0 is float32 but the file says float64")


def test_an_identity_recorded_with_another_shape_than_its_input_is_refused():
    doc = _document()
    _node(doc, "same")["outputs"][0]["shape"] = [2, 2]
    _refused(doc, "node 'same' (identity): output 0 has shape [3] but the file says [2, 2]")


def test_a_declared_ops_recorded_shape_is_checked_too():
    graph = Graph()
    with graph.as_default():
        x = placeholder("float32", [3], name="x")
        _ = x * 2.0  # a declared op's node
    doc = json.loads(export_graph(graph))
    mul = next(n for n in doc["nodes"] if n["op"].endswith("mul"))
    mul["outputs"][0]["shape"] = [4]
    _refused(doc, f"node '{mul['name']}' ({mul['op']}): output 0 has shape [3] but the file "
                  "says [4]")


@pytest.mark.parametrize("attr, words", [
    ({"type": "bool", "value": "false"}, "a bool attr's value must be a JSON true or false, not "
                                         "'false'"),
    ({"type": "int", "value": True}, "a int attr's value must be a JSON integer, not True"),
    ({"type": "int", "value": 1.5}, "a int attr's value must be a JSON integer, not 1.5"),
    ({"type": "str", "value": 5}, "a str attr's value must be a JSON string, not 5"),
    ({"type": "float", "value": "1e3"}, "a float attr's value must be a JSON number"),
    ({"type": "shape", "value": {"3": 1}}, "a shape attr's value must be a list of ints and "
                                           "nulls, not {'3': 1}"),
    ({"type": "dtype", "value": "O"}, "dtype 'O' is not a dtype name"),
    ({"type": "tensor", "dtype": "float33", "shape": [1], "value": [1]},
     "dtype 'float33' is not a dtype name"),
    ({"type": "tensor", "dtype": "float32", "shape": [-1], "value": [1]},
     "shape [-1] must be a list of non-negative ints"),
])
def test_an_attr_value_must_have_exactly_its_type(attr, words):
    doc = _document()
    _node(doc, "store")["attrs"]["extra"] = attr
    _refused(doc, f"node 'store' (assign): attr 'extra': {words}")


@pytest.mark.parametrize("collections, words", [
    ([1], "\"collections\" must be an object of lists, not [1]"),
    ({"things": 5}, "collection 'things': must be a list of items, not 5"),
    ({"things": [5]}, "collection 'things', item 0: must be an object with \"kind\" and \"name\""),
    ({"things": [{"kind": "tensor"}]}, "collection 'things', item 0: \"name\" must be a string"),
    ({"things": [{"kind": "tensor", "name": "gone:0"}]}, "collection 'things', item 0: "),
    ({"variables": [{"kind": "variable", "name": "x", "initializer": "store",
                     "trainable": True}]},
     "variable 'x' must name a variable node and its initializer an assign node of it"),
])
def test_collections_are_checked(collections, words):
    doc = _document()
    doc["collections"] = collections
    _refused(doc, words)


def test_an_output_dtype_that_is_no_dtype_name_is_refused():
    doc = _document()
    _node(doc, "same")["outputs"][0]["dtype"] = "float32; import os"
    _refused(doc, "node 'same': output 0: dtype 'float32; import os' is not a dtype name (bool, ")


@pytest.mark.parametrize("recorded, words", [
    ([1, 1], "attr recorded must list distinct loop variable positions 0..1"),
    ([5], "attr recorded must list distinct loop variable positions"),
    ([], "attr recorded must list distinct loop variable positions"),
    ("1", "attr recorded must list distinct loop variable positions"),
])
def test_a_loops_recorded_variables_must_be_its_own(recorded, words):
    from opsdk.runtime.control_flow.builders import while_loop
    graph = Graph()
    with graph.as_default():
        x = placeholder("float32", [3], name="x")
        while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * x), [0, x],
                   keep_intermediates=[1], name="loop")
    doc = json.loads(export_graph(graph))
    import_graph(json.dumps(doc))  # as written, it imports
    _node(doc, "loop")["attrs"]["recorded"] = (
        {"type": "str", "value": recorded} if isinstance(recorded, str) else
        {"type": "list", "value": [{"type": "int", "value": v} for v in recorded]})
    _refused(doc, words)


@pytest.mark.parametrize("shapes, words", [
    ([0], "attr shape_histories must list recorded loop variables of known rank"),
    ([7], "attr shape_histories must list recorded loop variables of known rank"),
    ("1", "attr shape_histories must list recorded loop variables of known rank"),
])
def test_a_loops_shape_histories_must_be_recorded_variables(shapes, words):
    """A loop whose gradient reads a variable only for its shape records its shapes (attr
    shape_histories, control_flow/builders.py); a graph file must name recorded variables."""
    from opsdk.runtime.control_flow.builders import record_intermediates, while_loop
    graph = Graph()
    with graph.as_default():
        x = placeholder("float32", [3], name="x")
        _, y = while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * x), [0, x],
                          keep_intermediates=[1], name="loop")
    record_intermediates(y.op, shapes_only=[0])  # i's history: its shapes, () per iteration
    assert y.op.attrs["shape_histories"] == [0]
    doc = json.loads(export_graph(graph))
    imported = import_graph(json.dumps(doc))  # as written, it imports
    assert imported.get_operation("loop").outputs[-1].dtype == "int64"
    _node(doc, "loop")["attrs"]["shape_histories"] = (
        {"type": "str", "value": shapes} if isinstance(shapes, str) else
        {"type": "list", "value": [{"type": "int", "value": v} for v in shapes]})
    _node(doc, "loop")["attrs"]["recorded"] = {"type": "list", "value": [
        {"type": "int", "value": 1}, {"type": "int", "value": 0}]}
    if shapes == [0]:  # valid as such; refused once the loop no longer keeps intermediates
        _node(doc, "loop")["attrs"]["keep_intermediates"] = {"type": "bool", "value": False}
    _refused(doc, words)
