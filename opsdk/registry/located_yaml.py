"""YAML loaded safely into a small located tree: every key and value knows its line.

PyYAML's composer gives nodes with marks; we turn them into frozen `YScalar`/`YSeq`/`YMap` once,
so the parser can say `file:line` for any mistake. Only the safe constructor is used, and explicit
tags (`!!python/...`, `!foo`) are refused rather than dropped. A first pass over the parser's events
bounds nesting (the conversion recurses) before anything is composed; aliases are converted once per
node and the values a document expands to are counted, so an alias bomb is refused in milliseconds
instead of being expanded by whatever reads the value later.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
import re
from typing import Any, Optional, Union

import yaml

from .errors import Location, OpDefError

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STD_TAG_PREFIX = "tag:yaml.org,2002:"
_STR_TAG = _STD_TAG_PREFIX + "str"

# Limits far above any real declaration (the flagship nests 4 deep and holds ~60 values).
MAX_DEPTH = 50
MAX_VALUES = 10_000
# Characters no generated C++ or Python file can carry in a comment, string or name: C0 controls
# other than tab and newline, and DEL (YAML's escapes can write them; it refuses lone surrogates).
_UNCARRIABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_TAGGED_EVENTS = (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)


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
    text = _read_text(path, shown)
    converter = _Converter(shown)
    docs: list[YNode] = []
    try:
        _check_events(text, shown)
        for node in yaml.compose_all(text, Loader=_LOADER):
            if node is None or (isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null")):
                continue  # an empty document, e.g. after a trailing `---`
            converter.done.clear()  # ids are only unique among live nodes, and aliases stay in one document
            converter.sizes.clear()
            docs.append(converter.convert(node))
    except yaml.YAMLError as exc:
        raise YamlLoadError([_syntax_error(exc, shown, text)]) from None
    if converter.errors:
        raise YamlLoadError(converter.errors)
    return docs


def _read_text(path: Path, shown: str) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        error = OpDefError(Location(shown, 1), None, f"cannot read the file: {exc.strerror}")
        raise YamlLoadError([error]) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        byte = data[exc.start:exc.start + 1].hex()
        raise YamlLoadError([OpDefError(Location(shown, line), None, f"byte 0x{byte} is not UTF-8 text; "
                                                                     f"save the file as UTF-8")]) from None


def _check_events(text: str, shown: str) -> None:
    """Refuse explicit tags and deep nesting before composing (the C parser streams events cheaply)."""
    depth, errors = 0, []
    for event in yaml.parse(text, Loader=_LOADER):
        line = event.start_mark.line + 1
        if isinstance(event, _TAGGED_EVENTS) and event.tag is not None:
            tag = _written_tag(event.tag)
            errors.append(OpDefError(Location(shown, line), None, f"explicit YAML tag '{tag}': tags are not read "
                                                                  f"in declarations; remove it and write the plain value"))
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                errors.append(OpDefError(Location(shown, line), None,
                                         f"lists and mappings nest more than {MAX_DEPTH} deep here; "
                                         f"a declaration needs a few levels"))
                break
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    if errors:
        raise YamlLoadError(errors)


def _written_tag(tag: str) -> str:
    """A resolved tag as the user wrote it: `tag:yaml.org,2002:python/x` was `!!python/x`."""
    return _clip("!!" + tag[len(_STD_TAG_PREFIX):] if tag.startswith(_STD_TAG_PREFIX) else tag)


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


class YamlLoadError(Exception):
    """Carries the located errors of a file that could not be read as YAML."""

    def __init__(self, errors: list[OpDefError]):
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = errors


def _syntax_error(exc: yaml.YAMLError, shown: str, text: str) -> OpDefError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else 1
    source = text.splitlines()[line - 1] if 0 < line <= len(text.splitlines()) else ""
    if "\t" in source[:len(source) - len(source.lstrip(" \t"))]:
        return OpDefError(Location(shown, line), None, "YAML syntax error: a tab in the indentation "
                                                       "(YAML indents with spaces only); replace it with spaces")
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    what = f"{context}, {problem}" if context else problem
    return OpDefError(Location(shown, line), None, f"YAML syntax error: {what}")


class _Converter:
    """Node -> YNode, memoised by node identity (aliases share one result) and cycle-safe."""

    def __init__(self, shown: str):
        self.shown = shown
        self.done: dict[int, YNode] = {}
        self.sizes: dict[int, int] = {}  # values a node expands to, aliases counted each time
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
        self.sizes[key] = size = 1 + sum(self.sizes.get(id(child), 1) for child in _children(node))
        if size > MAX_VALUES and not self.errors:
            self._error(line, f"this value expands to more than {MAX_VALUES} values (each *alias repeats "
                              f"its anchor's values); write it out without aliases")
            result = YScalar(None, "", line)  # nothing downstream walks the expansion
        self.done[key] = result
        return result

    def _convert(self, node: yaml.Node, line: int) -> YNode:
        if isinstance(node, yaml.SequenceNode):
            return YSeq(tuple(self.convert(n) for n in node.value), line)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, line)
        return YScalar(self._scalar(node, line), str(node.value), line)

    def _scalar(self, node: yaml.Node, line: int) -> Any:
        bad = _UNCARRIABLE.search(str(node.value))
        if bad:
            self._error(line, f"text holds the control character U+{ord(bad.group()):04X}, which generated "
                              f"code cannot carry; remove it")
            return None
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
            if _UNCARRIABLE.search(key):
                self._error(key_line, f"key {key!r} holds a control character; remove it")
                continue
            if key in seen:
                self._error(key_line, f"key '{key}' appears twice (first at line {seen[key]}); keep one")
                continue
            seen[key] = key_line
            entries.append(YEntry(key, key_line, self.convert(value_node)))
        return YMap(tuple(entries), line)

    def _error(self, line: int, message: str) -> None:
        self.errors.append(OpDefError(Location(self.shown, line), None, message))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return []
