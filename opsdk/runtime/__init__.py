"""opsdk.runtime: graphs of ops, sessions that run them, and eager calls of single ops."""

from opsdk.runtime.ir.graph import (Graph, GraphKeys, Operation, Tensor, constant, control_dependencies, device,
                    get_default_graph, name_scope, placeholder, reset_default_graph)

__all__ = ["Graph", "GraphKeys", "Operation", "Tensor", "constant", "control_dependencies",
           "device", "get_default_graph", "name_scope", "placeholder", "reset_default_graph"]
