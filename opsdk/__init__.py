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
from typing import TYPE_CHECKING, Any

from opsdk import _process

__version__ = "0.1.0"

_process.tune_if_asked()  # only with OPSDK_TUNE_PROCESS=1 (opsdk/_process.py)

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
    "custom_gradient": "opsdk.runtime.autodiff.custom_gradient",
    "py_func": "opsdk.runtime.frontend.py_func",
    **{name: "opsdk.runtime.train.optimizers" for name in (
        "GradientDescentOptimizer", "MomentumOptimizer", "AdagradOptimizer", "AdamOptimizer",
        "RMSPropOptimizer", "AdadeltaOptimizer", "FtrlOptimizer",
        "ProximalGradientDescentOptimizer", "ProximalAdagradOptimizer")},
    **{name: "opsdk.runtime.train.saver" for name in ("Saver", "latest_checkpoint")},
    "load_ops": "opsdk.runtime.frontend.ops_module",
    "load_registry": "opsdk.registry",
    "OpsdkError": "opsdk.registry.errors",
    "OpError": "opsdk.registry.errors",
    "CancelledError": "opsdk.runtime.exec.executor",
    "tune_process": "opsdk._process",
}

__all__ = sorted([*_EXPORTS, "ops"])

if TYPE_CHECKING:
    # What type checkers see: the real names, not `__getattr__`'s Any (a test holds this list to
    # _EXPORTS). At run time they are imported on first use, below.
    from opsdk import ops as ops
    from opsdk._process import tune_process as tune_process
    from opsdk.registry import load_registry as load_registry
    from opsdk.registry.errors import OpError as OpError, OpsdkError as OpsdkError
    from opsdk.runtime.autodiff.custom_gradient import custom_gradient as custom_gradient
    from opsdk.runtime.autodiff.gradients import gradients as gradients
    from opsdk.runtime.control_flow.builders import cond as cond, while_loop as while_loop
    from opsdk.runtime.exec.executor import CancelledError as CancelledError
    from opsdk.runtime.exec.session import Session as Session, SessionConfig as SessionConfig
    from opsdk.runtime.frontend.api import (apply_op as apply_op,
                                            workspace_applier as workspace_applier)
    from opsdk.runtime.frontend.ops_module import load_ops as load_ops
    from opsdk.runtime.frontend.py_func import py_func as py_func
    from opsdk.runtime.frontend.variables import (
        Variable as Variable, global_variables as global_variables,
        global_variables_initializer as global_variables_initializer,
        trainable_variables as trainable_variables)
    from opsdk.runtime.ir.graph import (
        Graph as Graph, GraphKeys as GraphKeys, Operation as Operation, Tensor as Tensor,
        constant as constant, control_dependencies as control_dependencies, device as device,
        get_default_graph as get_default_graph, name_scope as name_scope,
        placeholder as placeholder, reset_default_graph as reset_default_graph)
    from opsdk.runtime.train.optimizers import (
        AdagradOptimizer as AdagradOptimizer, AdamOptimizer as AdamOptimizer,
        GradientDescentOptimizer as GradientDescentOptimizer,
        MomentumOptimizer as MomentumOptimizer, RMSPropOptimizer as RMSPropOptimizer,
        AdadeltaOptimizer as AdadeltaOptimizer, FtrlOptimizer as FtrlOptimizer,
        ProximalAdagradOptimizer as ProximalAdagradOptimizer,
        ProximalGradientDescentOptimizer as ProximalGradientDescentOptimizer)
    from opsdk.runtime.train.saver import Saver as Saver, latest_checkpoint as latest_checkpoint


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
