"""The registry: every op of the builtin workspace plus a user workspace, by namespace.

Ops are namespaced by workspace, as `torch.library` namespaces are: the builtin ops are
`opsdk::add`, ..., a workspace's are `<its namespace>::<name>` (workspace.py says how a workspace
is named). A user op may share its name with a builtin op or another workspace's op. An
unqualified name resolves to the workspace's own op first, then to the builtin one; a qualified
name resolves exactly.

One bad declaration never breaks the others: a file with mistakes is set aside with its errors
(`Registry.errors`) and every other file's ops are usable; asking for an op of a broken file
raises that file's errors. `load_registry(..., strict=True)` (the default: the CLI, codegen, the
build) raises them all instead.

`load_registry` is cheap to call again: the result is cached per workspace and the
(path, mtime, size) of every declaration file, and each file's parse is cached on its own, so an
edit re-reads one file.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import MappingProxyType
from typing import Iterable, Iterator, Mapping, Optional, Union

from .diagnostics import did_you_mean
from .errors import OpDefError, OpDefErrors, OpsdkError
from .gradients import gradient_problems, inherit_named_dims
from .parse import parse_opdef
from .spec import BUILTIN_NAMESPACE, OpSpec
from .workspace import BUILTIN_ROOT, WORKSPACE_FILE, Workspace

SEPARATOR = "::"
# declaration file (relative to its workspace) -> its errors
Broken = Mapping[str, tuple[OpDefError, ...]]


class Registry:
    """Ops by namespace and name; read-only. Iterating yields OpSpecs in qualified-name order.

    `specs`: OpSpecs (or a mapping whose values are OpSpecs); `namespace`: the workspace's own,
    where unqualified names resolve first (default: the one non-builtin namespace among the specs,
    else the builtin one); `broken`: the declaration files set aside, with their errors.

    >>> registry = load_registry()                       # doctest: +SKIP
    >>> registry.get("add").qualified_name               # doctest: +SKIP
    'opsdk::add'
    """

    def __init__(self, specs: Union[Mapping[str, OpSpec], Iterable[OpSpec]],
                 namespace: Optional[str] = None, broken: Optional[Broken] = None,
                 broken_ops: Optional[Mapping[str, str]] = None):
        values = list(specs.values() if isinstance(specs, Mapping) else specs)
        self._specs = MappingProxyType({s.qualified_name: s for s in
                                        sorted(values, key=lambda s: s.qualified_name)})
        own = sorted({s.namespace for s in values} - {BUILTIN_NAMESPACE})
        self.namespace = namespace or (own[0] if len(own) == 1 else BUILTIN_NAMESPACE)
        self.broken: Broken = MappingProxyType({f: tuple(e) for f, e in sorted((broken or {}).items())})
        # qualified op name -> the broken file that declares (or may declare) it
        self._broken_ops = dict(broken_ops or {})

    @property
    def errors(self) -> tuple[OpDefError, ...]:
        """Every declaration mistake of the broken files, file by file."""
        return tuple(e for errors in self.broken.values() for e in errors)

    def get(self, name: str) -> OpSpec:
        """The op `name` (`ns::name` exactly; a bare name in this workspace's namespace, then the
        builtin one). OpDefErrors of its file when that file is broken; OpsdkError with a
        did-you-mean when there is no such op."""
        return self.resolve(name, self.namespace)

    def resolve(self, name: str, namespace: str) -> OpSpec:
        """`get` as seen from `namespace` (a gradient op named in that workspace's declaration)."""
        for candidate in self._candidates(name, namespace):
            spec = self._specs.get(candidate)
            if spec is not None:
                return spec
            file = self._broken_ops.get(candidate)
            if file is not None:
                raise OpDefErrors(list(self.broken[file]))
        if SEPARATOR not in name:  # a bare name declared in exactly one other namespace
            matches = [s for s in self._specs.values() if s.name == name]
            if len(matches) == 1:
                return matches[0]
            if matches:
                raise OpsdkError(f"op name '{name}' is ambiguous here: "
                                 f"{', '.join(s.qualified_name for s in matches)}; qualify it")
        raise OpsdkError(f"no op named '{name}'{did_you_mean(name, self._all_names())}"
                         f"{self._broken_note()}")

    def _candidates(self, name: str, namespace: str) -> tuple[str, ...]:
        if SEPARATOR in name:
            return (name,)
        return tuple(dict.fromkeys((f"{namespace}{SEPARATOR}{name}",
                                    f"{BUILTIN_NAMESPACE}{SEPARATOR}{name}")))

    def _all_names(self) -> list[str]:
        return [*self.names(), *self._specs]

    def _broken_note(self) -> str:
        if not self.broken:
            return ""
        return (f"; {', '.join(self.broken)} ha{'s' if len(self.broken) == 1 else 've'} declaration "
                f"errors and may declare it (`opsdk list` shows them)")

    def find(self, name: str) -> Optional[OpSpec]:
        """`get`, or None where it would raise."""
        try:
            return self.get(name)
        except OpsdkError:
            return None

    def names(self) -> tuple[str, ...]:
        """Every unqualified name that resolves here, sorted (a name shared by this workspace and
        the builtins once: it means the workspace's op)."""
        return tuple(sorted({s.name for s in self._specs.values()}))

    def qualified_names(self) -> tuple[str, ...]:
        """Every op as `namespace::name`, sorted."""
        return tuple(self._specs)

    def __iter__(self) -> Iterator[OpSpec]:
        return iter(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def __len__(self) -> int:
        return len(self._specs)

    def gradient_of(self, name: str) -> Optional[OpSpec]:
        """The gradient op of `name`, or None for `gradient: stop` and `gradient: null` ops."""
        spec = self.get(name)
        gradient = spec.gradient_op
        return None if gradient is None else self.resolve(gradient, spec.namespace)

    def workspace_of(self, name: str) -> Path:
        """The root of the workspace that declares `name`."""
        return self.get(name).workspace

    def ops_in_workspace(self, root: Path) -> tuple[OpSpec, ...]:
        """The ops declared in the workspace at `root`, in name order."""
        root = Path(root).resolve()
        return tuple(sorted((s for s in self._specs.values() if s.workspace == root),
                            key=lambda s: s.name))


_lock = threading.Lock()
_registries: dict[tuple, tuple[tuple, Registry]] = {}  # roots -> (their files' stamps, registry)
_files: dict[tuple, list[OpSpec]] = {}


def load_registry(workspace: Optional[Path] = None, *, strict: bool = True) -> Registry:
    """Builtin ops plus the ops of `workspace` (a folder with opdefs/); builtin only when None.

    `strict`: raise OpDefErrors listing every declaration mistake (`file:line: op 'x': ...`:
    duplicate names in a namespace, gradient ops that are missing or do not fit the signature
    rule, ...). Not strict: the registry of every good file, the broken ones in `.errors`. A wrong
    workspace file (opsdk.yaml) raises either way: without it no op has a namespace.
    """
    roots = [BUILTIN_ROOT]
    if workspace is not None:
        root = Path(workspace).resolve()
        if not (root / "opdefs").is_dir():
            raise OpsdkError(f"{root} is not a workspace (no opdefs/ folder in it); run `opsdk new <op>` "
                             f"there to start one")
        if root != BUILTIN_ROOT:
            roots.append(root)
    stamps = tuple(_workspace_stamps(root, builtin=i == 0) for i, root in enumerate(roots))
    with _lock:
        hit = _registries.get(tuple(roots))
        if hit is None or hit[0] != stamps:
            hit = (stamps, _build(stamps))
            _registries[tuple(roots)] = hit
    registry = hit[1]
    if strict and registry.errors:
        raise OpDefErrors(list(registry.errors))
    return registry


def _workspace_stamps(root: Path, builtin: bool) -> tuple:
    workspace = Workspace(root)
    config = root / WORKSPACE_FILE
    marker = _stamp(config) if config.is_file() and not builtin else None
    namespace = BUILTIN_NAMESPACE if builtin else _namespace(workspace, marker)
    return root, namespace, tuple(_stamp(p) for p in workspace.declaration_files())


_namespaces: dict[tuple, str] = {}


def _namespace(workspace: Workspace, marker: Optional[tuple]) -> str:
    key = (workspace.root, marker)
    if key not in _namespaces:
        _namespaces[key] = workspace.namespace  # OpDefErrors for a wrong opsdk.yaml: never cached
    return _namespaces[key]


def _stamp(path: Path) -> tuple[Path, int, int]:
    stat = path.stat()
    return path, stat.st_mtime_ns, stat.st_size


class _Loading:
    """What `_build` gathers: good specs by qualified name, broken files and their ops."""

    def __init__(self) -> None:
        self.specs: dict[str, OpSpec] = {}
        self.broken: dict[str, list[OpDefError]] = {}
        self.broken_ops: dict[str, str] = {}

    def set_aside(self, file: str, errors: list[OpDefError], namespace: str) -> None:
        """Mark `file` broken: its ops leave the registry, and asking for them shows `errors`."""
        self.broken.setdefault(file, []).extend(errors)
        names = {s.name for s in self.specs.values() if s.namespace == namespace and s.file == file}
        names |= {e.op for e in errors if e.op}
        if not names:  # a file too broken to name its op: by convention opdefs/<op>.yaml
            names = {Path(file).stem}
        for name in names:
            qualified = f"{namespace}{SEPARATOR}{name}"
            self.broken_ops[qualified] = file
            spec = self.specs.get(qualified)
            if spec is not None and spec.file == file:
                del self.specs[qualified]


def _build(stamps: tuple) -> Registry:
    loading = _Loading()
    for root, namespace, files in stamps:
        for stamp in files:
            file = _shown(stamp[0], root)
            try:
                parsed = _parse_cached(root, namespace, stamp)
            except OpDefErrors as exc:
                loading.set_aside(file, exc.errors, namespace)
                continue
            _add_file(loading, parsed, file, namespace)
    _inherit_named_dims(loading)
    _check_gradients(loading)
    return Registry(loading.specs, namespace=stamps[-1][1], broken=loading.broken,
                    broken_ops=loading.broken_ops)


def _add_file(loading: _Loading, parsed: list[OpSpec], file: str, namespace: str) -> None:
    clashes = [OpDefError(spec.location, spec.name, f"declared twice: also at "
                                                    f"{loading.specs[spec.qualified_name].location}; rename one")
               for spec in parsed if spec.qualified_name in loading.specs]
    if clashes:
        loading.set_aside(file, clashes, namespace)
        return
    loading.specs.update((spec.qualified_name, spec) for spec in parsed)


def _check_gradients(loading: _Loading) -> None:
    """Set aside each file holding an op whose gradient op is wrong, until none is left: a file
    set aside may take away the gradient op of another."""
    while True:
        found: dict[tuple[str, str], list[OpDefError]] = {}
        for spec in loading.specs.values():
            errors = _gradient_errors(spec, loading)
            if errors:
                found.setdefault((spec.file, spec.namespace), []).extend(errors)
        if not found:
            return
        for (file, namespace), errors in found.items():
            loading.set_aside(file, errors, namespace)


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _parse_cached(root: Path, namespace: str, stamp: tuple) -> list[OpSpec]:
    key = (root, namespace, *stamp)
    if key not in _files:
        specs = parse_opdef(stamp[0], root, namespace=namespace)
        for old in [k for k in _files if k[0] == root and k[2] == stamp[0]]:
            del _files[old]  # an earlier version of the same file
        _files[key] = specs
    return _files[key]


def _inherit_named_dims(loading: _Loading) -> None:
    """Gradient ops use their forward op's named dims (`dims:`) by name (docs/opdefs.md)."""
    for spec in list(loading.specs.values()):
        if not spec.derived_dims or spec.gradient_op is None:
            continue
        for candidate in (f"{spec.namespace}{SEPARATOR}{spec.gradient_op}",
                          f"{BUILTIN_NAMESPACE}{SEPARATOR}{spec.gradient_op}"):
            grad = loading.specs.get(candidate)
            if grad is not None:
                loading.specs[candidate] = inherit_named_dims(spec, grad)
                break


def _gradient_errors(spec: OpSpec, loading: _Loading) -> list[OpDefError]:
    name = spec.gradient_op
    if name is None:
        return []
    where = spec.gradient_location or spec.location
    for candidate in (f"{spec.namespace}{SEPARATOR}{name}", f"{BUILTIN_NAMESPACE}{SEPARATOR}{name}"):
        grad = loading.specs.get(candidate)
        if grad is not None:
            return [OpDefError(where, spec.name, problem) for problem in gradient_problems(spec, grad)]
        broken = loading.broken_ops.get(candidate)
        if broken is not None:
            return [OpDefError(where, spec.name, f"gradient op '{name}' is declared in {broken}, which has "
                                                 f"errors; fix them first", derived=True)]
    own = [s.name for s in loading.specs.values() if s.namespace in (spec.namespace, BUILTIN_NAMESPACE)]
    return [OpDefError(where, spec.name, f"gradient op '{name}' does not exist{did_you_mean(name, own)}; "
                                         f"declare it, or write 'gradient: stop' (no gradient) or null")]
