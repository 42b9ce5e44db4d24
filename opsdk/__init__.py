"""opsdk: declare a tensor op once in YAML, write only the kernel body, run it in dataflow graphs.

    import numpy as np, opsdk
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float32", shape=[None, 3], name="x")
        y = x * 2.0 + 1.0
    with opsdk.Session(g) as sess:
        print(sess.run(y, {x: np.ones((2, 3))}))

Names are imported on first use (PEP 562), so `import opsdk` stays cheap for the CLI.
"""

from __future__ import annotations

import importlib
from typing import Any

from opsdk import _process

__version__ = "0.1.0"

_process.tune()  # OpenMP's idle threads sleep; glibc keeps freed arrays (opsdk/_process.py)

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    **{name: "opsdk.runtime.ir.graph" for name in (
        "Graph", "GraphKeys", "Operation", "Tensor", "constant", "control_dependencies", "device",
        "get_default_graph", "name_scope", "placeholder", "reset_default_graph")},
    **{name: "opsdk.runtime.exec.session" for name in ("Session", "SessionConfig")},
    **{name: "opsdk.runtime.frontend.variables" for name in (
        "Variable", "global_variables", "global_variables_initializer", "trainable_variables")},
    **{name: "opsdk.runtime.frontend.api" for name in ("apply_op", "workspace_applier")},
    **{name: "opsdk.runtime.control_flow.builders" for name in ("cond", "while_loop")},
    "gradients": "opsdk.runtime.autodiff.gradients",
    **{name: "opsdk.runtime.train.optimizers" for name in (
        "GradientDescentOptimizer", "MomentumOptimizer", "AdagradOptimizer", "AdamOptimizer",
        "RMSPropOptimizer")},
    **{name: "opsdk.runtime.train.saver" for name in ("Saver", "latest_checkpoint")},
    "load_ops": "opsdk.runtime.frontend.ops_module",
    "load_registry": "opsdk.registry",
    "OpsdkError": "opsdk.registry.errors",
    "OpError": "opsdk.registry.errors",
    "CancelledError": "opsdk.runtime.exec.executor",
}

__all__ = sorted([*_EXPORTS, "ops"])


def __getattr__(name: str) -> Any:
    if name == "ops":
        # The wrappers of the ops this repository declares (builtin + pairwise_manhattan).
        from opsdk.registry import BUILTIN_ROOT
        from opsdk.runtime.frontend.ops_module import load_ops
        value = load_ops(BUILTIN_ROOT)
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'opsdk' has no attribute '{name}'")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS, "ops"])
