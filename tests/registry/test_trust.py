"""Python that a workspace names (shape_fn, python kernels) comes only from the workspace's files."""

from __future__ import annotations

import pytest

from opsdk.registry import OpsdkError, load_callable, parse_opdef

DECL = """
op: foo
summary: Foo.
shape_fn: shapes.py:same
inputs: {x: {dtype: float32}}
outputs: {y: {dtype: float32}}
kernels: {python: kernels.py:foo}
"""


def test_a_symlink_out_of_the_workspace_is_not_imported(ws, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("raise SystemExit('imported code from outside the workspace')\n")
    (ws.opdefs / "shapes.py").symlink_to(outside)
    [spec] = parse_opdef(ws.write("foo.yaml", DECL), ws.root)  # lexically inside: parses
    with pytest.raises(OpsdkError, match=r"op 'foo': shape_fn 'opdefs/shapes.py:same' does not name a \.py "
                                         r"file inside the workspace .*; a shape_fn resolves only to the "
                                         r"workspace's files"):
        load_callable(spec, spec.shape_fn, "shape_fn")


def test_a_file_of_the_workspace_is_loaded(ws):
    (ws.opdefs / "shapes.py").write_text("def same(shapes, attrs):\n    return [shapes['x']]\n")
    [spec] = parse_opdef(ws.write("foo.yaml", DECL), ws.root)
    assert load_callable(spec, spec.shape_fn, "shape_fn")({"x": (2,)}, {}) == [(2,)]
