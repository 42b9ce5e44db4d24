"""Declaration mistakes as every command reports them: the first line of the error is
`FILE:LINE: error: ...` (one line per mistake, as a compiler prints them), and `opsdk build`
reports them before it compiles anything, then builds the good ops and exits 1.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from opsdk.cli.main import main

GOOD_YAML = """\
op: de_copy
summary: y = x.
inputs:
  x: {dtype: float64, shape: [n]}
outputs:
  y: {dtype: float64, shape: [n]}
kernels:
  cpu: de_copy_cpu.cc
reference: "x"
"""
BAD_YAML = """\
op: de_bad
summary: a typo on line 4.
inputs:
  x: {dtype: float64, shape: [n], dtyp: float64}
outputs:
  y: {dtype: float64, shape: [n]}
kernels:
  python: k.py:f
"""
FIRST_LINE = "opdefs/de_bad.yaml:4: error: op 'de_bad': unknown key 'dtyp' in input 'x' (did you mean 'dtype'?)"
# A compiler that records what the build had printed to stderr when it was first run.
SPY_COMPILER = """\
#!/bin/sh
[ "$1" = "--version" ] && { echo "spy-g++ 1.0"; exit 0; }
cat "$DE_STDERR" >> "$DE_SEEN"; echo "--- compile" >> "$DE_SEEN"
out=""; while [ $# -gt 0 ]; do [ "$1" = "-o" ] && out="$2"; shift; done
printf built > "$out"
"""


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    (root / "opdefs").mkdir(parents=True)
    (root / "opdefs" / "de_copy.yaml").write_text(GOOD_YAML)
    (root / "opdefs" / "de_copy_cpu.cc").write_text("// the spy compiler does not read it\n")
    (root / "opdefs" / "de_bad.yaml").write_text(BAD_YAML)
    (root / "opdefs" / "k.py").write_text("def f(xp, x):\n    return x\n")
    return root


@pytest.mark.parametrize("argv", [["list"], ["list", "--all"], ["generate"], ["generate", "--check"],
                                  ["gradcheck", "de_copy"], ["build", "--cuda=off", "--no-progress"]])
def test_every_commands_first_error_line_is_file_line_error(ws, capsys, argv, monkeypatch, tmp_path):
    spy = _spy(tmp_path, monkeypatch)
    code = main(["-C", str(ws), *argv])
    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines()[0] == FIRST_LINE, err
    assert spy.exists() or argv[0] != "build"


def test_build_reports_declaration_errors_before_compiling_then_builds_the_good_ops(ws, tmp_path):
    stderr = tmp_path / "stderr.txt"
    seen = tmp_path / "seen.txt"
    env = {**os.environ, **_spy_env(tmp_path, stderr, seen)}
    with open(stderr, "w") as err:
        proc = subprocess.run([sys.executable, "-m", "opsdk.cli", "build", "--cuda=off",
                               "--no-progress", "-C", str(ws)], stderr=err, env=env)
    assert proc.returncode == 1
    first_compile = seen.read_text().split("--- compile")[0]
    assert first_compile.startswith(FIRST_LINE + "\n"), first_compile  # printed before compiling
    text = stderr.read_text()
    assert text.rstrip().endswith("opsdk build: 1 declaration error(s) (above); the other ops are "
                                  "built")
    assert (ws / "build" / "cpu" / "de_copy" / "manifest.json").is_file()  # the good op is built


def _spy(tmp_path: Path, monkeypatch) -> Path:
    seen = tmp_path / "seen.txt"
    for name, value in _spy_env(tmp_path, tmp_path / "stderr.txt", seen).items():
        monkeypatch.setenv(name, value)
    (tmp_path / "stderr.txt").write_text("")
    return seen


def _spy_env(tmp_path: Path, stderr: Path, seen: Path) -> dict[str, str]:
    compiler = tmp_path / "spy-g++"
    compiler.write_text(SPY_COMPILER)
    compiler.chmod(compiler.stat().st_mode | stat.S_IEXEC)
    return {"OPSDK_CXX": str(compiler), "DE_STDERR": str(stderr), "DE_SEEN": str(seen)}
