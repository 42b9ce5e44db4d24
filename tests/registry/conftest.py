"""Small temporary workspaces for registry tests (the repo's own opdefs/ is edited concurrently)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from opsdk.registry import OpDefErrors, parse_opdef
from opsdk.registry import registry as registry_module

KERNELS_PY = '''
def foo(xp, x, **attrs):
    return x
'''


class TmpWorkspace:
    """A workspace under tmp_path with `opdefs/` and a couple of kernel files to point at."""

    def __init__(self, root: Path):
        self.root = root
        self.opdefs = root / "opdefs"
        self.opdefs.mkdir(parents=True, exist_ok=True)
        (self.opdefs / "kernels.py").write_text(KERNELS_PY)
        (self.opdefs / "foo_cpu.cc").write_text("// kernel body\n")

    def write(self, name: str, text: str) -> Path:
        path = self.opdefs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    def parse(self, text: str):
        """The one op `text` declares (as opdefs/op.yaml)."""
        return parse_opdef(self.write("op.yaml", text), self.root)[0]

    def error(self, text: str) -> str:
        """The declaration errors `text` (as opdefs/op.yaml) gives; fails when it gives none."""
        with pytest.raises(OpDefErrors) as info:
            parse_opdef(self.write("op.yaml", text), self.root)
        return str(info.value)


@pytest.fixture
def ws(tmp_path: Path) -> TmpWorkspace:
    return TmpWorkspace(tmp_path / "ws")


@pytest.fixture
def fake_builtin(tmp_path: Path, monkeypatch) -> TmpWorkspace:
    """A stand-in builtin workspace, so registry tests don't depend on the repo's opdefs/."""
    builtin = TmpWorkspace(tmp_path / "builtin")
    monkeypatch.setattr(registry_module, "BUILTIN_ROOT", builtin.root.resolve())
    return builtin
