"""Workspaces: folders with `opdefs/`; the opsdk repository itself is the builtin one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import OpsdkError

# Where the builtin ops live (declarations, generated wrappers, built kernels, templates): the
# checkout when opsdk runs from one (editable install), else the copy a wheel carries as package
# data under opsdk/_builtin (setup.py puts it there). The checkout is recognised by the files only
# it has side by side: opdefs/builtin and templates next to the package.
PACKAGE_DATA_ROOT: Path = Path(__file__).resolve().parents[1] / "_builtin"


def _builtin_root() -> Path:
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "opdefs" / "builtin").is_dir() and (checkout / "templates").is_dir():
        return checkout
    return PACKAGE_DATA_ROOT


BUILTIN_ROOT: Path = _builtin_root()


@dataclass(frozen=True)
class Workspace:
    """The parts of a workspace (see docs/internals.md); `root` is the folder holding opdefs/.

    >>> Workspace(Path("/tmp/ws")).opdefs_dir
    PosixPath('/tmp/ws/opdefs')
    """

    root: Path

    @property
    def opdefs_dir(self) -> Path:
        return self.root / "opdefs"

    @property
    def generated_dir(self) -> Path:
        return self.root / "generated"

    @property
    def build_dir(self) -> Path:
        return self.root / "build"

    @property
    def is_builtin(self) -> bool:
        return self.root.resolve() == BUILTIN_ROOT

    def declaration_files(self) -> list[Path]:
        """Every `opdefs/**/*.yaml` (and .yml, in any case: `Foo.YAML` is read, never skipped
        silently), sorted, so loading order is deterministic."""
        found = (p for p in self.opdefs_dir.rglob("*") if p.suffix.lower() in (".yaml", ".yml"))
        return sorted(p for p in found if p.is_file())


def find_workspace(start: Path) -> Path:
    """The nearest folder at or above `start` holding `opdefs/`; OpsdkError when there is none.

    >>> find_workspace(Path("opdefs/builtin"))   # doctest: +SKIP
    PosixPath('/path/to/repo')
    """
    here = Path(start).resolve()
    if here.is_file():
        here = here.parent
    for folder in (here, *here.parents):
        if (folder / "opdefs").is_dir():
            return folder
    raise OpsdkError(f"no opdefs/ folder in {here} or any folder above it; run `opsdk new <op>` "
                     f"in your project to start a workspace, or pass -C <workspace>")
