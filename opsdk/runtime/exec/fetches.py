"""Fetch structures: nested lists, tuples, dicts and namedtuples of graph elements.

`Session.run` flattens what it is asked for into unique graph elements, runs them once, and
rebuilds the same structure around the values (None for an Operation).
"""

from __future__ import annotations

from typing import Any, Callable

from opsdk.registry.errors import OpsdkError

from opsdk.runtime.ir.graph import Graph, Operation
from opsdk.runtime.ir.tensor import Tensor


class FetchStructure:
    """The unique elements of a fetch and how to put their values back in shape."""

    def __init__(self, graph: Graph, fetches: Any):
        self.graph = graph
        self.elements: list[Tensor | Operation] = []
        self._index: dict[Any, int] = {}
        self._build: Callable[[list], Any] = self._flatten(fetches)
        if type(fetches) in (list, tuple) and len(self.elements) == len(fetches) and not any(
                isinstance(f, (dict, list, tuple)) for f in fetches):
            # a flat list (tuple) of distinct elements, as a training loop fetches: the values,
            # in element order, are the result
            self._build = type(fetches)

    def rebuild(self, values: list) -> Any:
        """The fetch's structure with each element replaced by its value (per element index)."""
        return self._build(values)

    def _flatten(self, fetch: Any) -> Callable[[list], Any]:
        if isinstance(fetch, dict):
            parts = {k: self._flatten(v) for k, v in fetch.items()}
            kind = type(fetch)
            return lambda vals: kind((k, p(vals)) for k, p in parts.items())
        if isinstance(fetch, tuple) and hasattr(fetch, "_fields"):  # a namedtuple
            parts = [self._flatten(v) for v in fetch]
            kind = type(fetch)
            return lambda vals: kind(*(p(vals) for p in parts))
        if isinstance(fetch, (list, tuple)):
            parts = [self._flatten(v) for v in fetch]
            kind = type(fetch)
            return lambda vals: kind(p(vals) for p in parts)
        element = self._element(fetch)
        if element not in self._index:
            self._index[element] = len(self.elements)
            self.elements.append(element)
        i = self._index[element]
        return lambda vals: vals[i]

    def _element(self, fetch: Any) -> Tensor | Operation:
        if fetch is None:
            raise OpsdkError("cannot fetch None; fetch a Tensor, an Operation or a name")
        try:
            return self.graph.as_graph_element(fetch)
        except OpsdkError as exc:
            what = getattr(fetch, "name", fetch)
            if isinstance(fetch, (Tensor, Operation)):
                raise OpsdkError(f"cannot fetch '{what}': it belongs to another graph than "
                                 "this session's") from None
            raise OpsdkError(f"cannot fetch {what!r}: {exc}") from None
