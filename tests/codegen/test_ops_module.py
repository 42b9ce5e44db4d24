"""load_ops (a workspace's generated wrappers as a module) and opsdk.ops (the builtin ones)."""

from __future__ import annotations

import numpy as np
import pytest

from codegen_fixtures import write_workspace
from opsdk.codegen.generate import generate_workspace
from opsdk.registry import OpDefErrors, OpsdkError
from opsdk.runtime.frontend.ops_module import load_ops

TWICE = """
    op: twice
    summary: 2 * x.
    type_attrs:
      T: [float32, float64]
    inputs:
      x: {dtype: T, shape: [n]}
    outputs:
      y: {dtype: T, shape: [n]}
    gradient: null
    kernels:
      python: kernels.py:twice
"""


def test_not_generated_yet(tmp_path):
    (tmp_path / "opdefs").mkdir()
    with pytest.raises(OpsdkError, match=r"run `opsdk generate` \(or `opsdk build`\)"):
        load_ops(tmp_path)


@pytest.mark.parametrize("generated", [False, True])
def test_declaration_mistakes_are_shown_not_generate(tmp_path, generated):
    root = write_workspace(tmp_path / "ws", {"twice": TWICE},
                           {"kernels.py": "def twice(xp, x):\n    return 2 * x\n"})
    if generated:  # generated once, then a declaration broken: the mistake, not a stale module
        generate_workspace(root)
    path = root / "opdefs" / "twice.yaml"
    path.write_text(path.read_text().replace("inputs:", "inptus:"))
    with pytest.raises(OpDefErrors) as info:
        load_ops(root)
    assert str(info.value).splitlines()[0] == ("opdefs/twice.yaml:5: op 'twice': unknown key 'inptus' in the "
                                               "declaration (did you mean 'inputs'?)")


def test_loads_once_per_workspace_and_runs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        write_workspace(root, {"twice": TWICE})
        (root / "opdefs" / "kernels.py").write_text("def twice(xp, x):\n    return 2 * x\n")
        generate_workspace(root)
    ops_a = load_ops(a)
    assert load_ops(str(a)) is ops_a
    assert load_ops(b) is not ops_a and load_ops(b).__name__ != ops_a.__name__
    np.testing.assert_array_equal(ops_a.twice(np.arange(3, dtype=np.float32)), [0, 2, 4])
    assert "2 * x." in ops_a.twice.__doc__


def test_builtin_ops_module():
    from opsdk import ops

    x = np.array([1.0, 2.0], np.float32)
    np.testing.assert_array_equal(ops.add(x, x), 2 * x)
    assert "add" in dir(ops)
    with pytest.raises(AttributeError, match="not_an_op"):
        ops.not_an_op


def test_opsdk_ops_submodule_names_missing_ops():
    import opsdk.ops as ops_module

    assert ops_module.add.__name__ == "add"
    with pytest.raises(AttributeError, match="opsdk.ops has no op 'not_an_op'"):
        ops_module.not_an_op


JOIN = """
    op: join
    summary: The tensors xs, flattened and joined.
    inputs:
      xs: {dtype: float64, list: N}
    outputs:
      y: {dtype: float64, shape: any}
    shape_fn: kernels.py:join_shape
    gradient: null
    kernels:
      python: kernels.py:join
"""
JOIN_KERNELS = """
    def join(xp, xs, N):
        return xp.concatenate([x.ravel() for x in xs])

    def join_shape(shapes, attrs):
        return [None]
"""


def test_a_bare_array_for_a_list_input_is_refused_as_not_a_list(tmp_path):
    root = write_workspace(tmp_path / "ws", {"join": JOIN}, {"kernels.py": JOIN_KERNELS})
    generate_workspace(root)
    ops = load_ops(root)
    np.testing.assert_array_equal(ops.join([np.ones(2), np.zeros((1, 1))]), [1.0, 1.0, 0.0])
    with pytest.raises(OpsdkError) as info:
        ops.join(np.ones((2, 3)))  # list() of it would have passed its two rows as two tensors
    assert str(info.value) == ("join: input 'xs' takes a list of tensors; pass a list or tuple, got one "
                               "ndarray of shape [2, 3]")
