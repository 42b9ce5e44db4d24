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

from opsdk.registry import OpsdkError, load_registry

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

    Raises OpDefErrors listing the mistakes (`file:line: op 'x': ...`) when a declaration of the
    workspace is wrong, and OpsdkError when the workspace has not been generated yet.

    >>> ops = load_ops("path/to/workspace")            # doctest: +SKIP
    >>> ops.my_op(x, scale=2.0)                        # doctest: +SKIP
    """
    root = Path(workspace).resolve()
    with _lock:
        module = _modules.get(root)
        if module is not None:
            return module
        # Declaration mistakes first: with them, "run opsdk generate" would only fail the same way.
        load_registry(root)
        path = ops_path(root)
        if not path.is_file():
            raise OpsdkError(f"{path} does not exist: run `opsdk generate` (or `opsdk build`) in {root}")
        name = _module_name(root)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        _modules[root] = module
        return module
