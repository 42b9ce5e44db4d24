"""Imports between opsdk's layers point one way (docs/internals.md, "Layers"); this test fails otherwise."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "opsdk"
TOP = "<top-level>"  # opsdk/*.py, including opsdk/__init__.py

# Layer -> the other layers it may import. None: anything. A layer may always import itself.
ALLOWED: dict[str, Optional[frozenset[str]]] = {
    "registry": frozenset(),
    "codegen": frozenset({"registry"}),
    "build": frozenset({"registry", "codegen"}),
    "runtime": frozenset({"registry"}),
    "dist": frozenset({"runtime", "registry"}),
    "gradcheck": frozenset({"runtime", "registry"}),
    "cli": None,
    "v1": None,  # TensorFlow 1's names (opsdk/v1/): like cli, may use every layer
    TOP: frozenset({"registry", "runtime", "dist", "gradcheck", "cli"}),
}


@dataclass(frozen=True)
class Violation:
    """One import that points against the table."""
    file: str
    line: int
    layer: str
    target: str
    imported: str

    def __str__(self) -> str:
        allowed = ALLOWED.get(self.layer)
        may = "nothing of opsdk" if not allowed else ", ".join(sorted(allowed))
        return (f"{self.file}:{self.line}: {self.layer} imports {self.imported} "
                f"(layer '{self.target}'); {self.layer} may import {may}")


def layer_of(module: str) -> str:
    """`opsdk.codegen.render` -> 'codegen'; `opsdk` and `opsdk.x` (a top-level module) -> TOP."""
    parts = module.split(".")
    if len(parts) >= 2 and (PACKAGE_DIR / parts[1]).is_dir():
        return parts[1]
    return TOP


def module_name(path: Path, package_dir: Path = PACKAGE_DIR) -> str:
    """The dotted name of a source file under opsdk/ (`__init__` names its package)."""
    rel = path.relative_to(package_dir.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module) for every opsdk import in a source, relative ones resolved.

    `from opsdk import registry` counts as importing `opsdk.registry`, not the top level.
    """
    found: list[tuple[int, str]] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if _is_opsdk(a.name)]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, package)
            if not _is_opsdk(base):
                continue
            if base == "opsdk":
                found += [(node.lineno, f"opsdk.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, base))
    return found


def _is_opsdk(name: str) -> bool:
    return name == "opsdk" or name.startswith("opsdk.")


def _resolve(node: ast.ImportFrom, package: str) -> str:
    if node.level == 0:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def check_source(source: str, module: str, file: str, is_package: bool = False) -> list[Violation]:
    """The imports of one module that its layer may not make."""
    layer = layer_of(module)
    if layer not in ALLOWED:
        return [Violation(file, 1, layer, layer, module)]
    allowed = ALLOWED[layer]
    out = []
    for line, target_module in imported_modules(source, module, is_package):
        target = layer_of(target_module)
        if allowed is None or target == layer:
            continue
        if target not in allowed:
            out.append(Violation(file, line, layer, target, target_module))
    return out


def all_violations() -> list[Violation]:
    out = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR.parent).as_posix()
        out += check_source(path.read_text(), module_name(path), rel,
                            is_package=path.name == "__init__.py")
    return out


# Inside the runtime, sub-packages in docs/internals.md's order: each imports only those before it.
RUNTIME_ORDER = ("ir", "devices", "kernels", "frontend", "compile", "exec", "autodiff",
                 "control_flow", "train", "io")


def runtime_part(module: str) -> Optional[str]:
    """`opsdk.runtime.compile.place` -> 'compile'; None outside a runtime sub-package."""
    parts = module.split(".")
    if parts[:2] != ["opsdk", "runtime"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in RUNTIME_ORDER else None


def runtime_violations(source: str, module: str, file: str, is_package: bool = False
                       ) -> list[str]:
    """Imports of a runtime sub-package module that point up RUNTIME_ORDER."""
    part = runtime_part(module)
    if part is None:
        return []
    rank = RUNTIME_ORDER.index(part)
    out = []
    for line, target in imported_modules(source, module, is_package):
        other = runtime_part(target)
        if other is None and target.startswith("opsdk.runtime") and target != "opsdk.runtime":
            other = "?"
        if target == "opsdk.runtime" or (other is not None and other != "?"
                                         and RUNTIME_ORDER.index(other) > rank):
            out.append(f"{file}:{line}: runtime/{part} imports {target}; it may import only "
                       f"{', '.join(RUNTIME_ORDER[:rank + 1])}")
        elif other == "?":
            out.append(f"{file}:{line}: runtime/{part} imports {target}, outside the sub-packages")
    return out


def test_runtime_subpackages_import_down_the_pipeline():
    out = []
    for path in sorted((PACKAGE_DIR / "runtime").rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR.parent).as_posix()
        out += runtime_violations(path.read_text(), module_name(path), rel,
                                  is_package=path.name == "__init__.py")
    assert not out, "runtime imports against docs/internals.md's order:\n" + "\n".join(out)


def test_every_runtime_module_is_in_a_subpackage():
    loose = sorted(p.name for p in (PACKAGE_DIR / "runtime").glob("*.py") if p.name != "__init__.py")
    subpackages = sorted(p.name for p in (PACKAGE_DIR / "runtime").iterdir()
                         if p.is_dir() and (p / "__init__.py").is_file())
    assert loose == [] and subpackages == sorted(RUNTIME_ORDER)


@pytest.mark.parametrize("source, module, ok", [
    ("from opsdk.runtime.frontend.api import apply_op", "opsdk.runtime.ir.tensor", False),
    ("from opsdk.runtime.ir.graph import Graph", "opsdk.runtime.frontend.api", True),
    ("from opsdk.runtime.control_flow import gradients", "opsdk.runtime.autodiff.gradients",
     False),
    ("from opsdk.runtime.autodiff.gradients import x", "opsdk.runtime.control_flow.gradients",
     True),
    ("import opsdk.runtime", "opsdk.runtime.exec.session", False),
])
def test_runtime_order_checker(source, module, ok):
    assert (runtime_violations(source, module, "synthetic.py") == []) is ok


def test_imports_follow_the_layer_table():
    violations = all_violations()
    assert not violations, "imports against docs/internals.md's layer table:\n" + "\n".join(
        str(v) for v in violations)


def test_every_layer_package_is_in_the_table():
    packages = {p.name for p in PACKAGE_DIR.iterdir()
                if p.is_dir() and (p / "__init__.py").is_file()}
    assert packages <= set(ALLOWED), f"add {sorted(packages - set(ALLOWED))} to docs/internals.md (Layers) and ALLOWED"


@pytest.mark.parametrize("source, module, is_package, bad", [
    ("from opsdk.runtime import graph", "opsdk.registry.spec", False, "opsdk.runtime"),
    ("from ...codegen import build", "opsdk.runtime.kernels.loader", False, "opsdk.codegen"),
    ("from ... import codegen", "opsdk.runtime.kernels.loader", False, "opsdk.codegen"),
    ("from opsdk import runtime", "opsdk.build.driver", False, "opsdk.runtime"),
    ("import opsdk.dist.cluster", "opsdk.runtime", True, "opsdk.dist.cluster"),
    ("def f():\n    from ..codegen.generate import x\n", "opsdk.dist.tasks", False,
     "opsdk.codegen.generate"),
    ("import opsdk", "opsdk.registry.parse", False, "opsdk"),
    ("from opsdk.codegen import build", "opsdk.api", False, "opsdk.codegen"),
])
def test_checker_catches_a_bad_import(source, module, is_package, bad):
    violations = check_source(source, module, "synthetic.py", is_package)
    assert [v.imported for v in violations] == [bad]
    assert "synthetic.py:" in str(violations[0])


@pytest.mark.parametrize("source, module, is_package", [
    ("from ..registry.spec import OpSpec", "opsdk.build.driver", False),
    ("from . import spec\nfrom .shapes import Dim", "opsdk.registry.parse", False),
    ("from . import build", "opsdk.codegen", True),
    ("from opsdk.runtime import graph\nimport opsdk.registry", "opsdk.dist.tasks", False),
    ("from opsdk.build.driver import build_workspace", "opsdk.cli.cmd_build", False),
    ("import numpy\nfrom os import path", "opsdk.registry.spec", False),
])
def test_checker_accepts_allowed_imports(source, module, is_package):
    assert check_source(source, module, "synthetic.py", is_package) == []
