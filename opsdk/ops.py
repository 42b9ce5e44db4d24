"""Every builtin op as a function: `from opsdk import ops; ops.pairwise_manhattan(x, y)`.

The functions are the generated wrappers of the opsdk repository itself (generated/python/ops.py),
loaded on first use, so importing opsdk stays cheap.
"""

from __future__ import annotations

from typing import Any

from opsdk.registry import BUILTIN_ROOT


def _builtin_ops():
    from opsdk.runtime.frontend.ops_module import load_ops

    return load_ops(BUILTIN_ROOT)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    module = _builtin_ops()
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"opsdk.ops has no op '{name}' (see `opsdk list` for the builtin ops)") from None


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_builtin_ops().__all__))
