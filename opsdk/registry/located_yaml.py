"""YAML loaded safely into a small located tree: every key and value knows its line.

PyYAML's composer gives nodes with marks; we turn them into frozen `YScalar`/`YSeq`/`YMap` once,
so the parser can say `file:line` for any mistake. Only the safe constructor is used (no Python
tags), and aliases are converted once per node so an alias bomb costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import yaml

from .errors import Location, OpDefError

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR_TAG = "tag:yaml.org,2002:str"


@dataclass(frozen=True)
class YScalar:
    """A scalar: `value` as the safe constructor reads it, `text` as written (for names)."""

    value: Any
    text: str
    line: int


@dataclass(frozen=True)
class YSeq:
    items: tuple["YNode", ...]
    line: int


@dataclass(frozen=True)
class YEntry:
    """One `key: value` of a mapping; keys are kept as their written text."""

    key: str
    key_line: int
    value: "YNode"


@dataclass(frozen=True)
class YMap:
    entries: tuple[YEntry, ...]
    line: int

    def keys(self) -> list[str]:
        return [e.key for e in self.entries]

    def get(self, key: str) -> Optional[YEntry]:
        return next((e for e in self.entries if e.key == key), None)


YNode = Union[YScalar, YSeq, YMap]

# What a user sees when a value has the wrong YAML type.
KIND_NAMES = {YScalar: "a scalar", YSeq: "a list", YMap: "a mapping"}


def load_documents(path: Path, shown: str) -> list[YNode]:
    """The non-empty YAML documents of a file, located; `shown` is the file name for messages.

    Raises YamlLoadError (carrying located OpDefErrors) for unreadable files and syntax errors.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise YamlLoadError([OpDefError(Location(shown, 1), None, f"cannot read the file: {exc}")]) from None
    converter = _Converter(shown)
    docs: list[YNode] = []
    try:
        for node in yaml.compose_all(text, Loader=_LOADER):
            if node is None or (isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null")):
                continue  # an empty document, e.g. after a trailing `---`
            converter.done.clear()  # ids are only unique among live nodes, and aliases stay in one document
            docs.append(converter.convert(node))
    except yaml.YAMLError as exc:
        raise YamlLoadError([_syntax_error(exc, shown)]) from None
    if converter.errors:
        raise YamlLoadError(converter.errors)
    return docs


class YamlLoadError(Exception):
    """Carries the located errors of a file that could not be read as YAML."""

    def __init__(self, errors: list[OpDefError]):
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = errors


def _syntax_error(exc: yaml.YAMLError, shown: str) -> OpDefError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else 1
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    what = f"{context}, {problem}" if context else problem
    return OpDefError(Location(shown, line), None, f"YAML syntax error: {what}")


class _Converter:
    """Node -> YNode, memoised by node identity (aliases share one result) and cycle-safe."""

    def __init__(self, shown: str):
        self.shown = shown
        self.done: dict[int, YNode] = {}
        self.active: set[int] = set()
        self.errors: list[OpDefError] = []
        self.constructor = yaml.constructor.SafeConstructor()

    def convert(self, node: yaml.Node) -> YNode:
        key = id(node)
        if key in self.done:
            return self.done[key]
        line = node.start_mark.line + 1
        if key in self.active:
            self._error(line, "a YAML alias refers to itself (recursive anchor); write the value out")
            return YScalar(None, "", line)
        self.active.add(key)
        try:
            result = self._convert(node, line)
        finally:
            self.active.discard(key)
        self.done[key] = result
        return result

    def _convert(self, node: yaml.Node, line: int) -> YNode:
        if isinstance(node, yaml.SequenceNode):
            return YSeq(tuple(self.convert(n) for n in node.value), line)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, line)
        return YScalar(self._scalar(node, line), str(node.value), line)

    def _scalar(self, node: yaml.Node, line: int) -> Any:
        if node.tag == _STR_TAG:  # most scalars: names and text, no construction needed
            return node.value
        try:
            return self.constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            self._error(line, f"cannot read the value '{node.value}': {exc}")
            return None

    def _mapping(self, node: yaml.MappingNode, line: int) -> YMap:
        entries: list[YEntry] = []
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                self._error(key_line, "keys must be plain names (no lists, mappings or '<<' merges)")
                continue
            key = str(key_node.value)
            if key in seen:
                self._error(key_line, f"key '{key}' appears twice (first at line {seen[key]}); keep one")
                continue
            seen[key] = key_line
            entries.append(YEntry(key, key_line, self.convert(value_node)))
        return YMap(tuple(entries), line)

    def _error(self, line: int, message: str) -> None:
        self.errors.append(OpDefError(Location(self.shown, line), None, message))
