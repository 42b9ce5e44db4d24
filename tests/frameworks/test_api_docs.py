"""The API reference command of docs/api/README.md (`make api-docs`) builds pages from the docstrings."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _documented_command() -> list[str]:
    text = (ROOT / "docs" / "api" / "README.md").read_text()
    command = re.search(r"python -m pdoc .*?(?=\n```)", text, re.S).group(0)
    return shlex.split(command.replace("\\\n", " "))


@pytest.mark.slow
def test_the_documented_command_builds_the_reference(tmp_path):
    pytest.importorskip("pdoc", reason="pdoc not installed: pip install 'opsdk[docs]'")
    command = _documented_command()
    command[command.index("-o") + 1] = str(tmp_path)
    proc = subprocess.run([sys.executable, *command[1:]], cwd=str(ROOT), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    torch_page = (tmp_path / "opsdk" / "torch.html").read_text()
    assert "fake (meta) implementation" in torch_page and "load_ops" in torch_page
    assert "Session" in (tmp_path / "opsdk.html").read_text()
    assert (tmp_path / "opsdk" / "jax.html").is_file() and not (tmp_path / "opsdk" / "runtime").exists()
