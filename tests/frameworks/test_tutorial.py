"""docs/tutorial.md, run block by block in a fresh folder, as a reader would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
FENCE = re.compile(r"^```(\w+)(?: +(\S+))?\n(.*?)^```$", re.S | re.M)


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(language, path or "", body) of every fenced block, in order."""
    return [(m.group(1), m.group(2) or "", m.group(3)) for m in FENCE.finditer(text)]


def test_every_block_is_of_a_kind_the_runner_runs():
    found = blocks(TUTORIAL.read_text())
    assert len(found) >= 10
    for language, path, _ in found:
        assert language in ("bash", "python") or path, (language, path)


def _run(language: str, body: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = ["bash", "-euo", "pipefail", "-c", body] if language == "bash" else [sys.executable, "-c", body]
    return subprocess.run(command, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_tutorial_runs_from_start_to_end(tmp_path):
    pytest.importorskip("torch", reason="the tutorial uses PyTorch: pip install 'opsdk[torch]'")
    pytest.importorskip("jax", reason="the tutorial uses JAX: pip install 'opsdk[jax]'")
    workspace = tmp_path / "tutorial"
    workspace.mkdir()
    for number, (language, path, body) in enumerate(blocks(TUTORIAL.read_text()), 1):
        if path:
            (workspace / path).write_text(body)
            continue
        proc = _run(language, body, workspace)
        assert proc.returncode == 0, f"block {number} ({language}):\n{body}\n{proc.stdout}{proc.stderr}"
    assert len(list((workspace / "dist").glob("tutorial-0.1.0-*.whl"))) == 1
