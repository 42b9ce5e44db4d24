"""The registry: every op of the builtin workspace plus a user workspace, checked as a whole.

`load_registry` is cheap to call again: the result is cached per workspace and the
(path, mtime, size) of every declaration file, and each file's parse is cached on its own, so an
edit re-reads one file. Failed loads are never cached.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import MappingProxyType
from typing import Iterator, Mapping, Optional

from .diagnostics import did_you_mean
from .errors import OpDefError, OpDefErrors, OpsdkError
from .gradients import gradient_problems
from .parse import parse_opdef
from .spec import OpSpec
from .workspace import BUILTIN_ROOT, Workspace


class Registry:
    """Ops by name; read-only. Iterating yields OpSpecs in name order.

    >>> registry = load_registry()            # doctest: +SKIP
    >>> registry.get("add").inputs[0].name    # doctest: +SKIP
    'x'
    """

    def __init__(self, specs: Mapping[str, OpSpec]):
        self._specs = MappingProxyType(dict(sorted(specs.items())))

    def get(self, name: str) -> OpSpec:
        """The op called `name`; OpsdkError with a did-you-mean when there is none."""
        spec = self._specs.get(name)
        if spec is None:
            raise OpsdkError(f"no op named '{name}'{did_you_mean(name, self._specs)}")
        return spec

    def names(self) -> tuple[str, ...]:
        """Every op name, sorted."""
        return tuple(self._specs)

    def __iter__(self) -> Iterator[OpSpec]:
        return iter(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __len__(self) -> int:
        return len(self._specs)

    def gradient_of(self, name: str) -> Optional[OpSpec]:
        """The gradient op of `name`, or None for `gradient: stop` and `gradient: null` ops."""
        gradient = self.get(name).gradient_op
        return None if gradient is None else self._specs[gradient]

    def workspace_of(self, name: str) -> Path:
        """The root of the workspace that declares `name`."""
        return self.get(name).workspace

    def ops_in_workspace(self, root: Path) -> tuple[OpSpec, ...]:
        """The ops declared in the workspace at `root`, in name order."""
        root = Path(root).resolve()
        return tuple(s for s in self._specs.values() if s.workspace == root)


_lock = threading.Lock()
_registries: dict[tuple, Registry] = {}
_files: dict[tuple, list[OpSpec]] = {}


def load_registry(workspace: Optional[Path] = None) -> Registry:
    """Builtin ops plus the ops of `workspace` (a folder with opdefs/); builtin only when None.

    Raises OpDefErrors listing every declaration mistake (`file:line: op 'x': ...`), including
    duplicate names, a user op reusing a builtin name, and gradient ops that are missing or do
    not fit the signature rule.
    """
    roots = [BUILTIN_ROOT]
    if workspace is not None:
        root = Path(workspace).resolve()
        if not (root / "opdefs").is_dir():
            raise OpsdkError(f"{root} is not a workspace (no opdefs/ folder in it); run `opsdk new <op>` "
                             f"there to start one")
        if root != BUILTIN_ROOT:
            roots.append(root)
    stamps = tuple((root, tuple(_stamp(p) for p in Workspace(root).declaration_files())) for root in roots)
    with _lock:
        cached = _registries.get(stamps)
        if cached is None:
            cached = _build(stamps)
            _registries.clear()  # keep only the latest state of each set of files
            _registries[stamps] = cached
        return cached


def _stamp(path: Path) -> tuple[Path, int, int]:
    stat = path.stat()
    return path, stat.st_mtime_ns, stat.st_size


def _build(stamps: tuple) -> Registry:
    errors: list[OpDefError] = []
    specs: dict[str, OpSpec] = {}
    for index, (root, files) in enumerate(stamps):
        for stamp in files:
            try:
                parsed = _parse_cached(root, stamp)
            except OpDefErrors as exc:
                errors.extend(exc.errors)
                continue
            for spec in parsed:
                problem = _clash(spec, specs.get(spec.name), is_user=index > 0)
                if problem:
                    errors.append(OpDefError(spec.location, spec.name, problem))
                else:
                    specs[spec.name] = spec
    for spec in specs.values():
        errors.extend(_gradient_errors(spec, specs))
    if errors:
        raise OpDefErrors(errors)
    return Registry(specs)


def _parse_cached(root: Path, stamp: tuple) -> list[OpSpec]:
    key = (root, *stamp)
    if key not in _files:
        specs = parse_opdef(stamp[0], root)
        for old in [k for k in _files if k[:2] == key[:2]]:
            del _files[old]  # an earlier version of the same file
        _files[key] = specs
    return _files[key]


def _clash(spec: OpSpec, other: Optional[OpSpec], is_user: bool) -> Optional[str]:
    if other is None:
        return None
    if is_user and other.workspace == BUILTIN_ROOT:
        return f"'{spec.name}' is a builtin op ({other.location}); choose another name"
    return f"declared twice: also at {other.location}; rename one"


def _gradient_errors(spec: OpSpec, specs: Mapping[str, OpSpec]) -> list[OpDefError]:
    name = spec.gradient_op
    if name is None:
        return []
    where = spec.gradient_location or spec.location
    grad = specs.get(name)
    if grad is None:
        hint = did_you_mean(name, specs)
        return [OpDefError(where, spec.name, f"gradient op '{name}' does not exist{hint}; declare it, or "
                                              f"write 'gradient: stop' (no gradient) or null")]
    return [OpDefError(where, spec.name, problem) for problem in gradient_problems(spec, grad)]
