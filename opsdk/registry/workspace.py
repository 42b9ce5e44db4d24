"""Workspaces: folders with `opdefs/`; the opsdk repository itself is the builtin one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .diagnostics import Diagnostics, clip, name_problem
from .errors import OpDefErrors, OpsdkError
from .located_yaml import YamlLoadError, YMap, load_documents
from .spec import BUILTIN_NAMESPACE

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

# The optional workspace file at the root (next to opdefs/), e.g. `name: myws`.
WORKSPACE_FILE = "opsdk.yaml"
NAMESPACE_RE = re.compile(r"[a-z][a-z0-9_]*\Z")
_WORKSPACE_KEYS = ("name",)


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

    @property
    def namespace(self) -> str:
        """The namespace of the workspace's ops: 'opsdk' for the builtin one, else the `name:` of
        its opsdk.yaml, else its folder's name made an identifier (`My-Ops` -> `my_ops`).
        OpDefErrors (located in opsdk.yaml) when that file is wrong."""
        if self.is_builtin:
            return BUILTIN_NAMESPACE
        declared = read_namespace(self.root / WORKSPACE_FILE)
        return declared if declared is not None else folder_namespace(self.root.resolve().name)

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


def folder_namespace(folder: str) -> str:
    """A folder name as a namespace: lowercase, runs of other characters as '_', prefixed by
    'ws_' where it would not start with a letter, suffixed by '_ws' where it is reserved.

    >>> folder_namespace("My-Ops 2")
    'my_ops_2'
    >>> folder_namespace("2024")
    'ws_2024'
    """
    name = re.sub(r"[^a-z0-9]+", "_", folder.lower()).strip("_")[:48] or "ws"
    if not name[0].isalpha():
        name = f"ws_{name}"
    if name == BUILTIN_NAMESPACE or name_problem(name):
        name = f"{name}_ws"
    return name


def read_namespace(path: Path) -> Optional[str]:
    """The `name:` of a workspace file, None when there is no file or no name; OpDefErrors
    (`opsdk.yaml:LINE: ...`) for anything wrong in it."""
    if not path.is_file():
        return None
    try:
        documents = load_documents(path, WORKSPACE_FILE)
    except YamlLoadError as exc:
        raise OpDefErrors(exc.errors) from None
    d = Diagnostics(WORKSPACE_FILE)
    if not documents:
        return None
    top = d.mapping(documents[0], "the workspace file (a mapping like 'name: myws')")
    name = None
    if isinstance(top, YMap):
        d.known_keys(top, _WORKSPACE_KEYS, "the workspace file")
        entry = top.get("name")
        name = d.string(entry.value, "name (the workspace's namespace)") if entry else None
        if name is not None:
            problem = namespace_problem(name)
            if problem:
                d.error(entry.value.line, f"workspace name '{clip(name)}' {problem}")
                name = None
    if d.errors:
        raise OpDefErrors(d.sorted_errors())
    return name


def namespace_problem(name: str) -> Optional[str]:
    """Why `name` cannot name a workspace's namespace, or None."""
    if not NAMESPACE_RE.match(name):
        return "must be lower_snake_case ([a-z][a-z0-9_]*), like 'my_ops'"
    if name == BUILTIN_NAMESPACE:
        return f"is the builtin ops' namespace; choose another, like 'my_{name}'"
    problem = name_problem(name)
    return f"{problem}; choose another" if problem else None
