"""Resolving `path/file.py:function` references to a workspace's files, lazily and once.

Declarations name Python callables (shape functions, python kernels) by reference; importing them
at parse time would make loading a registry run user code, so they are resolved on first use.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path
from typing import Callable

from .diagnostics import did_you_mean
from .errors import OpsdkError
from .spec import OpSpec

_lock = threading.Lock()
_modules: dict[tuple[str, int], object] = {}


def load_callable(spec: OpSpec, reference: str, what: str = "function") -> Callable:
    """The callable named by `reference` (`pkg.module:fn`, or `path/file.py:fn` relative to the
    workspace root of `spec`), or OpsdkError naming the op and what is missing.

    >>> load_callable(spec, "opdefs/builtin/kernels_math.py:add")   # doctest: +SKIP
    <function add at ...>
    """
    module_ref, _, function = reference.rpartition(":")
    module = _module(spec, module_ref, what, reference)
    fn = getattr(module, function, None)
    if not callable(fn):
        names = [n for n in dir(module) if not n.startswith("_")]
        raise OpsdkError(f"op '{spec.name}': {what} '{reference}': no function '{function}' in "
                         f"{module_ref}{did_you_mean(function, names)}")
    return fn


def _module(spec: OpSpec, module_ref: str, what: str, reference: str) -> object:
    # Only files of the op's own workspace, followed through symlinks: the parser refuses module
    # names, and a link out of the workspace is refused here (docs/trust.md).
    path = (spec.workspace / module_ref).resolve()
    if not module_ref.endswith(".py") or not path.is_relative_to(spec.workspace.resolve()):
        raise OpsdkError(f"op '{spec.name}': {what} '{reference}' does not name a .py file inside the "
                         f"workspace {spec.workspace}; a {what} resolves only to the workspace's files")
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        raise OpsdkError(f"op '{spec.name}': {what} '{reference}': {path} does not exist") from None
    key = (str(path), mtime)
    with _lock:
        if key not in _modules:
            _modules[key] = _import_file(path, spec, what, reference)
        return _modules[key]


def _import_file(path: Path, spec: OpSpec, what: str, reference: str) -> object:
    # A unique, stable module name per file: two workspaces may both have kernels.py.
    name = "_opsdk_user_" + "".join(c if c.isalnum() else "_" for c in str(path))
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up here
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # user code: report it as the user's mistake, with its cause
        del sys.modules[name]
        raise OpsdkError(f"op '{spec.name}': {what} '{reference}': importing {path.name} failed: "
                         f"{type(exc).__name__}: {exc}") from exc
    return module


def entry_point(group: str, name: str) -> object:
    """The object the installed entry point `name` of `group` names, loaded; None when no
    distribution declares it. Every distribution is searched, not the first of each name: a
    stale opsdk.egg-info in the current folder would otherwise hide the installed metadata."""
    from importlib.metadata import distributions
    found = next((ep for dist in distributions() for ep in dist.entry_points
                  if ep.group == group and ep.name == name), None)
    return found.load() if found is not None else None
