"""Ops namespaced by workspace, and one bad declaration never breaking the others."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from opsdk.registry import OpDefErrors, OpsdkError, Workspace, load_registry
from opsdk.registry.workspace import folder_namespace

SCALE = """
op: {name}
summary: y = {factor} * x.
type_attrs: {{T: [float32, float64]}}
inputs:
  x: {{dtype: T, shape: [n]}}
outputs:
  y: {{dtype: T, shape: [n]}}
gradient: {grad}
kernels: {{python: kernels.py:{name}}}
reference: "{factor} * x"
"""

SCALE_GRAD = """
op: {name}_grad
summary: The gradient of {name}.
type_attrs: {{T: [float32, float64]}}
inputs:
  x: {{dtype: T, shape: [n]}}
  grad_y: {{dtype: T, shape: [n]}}
outputs:
  grad_x: {{dtype: T, shape: [n]}}
kernels: {{python: kernels.py:{name}_grad}}
"""


def make_workspace(root, ops: dict, name=None):
    """A generated workspace of python-kernel ops `{op name: factor}` (each with a gradient op)."""
    from opsdk.codegen.generate import generate_workspace

    (root / "opdefs").mkdir(parents=True)
    kernels = []
    for op, factor in ops.items():
        (root / "opdefs" / f"{op}.yaml").write_text(
            SCALE.format(name=op, factor=factor, grad=f"{op}_grad") + "---\n" + SCALE_GRAD.format(name=op))
        kernels.append(f"def {op}(xp, x):\n    return {factor} * x\n\n"
                       f"def {op}_grad(xp, x, grad_y):\n    return {factor} * grad_y\n")
    (root / "opdefs" / "kernels.py").write_text("\n".join(kernels))
    if name is not None:
        (root / "opsdk.yaml").write_text(f"name: {name}\n")
    generate_workspace(root)
    return root


def test_the_namespace_is_the_workspace_file_name_else_the_folder(tmp_path):
    assert Workspace(tmp_path / "My-Ops 2").namespace == "my_ops_2"
    assert folder_namespace("2024") == "ws_2024" and folder_namespace("opsdk") == "opsdk_ws"
    assert folder_namespace("class") == "class_ws" and folder_namespace("--") == "ws"
    root = make_workspace(tmp_path / "folder", {"foo": 3.0}, name="geo")
    registry = load_registry(root)
    assert registry.namespace == "geo" and registry.get("foo").qualified_name == "geo::foo"
    assert registry.get("geo::foo") is registry.get("foo")
    assert load_registry().get("add").qualified_name == "opsdk::add"


@pytest.mark.parametrize("text, message", [
    ("name: opsdk\n", "opsdk.yaml:1: workspace name 'opsdk' is the builtin ops' namespace; choose another, "
                      "like 'my_opsdk'"),
    ("name: My-Ops\n", "opsdk.yaml:1: workspace name 'My-Ops' must be lower_snake_case ([a-z][a-z0-9_]*), "
                       "like 'my_ops'"),
    ("name: class\n", "opsdk.yaml:1: workspace name 'class' is a Python keyword, which the generated "
                      "wrapper cannot take as a name; choose another"),
    ("nmae: geo\n", "opsdk.yaml:1: unknown key 'nmae' in the workspace file (did you mean 'name'?)"),
    ("name: [a\n", "opsdk.yaml:2:"),
])
def test_a_wrong_workspace_file_is_a_located_error(tmp_path, text, message):
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opsdk.yaml").write_text(text)
    for strict in (True, False):
        with pytest.raises(OpDefErrors) as info:
            load_registry(tmp_path, strict=strict)
        assert str(info.value).startswith(message)


def test_a_user_op_shadows_the_builtin_of_its_name_in_its_workspace_only(tmp_path):
    import opsdk

    root = make_workspace(tmp_path / "mine", {"pairwise_manhattan": 5.0, "add": 7.0})
    registry = load_registry(root)
    assert registry.get("pairwise_manhattan").qualified_name == "mine::pairwise_manhattan"
    assert registry.get("opsdk::pairwise_manhattan").workspace != root.resolve()
    assert registry.gradient_of("add").qualified_name == "mine::add_grad"
    ops = opsdk.load_ops(root)
    x = np.arange(3.0)
    np.testing.assert_array_equal(ops.add(x), 7.0 * x)  # the workspace's one-input add
    np.testing.assert_array_equal(ops.pairwise_manhattan(x), 5.0 * x)
    builtin = opsdk.load_ops(load_registry().get("add").workspace)
    np.testing.assert_array_equal(builtin.add(x, x), 2 * x)


def test_two_workspaces_with_an_op_of_one_name_in_one_graph(tmp_path):
    import opsdk
    from opsdk.runtime.autodiff.gradients import gradients

    first = opsdk.load_ops(make_workspace(tmp_path / "ws_a", {"foo": 2.0}))
    second = opsdk.load_ops(make_workspace(tmp_path / "ws_b", {"foo": 10.0}))
    assert first is not second and first.__name__ != second.__name__
    graph = opsdk.Graph()
    with graph.as_default():
        x = opsdk.placeholder("float64", [3], name="x")
        a, b = first.foo(x), second.foo(x)
        total = a + b
        grad, = gradients(total, [x])
    assert (a.op.type, b.op.type) == ("foo", "foo")  # shown unqualified
    assert (a.op.spec.qualified_name, b.op.spec.qualified_name) == ("ws_a::foo", "ws_b::foo")
    with opsdk.Session(graph) as sess:
        out, g = sess.run([total, grad], {x: np.ones(3)})
    np.testing.assert_array_equal(out, [12.0] * 3)
    np.testing.assert_array_equal(g, [12.0] * 3)  # each foo's own gradient op


def test_graph_files_carry_qualified_names_and_old_files_still_load(tmp_path):
    import opsdk
    from opsdk.runtime.io.serialize import GraphFileError, export_graph, import_graph

    root = make_workspace(tmp_path / "geo_ws", {"pairwise_manhattan": 5.0})
    ops = opsdk.load_ops(root)
    graph = opsdk.Graph()
    with graph.as_default():
        x = opsdk.placeholder("float64", [3], name="x")
        y = ops.pairwise_manhattan(x, name="y") * 2.0
    text = export_graph(graph)
    kinds = {n["name"]: n["op"] for n in json.loads(text)["nodes"]}
    assert kinds["y"] == "geo_ws::pairwise_manhattan" and "opsdk::mul" in kinds.values()
    registry = load_registry(root)
    imported = import_graph(text, registry)
    assert imported.get_operation("y").spec is registry.get("pairwise_manhattan")
    old = text.replace('"geo_ws::pairwise_manhattan"', '"pairwise_manhattan"').replace('"opsdk::mul"', '"mul"')
    for g in (imported, import_graph(old, registry)):
        with opsdk.Session(g) as sess:
            np.testing.assert_array_equal(sess.run(y.name, {"x:0": np.ones(3)}), [10.0] * 3)
    with pytest.raises(GraphFileError, match=r"node 'y' \(geo_ws::pairwise_manhattan\): op "
                                             r"'geo_ws::pairwise_manhattan' is in namespace 'geo_ws', whose "
                                             r"workspace this registry does not hold"):
        import_graph(text)


def test_a_graph_file_mixing_two_workspaces_imports_with_both_registries(tmp_path):
    import opsdk
    from opsdk.runtime.io.serialize import GraphFileError, export_graph, import_graph

    roots = make_workspace(tmp_path / "ws_a", {"foo": 2.0}), make_workspace(tmp_path / "ws_b", {"foo": 10.0})
    first, second = (opsdk.load_ops(r) for r in roots)
    graph = opsdk.Graph()
    with graph.as_default():
        x = opsdk.placeholder("float64", [3], name="x")
        total = first.foo(x, name="a") + second.foo(x, name="b")
    text = export_graph(graph)
    registries = [load_registry(r) for r in roots]
    imported = import_graph(text, registries)
    assert imported.get_operation("a").spec is registries[0].get("foo")
    assert imported.get_operation("b").spec is registries[1].get("foo")
    with opsdk.Session(imported) as sess:
        np.testing.assert_array_equal(sess.run(total.name, {"x:0": np.ones(3)}), [12.0] * 3)
    with pytest.raises(GraphFileError, match=r"node 'b' \(ws_b::foo\): op 'ws_b::foo' is in namespace "
                                             r"'ws_b', whose workspace this registry does not hold; .* or "
                                             r"a list of registries"):
        import_graph(text, registries[:1])


BROKEN = "op: bad\nsummary: broken.\ninputs:\n  x: {dtype: float99, shape: [n]}\nkernels: {python: kernels.py:bad}\n"


def test_one_bad_file_leaves_the_others_usable(tmp_path):
    import opsdk

    root = make_workspace(tmp_path / "ws", {"good": 3.0})
    (root / "opdefs" / "bad.yaml").write_text(BROKEN)
    with pytest.raises(OpDefErrors, match=r"^opdefs/bad.yaml:4: op 'bad': input 'x': unknown dtype 'float99'"):
        load_registry(root)
    registry = load_registry(root, strict=False)
    assert list(registry.broken) == ["opdefs/bad.yaml"] and len(registry.errors) == 1
    assert registry.get("good").name == "good"
    with pytest.raises(OpDefErrors, match=r"^opdefs/bad.yaml:4: op 'bad'"):
        registry.get("bad")
    with pytest.warns(UserWarning, match=r"opdefs/bad.yaml has declaration errors; the ops declared there") as caught:
        ops = opsdk.load_ops(root)
    assert [w.filename for w in caught if "bad.yaml" in str(w.message)] == [__file__]  # the load_ops line, not opsdk's
    np.testing.assert_array_equal(ops.good(np.arange(3.0)), [0.0, 3.0, 6.0])


def test_a_syntax_error_sets_its_file_aside_under_its_stem(tmp_path):
    root = make_workspace(tmp_path / "ws", {"good": 3.0})
    (root / "opdefs" / "broken_op.yaml").write_text("op: broken_op\nsummary: [unclosed\n")
    registry = load_registry(root, strict=False)
    with pytest.raises(OpDefErrors, match=r"^opdefs/broken_op.yaml:\d+:"):
        registry.get("broken_op")
    with pytest.raises(OpsdkError, match=r"no op named 'nothing'; opdefs/broken_op.yaml has declaration "
                                         r"errors and may declare it"):
        registry.get("nothing")


def test_an_op_whose_gradient_op_is_broken_is_set_aside_with_a_derived_error(tmp_path):
    root = make_workspace(tmp_path / "ws", {"fine": 3.0, "chain": 2.0})
    grad = root / "opdefs" / "chain_grad.yaml"
    text = (root / "opdefs" / "chain.yaml").read_text()
    forward, backward = text.split("---\n")
    (root / "opdefs" / "chain.yaml").write_text(forward)
    grad.write_text(backward.replace("dtype: T, shape: [n]}\noutputs", "dtype: T, shape: [n], oops: 1}\noutputs"))
    registry = load_registry(root, strict=False)
    assert list(registry.broken) == ["opdefs/chain.yaml", "opdefs/chain_grad.yaml"]
    with pytest.raises(OpDefErrors, match=r"gradient op 'chain_grad' is declared in opdefs/chain_grad.yaml, "
                                          r"which has errors; fix them first"):
        registry.get("chain")
    assert registry.gradient_of("fine").name == "fine_grad"


def test_a_broken_user_op_never_falls_back_to_the_builtin_of_its_name(tmp_path):
    root = make_workspace(tmp_path / "ws", {"good": 3.0})
    (root / "opdefs" / "add.yaml").write_text(BROKEN.replace("bad", "add"))
    registry = load_registry(root, strict=False)
    with pytest.raises(OpDefErrors, match=r"^opdefs/add.yaml:4: op 'add'"):
        registry.get("add")
    assert registry.get("opsdk::add").namespace == "opsdk"


def test_the_cli_reports_broken_files_and_lists_the_good_ops(tmp_path, capsys):
    from opsdk.cli.main import main

    root = make_workspace(tmp_path / "ws", {"good": 3.0})
    (root / "opdefs" / "bad.yaml").write_text(BROKEN)
    assert main(["-C", str(root), "list"]) == 1
    out, err = capsys.readouterr()
    assert "ws::good" in out and "opdefs/bad.yaml:4: error: op 'bad': input 'x': unknown dtype 'float99'" in err
    for command in ("generate", "build"):
        assert main(["-C", str(root), command]) == 1
        out, err = capsys.readouterr()
        assert "opdefs/bad.yaml:4: error: op 'bad'" in err and "Traceback" not in err
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_registry(root, strict=False).get("good")


def test_gradcheck_reports_and_checks_the_workspace_op_not_its_builtin_namesake(tmp_path):
    from opsdk.gradcheck.report import table_rows
    from opsdk.gradcheck.runner import run_gradcheck

    root = make_workspace(tmp_path / "geo", {"add": 3.0})
    registry = load_registry(root)
    report = run_gradcheck(registry, ["add", "opsdk::add"], max_examples=2)
    assert report.ok
    assert sorted({row[0] for row in table_rows(report)}) == ["geo::add", "opsdk::add"]
