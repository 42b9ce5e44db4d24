"""The generated stubs are real types: mypy flags wrong calls in a user's script, and only those."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from opsdk.codegen.generate import generate_workspace

mypy = pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")

# An op with an attr of every kind, in a workspace of its own (python kernel: nothing to build).
DECLARATION = textwrap.dedent("""
    op: typed_op
    summary: y = x, with attrs of every kind.
    attrs:
      mode: {type: str, default: sum, choices: [sum, mean]}
      k: {type: int, default: 2}
      axes: {type: list(int), default: [0]}
    inputs:
      x: {dtype: float32, shape: [n]}
    outputs:
      y: {dtype: float32, shape: [n]}
    gradient: null
    kernels:
      python: typed_op_kernels.py:typed_op
    reference: "x"
""")

USER_SCRIPT = textwrap.dedent("""
    import numpy as np
    import ops

    x = np.ones(3, np.float32)
    ops.typed_op(x, mode="mean", k=3, axes=[0, 1])
    ops.typed_op([1.0, 2.0], name="node")
    ops.typed_op(x, mode="median")
    ops.typed_op(x, k="3")
    ops.typed_op(x, bogus=1)
    ops.typed_op(x, x)
""")


def _mypy(script_dir, *extra_env: tuple[str, str]) -> dict[int, str]:
    """Run mypy on script_dir/user.py; its errors by line."""
    env = {"PATH": "/usr/bin:/bin", **dict(extra_env)}
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--no-error-summary",
                           "--hide-error-context", "user.py"], cwd=str(script_dir), env=env,
                          capture_output=True, text=True, timeout=300)
    errors: dict[int, str] = {}
    for line in proc.stdout.splitlines():
        found = re.match(r"user\.py:(\d+): error: (.*)", line)
        if found:
            errors[int(found.group(1))] = errors.get(int(found.group(1)), "") + found.group(2)
    assert proc.returncode in (0, 1) and (errors or proc.returncode == 0), proc.stdout + proc.stderr
    return errors


@pytest.mark.slow
def test_mypy_flags_wrong_calls_of_a_workspace_op(tmp_path):
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "typed_op.yaml").write_text(DECLARATION)
    (tmp_path / "opdefs" / "typed_op_kernels.py").write_text("def typed_op(xp, x, **attrs):\n    return x\n")
    generate_workspace(tmp_path)
    (tmp_path / "user.py").write_text(USER_SCRIPT)
    errors = _mypy(tmp_path, ("MYPYPATH", str(tmp_path / "generated" / "python")))
    assert sorted(errors) == [8, 9, 10, 11], errors
    assert "Literal['sum', 'mean']" in errors[8]
    assert '"k"' in errors[9]
    assert 'Unexpected keyword argument "bogus"' in errors[10]
    assert "Too many positional arguments" in errors[11]


@pytest.mark.slow
def test_mypy_flags_a_bogus_attr_of_the_installed_flagship(installed_wheel):
    script = textwrap.dedent("""
        import numpy as np
        from opsdk import ops

        x = np.ones((3, 4), np.float32)
        z = ops.pairwise_manhattan(x, x)
        ops.pairwise_manhattan(x, x, bogus=1)
        ops.reduce_sum(z, axes=[1], keepdims="yes")
    """)
    (installed_wheel.home / "user.py").write_text(script)
    proc = installed_wheel.run(installed_wheel.python, "-m", "mypy", "--no-incremental",
                               "--no-error-summary", "user.py")
    lines = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in lines] == ["7", "8"], proc.stdout + proc.stderr
    assert 'Unexpected keyword argument "bogus" for "pairwise_manhattan"' in lines[0]


def test_every_lazy_export_is_visible_to_type_checkers():
    """opsdk's names come from `__getattr__` at run time (Any to mypy); the TYPE_CHECKING imports
    give type checkers the real ones, and must name every export."""
    import ast
    from pathlib import Path

    import opsdk

    tree = ast.parse(Path(opsdk.__file__).read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and getattr(node.test, "id", "") == "TYPE_CHECKING")
    imported = {alias.asname or alias.name for node in block.body
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert imported == set(opsdk.__all__)


GRAPH_SCRIPT = textwrap.dedent("""
    import numpy as np
    import opsdk

    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float32", shape=[None, 3], name="x")
    sess = opsdk.Session(g)
    sess.run(x, {x: np.ones((2, 3))})
    opsdk.placeholder("float32", shape=3)
    opsdk.Session(graph="g")
    g.no_such_method()
    x.no_such_attr
    sess.run(x, {x: np.ones((2, 3))}).no_such_attr
    sess.run(x.op).no_such_attr
