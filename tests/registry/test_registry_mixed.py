"""A registry assembled from several workspaces (tests and tools do this): a bare name resolves
to the one op of that name, wherever it was declared, and is an error when two share it."""

from __future__ import annotations

import textwrap

import pytest

from opsdk.registry import OpsdkError, Registry, parse_opdef

OP = """
op: {name}
summary: x.
type_attrs:
  T: [float64]
inputs:
  x: {{dtype: T, shape: [n]}}
outputs:
  y: {{dtype: T, shape: [n]}}
kernels:
  python: k.py:f
"""


def _workspace(root, folder, names):
    ws = root / folder
    (ws / "opdefs").mkdir(parents=True)
    (ws / "opdefs" / "k.py").write_text("def f(xp, x):\n    return x\n")
    text = "---".join(textwrap.dedent(OP.format(name=n)) for n in names)
    (ws / "opdefs" / "ops.yaml").write_text(text)
    return parse_opdef(ws / "opdefs" / "ops.yaml", ws)


def test_a_bare_name_found_in_one_other_namespace_resolves(tmp_path):
    first = _workspace(tmp_path, "first", ["alpha", "shared"])
    second = _workspace(tmp_path, "second", ["beta", "shared"])
    registry = Registry([*first, *second])
    assert registry.get("alpha").namespace == "first"
    assert registry.get("beta").namespace == "second"
    assert registry.get("second::shared").namespace == "second"
    with pytest.raises(OpsdkError, match=r"op name 'shared' is ambiguous here: first::shared, "
                                         r"second::shared; qualify it"):
        registry.get("shared")
