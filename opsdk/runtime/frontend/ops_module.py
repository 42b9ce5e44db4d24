"""`load_ops`: import a workspace's generated wrappers (generated/python/ops.py) as a module.

The runtime never imports codegen: it loads what `opsdk generate` wrote. Each workspace gets its
own module name, so two workspaces' wrappers never collide, and a module is imported once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

from opsdk.registry import OpDefErrors, OpsdkError, load_registry
from opsdk.registry.errors import warn_user

_lock = threading.Lock()
_modules: dict[Path, ModuleType] = {}


def ops_path(workspace: str | Path = ".") -> Path:
    """Where the generated wrappers of a workspace live."""
    return Path(workspace).resolve() / "generated" / "python" / "ops.py"


def _module_name(root: Path) -> str:
    # Readable and unique: the folder name plus a digest of the full path.
    digest = hashlib.sha1(str(root).encode()).hexdigest()[:10]
    safe = "".join(c if c.isalnum() else "_" for c in root.name) or "root"
    return f"opsdk_generated_ops_{safe}_{digest}"


def load_ops(workspace: str | Path = ".") -> ModuleType:
    """The generated wrappers of the workspace at `workspace`: one function per op.

    One bad declaration never breaks the others: with declaration mistakes in some files, the
    module loads with a warning naming those files, the other ops work, and calling an op of a
    broken file raises its errors (`file:line: op 'x': ...`). Raises OpDefErrors when the workspace
    has mistakes and no good op, or has not been generated (generating would fail on them);
    OpsdkError when it has not been generated yet.

    >>> ops = load_ops("path/to/workspace")            # doctest: +SKIP
    >>> ops.my_op(x, scale=2.0)                        # doctest: +SKIP
    """
    root = Path(workspace).resolve()
    with _lock:
        module = _modules.get(root)
        if module is not None:
            return module
        registry = load_registry(root, strict=False)
        path = ops_path(root)
        if registry.errors and (not path.is_file() or not registry.ops_in_workspace(root)):
            # Not generated ("run opsdk generate" would fail on them), or no good op to offer.
            raise OpDefErrors(list(registry.errors))
        if not path.is_file():
            raise OpsdkError(f"{path} does not exist: run `opsdk generate` (or `opsdk build`) in {root}")
        if registry.errors:
            warn_user(_broken_warning(root, registry))
        module = _import(_module_name(root), path)
        _modules[root] = module
        return module


def _broken_warning(root: Path, registry) -> str:
    files = ", ".join(registry.broken)
    return (f"{root}: {files} ha{'s' if len(registry.broken) == 1 else 've'} declaration errors; the "
            f"ops declared there raise them when called, the others work (`opsdk list` shows them):\n"
            + "\n".join(str(e) for e in registry.errors[:5]))


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
