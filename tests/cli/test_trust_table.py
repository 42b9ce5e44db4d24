"""docs/trust.md's table "Which command runs what" holds for every CLI command: each command
runs, as a process, on a workspace whose Python files record being imported, and imports them
exactly when the table says it runs the workspace's code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opsdk.cli.main import command_modules
from opsdk.registry.workspace import BUILTIN_ROOT

TRUST = BUILTIN_ROOT / "docs" / "trust.md"

# Each .py file of the workspace appends its name to imported.log when Python imports it.
RECORD = ("import pathlib as _p\n"
          "with open(_p.Path(__file__).resolve().parents[1] / 'imported.log', 'a') as _f:\n"
          "    _f.write(__name__ + '\\n')\n")

OP = """\
op: probe
summary: y = x * 2, a python kernel with a shape function.
type_attrs:
  T: [float64]
inputs:
  x: {dtype: T, shape: [n]}
outputs:
  y: {dtype: T}
shape_fn: probe_shapes.py:same
gradient: probe_grad
kernels:
  python: probe_kernels.py:twice
reference: "x * 2"
---
op: probe_grad
summary: the gradient of probe.
type_attrs:
  T: [float64]
inputs:
  x: {dtype: T, shape: [n]}
  grad_y: {dtype: T, shape: any}
outputs:
  grad_x: {dtype: T, shape: [n]}
kernels:
  python: probe_kernels.py:twice_grad
"""

GRAPH = {"format": "opsdk-graph", "version": 1, "collections": {}, "nodes": [
    {"name": "x", "op": "placeholder", "inputs": [], "control_inputs": [], "device": "",
     "attrs": {"dtype": {"type": "dtype", "value": "float64"},
               "shape": {"type": "shape", "value": [3]}},
     "type_attrs": {}, "outputs": [{"dtype": "float64", "shape": [3]}]},
    {"name": "y", "op": "probe", "inputs": ["x:0"], "control_inputs": [], "device": "",
     "attrs": {}, "type_attrs": {}, "outputs": [{"dtype": "float64", "shape": [3]}]}]}

# How the test runs each command of the table (FILE: the graph file above).
ARGS = {"list": ["list"], "new": ["new", "fresh_op"], "generate": ["generate"],
        "build": ["build"], "gradcheck": ["gradcheck", "probe"], "graph": ["graph", "FILE"],
        "doctor": ["doctor"]}


def _table() -> dict[str, bool]:
    """Command -> whether the table says it runs the workspace's code (CLI rows only)."""
    rows = {}
    for line in TRUST.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\| `opsdk ([a-z]+)[^`]*` \| (\*\*yes\*\*|no)(?![a-z])", line)
        if match:
            rows[match.group(1)] = match.group(2) == "**yes**"
    return rows


def test_the_table_lists_every_command():
    commands = {m.__name__.rpartition(".cmd_")[2] for m in command_modules()}
    assert set(_table()) == commands, "docs/trust.md: add a row for each `opsdk` command"
    assert set(ARGS) == commands, "tests/cli/test_trust_table.py: say how to run the command"


@pytest.fixture
def ws(tmp_path):
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs/probe.yaml").write_text(OP)
    (tmp_path / "opdefs/probe_shapes.py").write_text(
        RECORD + "def same(shapes, attrs):\n    return [shapes['x']]\n")
    (tmp_path / "opdefs/probe_kernels.py").write_text(RECORD + "def twice(xp, x):\n    return x * 2\n\n\n"
        "def twice_grad(xp, x, grad_y):\n    return grad_y * 2\n")
    (tmp_path / "graph.json").write_text(json.dumps(GRAPH))
    return tmp_path


@pytest.mark.parametrize("command", sorted(ARGS))
def test_a_command_runs_workspace_code_exactly_when_the_table_says(ws, command):
    says = _table()[command]
    args = [str(ws / "graph.json") if a == "FILE" else a for a in ARGS[command]]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-m", "opsdk.cli", "-C", str(ws), *args], cwd=ws,
                          capture_output=True, text=True, env=env, timeout=600)
    log = ws / "imported.log"
    imported = log.read_text().split() if log.exists() else []
    assert bool(imported) == says, (
        f"`opsdk {command}` {'imported' if imported else 'did not import'} workspace code "
        f"({imported}), docs/trust.md says {'yes' if says else 'no'}; exit {done.returncode}\n"
        f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    if command in ("graph", "list", "generate", "gradcheck", "new"):
        assert done.returncode == 0, done.stderr[-2000:]
