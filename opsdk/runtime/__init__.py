"""opsdk.runtime: graphs of ops, the pipeline that compiles them, the executor that runs them.

Sub-packages, each importing only those listed before it:

    ir  devices  kernels  frontend  compile  exec  autodiff  control_flow  train  io
"""

from opsdk.runtime import frontend  # noqa: F401 - Tensor operators, before any graph is built
from opsdk.runtime.ir.graph import (Graph, GraphKeys, Operation, Tensor, constant,
                                    control_dependencies, device, get_default_graph, name_scope,
                                    placeholder, reset_default_graph)

__all__ = ["Graph", "GraphKeys", "Operation", "Tensor", "constant", "control_dependencies",
           "device", "get_default_graph", "name_scope", "placeholder", "reset_default_graph"]