""")


@pytest.mark.slow
def test_mypy_flags_wrong_calls_of_graphs_sessions_and_placeholders(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "user.py").write_text(GRAPH_SCRIPT)
    errors = _mypy(tmp_path, ("MYPYPATH", str(root)))
    assert sorted(errors) == [10, 11, 12, 13, 14, 15], errors
    assert "placeholder" in errors[10] and "Session" in errors[11]
    assert '"Graph" has no attribute "no_such_method"' in errors[12]
    assert '"Tensor" has no attribute "no_such_attr"' in errors[13]
    assert '"ndarray' in errors[14] and '"None" has no attribute' in errors[15]  # Session.run's result


FRAMEWORK_SCRIPT = textwrap.dedent("""
    from typing import TYPE_CHECKING

    import FRAMEWORK

    if TYPE_CHECKING:
        import STUB as ops
    else:
        ops = LOADER

    x = ARRAY
    y = ops.typed_op(x, mode="mean", k=3, axes=[0, 1])
    ops.typed_op(x, mode="median")
    ops.typed_op(x, k="3")
    ops.typed_op(x, bogus=1)
    ops.typed_op(x, x)
    y.no_such_attr
""")


@pytest.mark.slow
@pytest.mark.parametrize("framework, stub, loader, array, result", [
    ("torch", "torch_ops", "__import__('opsdk.torch').torch.load_ops('.')", "torch.ones(3)",
     '"Tensor"'),
    ("jax", "jax_ops", "__import__('opsdk.jax').jax.load_ops('.')", "jax.numpy.ones(3)",
     '"Array"'),
])
def test_mypy_flags_wrong_calls_of_a_workspace_op_in_torch_and_jax(tmp_path, framework, stub,
                                                                    loader, array, result):
    pytest.importorskip(framework, reason=f"{framework} is not installed")
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "typed_op.yaml").write_text(DECLARATION)
    (tmp_path / "opdefs" / "typed_op_kernels.py").write_text(
        "def typed_op(xp, x, **attrs):\n    return x\n")
    generate_workspace(tmp_path)
    script = (FRAMEWORK_SCRIPT.replace("FRAMEWORK", framework).replace("STUB", stub)
              .replace("LOADER", loader).replace("ARRAY", array))
    (tmp_path / "user.py").write_text(script)
    errors = _mypy(tmp_path, ("MYPYPATH", str(tmp_path / "generated" / "python")))
    assert sorted(errors) == [13, 14, 15, 16, 17], errors
    assert "Literal['sum', 'mean']" in errors[13] and '"k"' in errors[14]
    assert 'Unexpected keyword argument "bogus"' in errors[15]
    assert "Too many positional arguments" in errors[16]
    assert result in errors[17]


@pytest.mark.slow
def test_mypy_flags_wrong_calls_of_the_installed_torch_and_jax_builtin_ops(installed_wheel):
    pytest.importorskip("torch", reason="PyTorch is not installed")
    pytest.importorskip("jax", reason="JAX is not installed")
    script = textwrap.dedent("""
        import jax.numpy as jnp
        import torch
        from opsdk.jax import ops as jops
        from opsdk.torch import ops as tops

        t = tops.pairwise_manhattan(torch.ones(3, 4), torch.ones(2, 4))
        a = jops.reduce_sum(jnp.ones((3, 4)), axes=[1])
        tops.pairwise_manhattan(t, t, bogus=1)
        jops.reduce_sum(a, keepdims="yes")
        t.no_such_attr
    """)
    (installed_wheel.home / "user_fw.py").write_text(script)
    proc = installed_wheel.run(installed_wheel.python, "-m", "mypy", "--no-incremental",
                               "--no-error-summary", "user_fw.py", timeout=600)
    lines = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in lines] == ["9", "10", "11"], proc.stdout + proc.stderr
    assert 'Unexpected keyword argument "bogus" for "pairwise_manhattan"' in lines[0]
    assert '"keepdims"' in lines[1] and '"Tensor" has no attribute "no_such_attr"' in lines[2]
