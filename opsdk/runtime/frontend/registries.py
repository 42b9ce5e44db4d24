"""Which registry resolves an op name, decided per use, never held by a graph.

Operators (`x * 2.0`), autodiff's building blocks (zeros_like, add) and optimizers' updates are
builtin ops: they resolve in the builtin registry. A node's gradient op resolves in the registry
of the workspace that declared the node's op (`registry_of(spec)`), from that op's namespace, so
one graph may mix builtin ops and ops of any number of workspaces, in any order, even ops of the
same name (`ws_a::foo`, `ws_b::foo`).
"""

from __future__ import annotations

from opsdk.registry import BUILTIN_ROOT, Registry, load_registry
from opsdk.registry.spec import OpSpec


def builtin_registry() -> Registry:
    """The builtin ops (cached by the registry's own loader)."""
    return load_registry(None)


def registry_of(spec: OpSpec) -> Registry:
    """The registry of the workspace that declares `spec`: builtin ops plus that workspace's
    (its good files: a broken declaration elsewhere in it does not stop this op)."""
    root = spec.workspace
    return load_registry(None if root is None or root == BUILTIN_ROOT else root, strict=False)


def gradient_spec(spec: OpSpec) -> OpSpec:
    """The declared gradient op of `spec`, resolved where `spec` was declared."""
    return registry_of(spec).resolve(spec.gradient_op, spec.namespace)


class SpecRegistry:
    """A registry of one op already resolved: what `apply_op` takes to call exactly that spec
    (a gradient op, a node replayed), whichever workspace declared it."""

    def __init__(self, spec: OpSpec):
        self.spec = spec

    def get(self, name: str) -> OpSpec:
        return self.spec
