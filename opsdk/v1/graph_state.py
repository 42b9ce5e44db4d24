"""Tables that opsdk.v1 keeps per graph (variables by name, default scope numbers, summary
layouts, fetch decoders), stored on the graph object itself.

A module-level table keyed by `id(graph)` or `id(tensor)` would both keep every graph alive and
hand a freed graph's entries to the next object CPython places at the same address.
"""

from __future__ import annotations

from typing import Any


def table(graph: Any, key: str) -> dict:
    """The dict `key` of `graph`, made empty on first use."""
    attr = f"_tf1_{key}"
    found = getattr(graph, attr, None)
    if found is None:
        found = {}
        setattr(graph, attr, found)
    return found
