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
    command = re.search(r"python [^\n]*?-m pdoc .*?(?=\n```)", text, re.S).group(0)
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
    assert (tmp_path / "opsdk" / "jax.html").is_file()
    interop = (tmp_path / "opsdk" / "runtime" / "kernels" / "interop.html").read_text()
    assert "as_kernel_array" in interop  # the DLPack module has its page
    assert not (tmp_path / "opsdk" / "runtime" / "exec").exists()  # internals are left out


def _modules(command: list[str]) -> list[str]:
    return command[command.index("--no-search") + 1:]


def test_the_makefile_builds_the_documented_modules_and_fails_on_warnings():
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^API_MODULES := (.*)$", makefile, re.M).group(1).split()
    command = _documented_command()
    assert listed == _modules(command)
    recipe = re.search(r"^api-docs:.*\n\t(.*)$", makefile, re.M).group(1)
    assert "-W error -m pdoc" in recipe and "-W error -m pdoc" in " ".join(command)


def test_every_documented_module_exists():
    import importlib.util

    missing = [m for m in _modules(_documented_command()) if importlib.util.find_spec(m) is None]
    assert missing == []


@pytest.mark.slow
def test_a_pdoc_warning_fails_the_documented_command(tmp_path):
    pytest.importorskip("pdoc", reason="pdoc not installed: pip install 'opsdk[docs]'")
    command = _documented_command()
    command[command.index("-o") + 1] = str(tmp_path)
    proc = subprocess.run([sys.executable, *command[1:], "opsdk.no_such_module"], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "opsdk.no_such_module" in proc.stderr


def test_the_docs_stand_on_their_own():
    """Docstrings, docs, tests and benchmarks cite docs/ pages, never a file the repository lacks
    (CHANGELOG.md, a record of past entries, is left as written)."""
    missing = "DESIGN" + ".md"
    citing = [str(path.relative_to(ROOT)) for folder in ("opsdk", "docs", "tests", "bench",
                                                          "examples", "templates")
              for path in sorted((ROOT / folder).rglob("*"))
              if path.is_file() and path.suffix in {".py", ".md", ".j2", ".cc", ".cu", ".h"}
              and missing in path.read_text(errors="replace")]
    citing += [name for name in ("README.md",) if missing in (ROOT / name).read_text()]
    assert citing == []


def test_every_docs_page_a_file_names_exists():
    """Docs, docstrings, help texts and tests name docs/ pages that are there."""
    named: dict[str, str] = {}
    for folder in ("opsdk", "docs", "tests", "bench", "examples", "templates"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in {".py", ".md", ".j2"}:
                for page in re.findall(r"docs/[A-Za-z0-9_/]+\.md", path.read_text(errors="replace")):
                    named.setdefault(page, str(path.relative_to(ROOT)))
    missing = {page: where for page, where in named.items() if not (ROOT / page).is_file()}
    assert missing == {}
    assert {"docs/dlpack.md", "docs/gpu.md", "docs/versioning.md",
            "docs/troubleshooting.md"} <= set(named)
