"""Bounded YAML composing for manifests read from Git; private to :mod:`gitsync.manifests`.

A manifest file is written by whoever can push to the repository, so turning it into nodes
must have a bounded cost: :class:`Composer` counts nesting depth, alias expansion and nodes
per file while it builds the nodes, and stops the file with :class:`TooComplex` at the first
limit hit. It also records duplicate mapping keys, which PyYAML would settle silently in
favour of the last one, and :func:`line_of` finds a field's line in the composed nodes so
that an error can point at it.

Apart from ``manifests`` because it is about YAML alone: it knows nothing of files, MyApps
or the schema.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

# libyaml parses ~10x faster than the pure-Python parser and gives the same events and marks
Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# aliases share nodes, so a small file can stand for a huge tree; a 1 MiB file of plain YAML
# has well under this many nodes, so anything above is amplification, refused
MAX_NODES_PER_FILE = 1_000_000


class TooComplex(Exception):
    """A limit was hit while composing; the rest of the file is not read."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.line: int | None = mark.line + 1 if mark is not None else None


@dataclass
class _Built:
    node: yaml.Node
    size: int  # nodes in the tree once aliases are expanded
    aliases: int  # alias uses in the tree once aliases are expanded


class Composer:
    """Builds nodes from parser events, bounding depth and alias expansion as it goes.

    libyaml's composer cannot be hooked, and the alias bomb is cheap to compose (nodes are
    shared) but explodes in whatever walks the result; so count here what a walk would see.
    """

    def __init__(self, loader: Any, *, max_depth: int, max_aliases: int) -> None:
        self._loader = loader
        self._max_depth = max_depth
        self._max_aliases = max_aliases
        self._anchors: dict[str, _Built] = {}
        self._open: set[str] = set()
        self._file_nodes = 0
        self.index = -1
        self.duplicate_keys: list[tuple[str, int]] = []

    def documents(self) -> Iterator[yaml.Node]:
        self._loader.get_event()  # StreamStartEvent
        while not self._loader.check_event(yaml.StreamEndEvent):
            ev = self._loader.get_event()  # DocumentStartEvent
            self.index += 1
            self._anchors.clear()  # anchors never cross documents
            self.duplicate_keys = []
            built = self._compose(0)
            self._loader.get_event()  # DocumentEndEvent
            self._file_nodes += built.size
            if self._file_nodes > MAX_NODES_PER_FILE:
                raise TooComplex("too many YAML nodes once aliases are expanded", ev.start_mark)
            yield built.node

    def _compose(self, depth: int) -> _Built:
        ev = self._loader.get_event()
        if isinstance(ev, yaml.AliasEvent):
            return self._alias(ev)
        if isinstance(ev, yaml.ScalarEvent):
            tag = ev.tag
            if tag is None or tag == "!":
                tag = self._loader.resolve(yaml.ScalarNode, ev.value, ev.implicit)
            marks: Any = (ev.start_mark, ev.end_mark)  # libyaml's Mark type, same fields
            node = yaml.ScalarNode(tag, ev.value, marks[0], marks[1], style=ev.style)
            return self._anchor(ev, _Built(node, 1, 0))
        if depth >= self._max_depth:
            raise TooComplex(f"nested deeper than {self._max_depth}", ev.start_mark)
        if ev.anchor is not None:
            self._open.add(ev.anchor)
        if isinstance(ev, yaml.SequenceStartEvent):
            built = self._sequence(ev, depth)
        else:
            built = self._mapping(ev, depth)
        self._open.discard(ev.anchor or "")
        return self._anchor(ev, built)

    def _alias(self, ev: yaml.AliasEvent) -> _Built:
        if ev.anchor in self._open:
            raise TooComplex(f"recursive alias *{ev.anchor}", ev.start_mark)
        target = self._anchors.get(ev.anchor or "")
        if target is None:
            raise TooComplex(f"undefined alias *{ev.anchor}", ev.start_mark)
        built = _Built(target.node, target.size, target.aliases + 1)
        return self._bounded(built, ev)

    def _anchor(self, ev: Any, built: _Built) -> _Built:
        if ev.anchor is not None:
            self._anchors[ev.anchor] = built
        return built

    def _bounded(self, built: _Built, ev: Any) -> _Built:
        if built.aliases > self._max_aliases:
            msg = f"YAML aliases expand more than {self._max_aliases} times"
            raise TooComplex(msg, ev.start_mark)
        return built

    def _sequence(self, ev: Any, depth: int) -> _Built:
        node = yaml.SequenceNode(_tag(ev, _SEQ), [], ev.start_mark, None, flow_style=ev.flow_style)
        built = _Built(node, 1, 0)
        while not self._loader.check_event(yaml.SequenceEndEvent):
            item = self._compose(depth + 1)
            node.value.append(item.node)
            self._add(built, item, ev)
        node.end_mark = self._loader.get_event().end_mark
        return built

    def _mapping(self, ev: Any, depth: int) -> _Built:
        node = yaml.MappingNode(_tag(ev, _MAP), [], ev.start_mark, None, flow_style=ev.flow_style)
        built = _Built(node, 1, 0)
        keys: set[str] = set()
        while not self._loader.check_event(yaml.MappingEndEvent):
            key = self._compose(depth + 1)
            value = self._compose(depth + 1)
            if isinstance(key.node, yaml.ScalarNode) and key.node.value != "<<":
                # PyYAML keeps the last of two equal keys silently; a GitOps tool must not
                if key.node.value in keys:
                    self.duplicate_keys.append((key.node.value, key.node.start_mark.line + 1))
                keys.add(key.node.value)
            node.value.append((key.node, value.node))
            self._add(built, key, ev)
            self._add(built, value, ev)
        node.end_mark = self._loader.get_event().end_mark
        return built

    def _add(self, parent: _Built, child: _Built, ev: Any) -> None:
        parent.size += child.size
        parent.aliases += child.aliases
        self._bounded(parent, ev)


_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"


def _tag(ev: Any, default: str) -> str:
    return default if ev.tag in (None, "!") else str(ev.tag)


def line_of(node: yaml.Node, path: Sequence[str | int]) -> int:
    """Line of the deepest node on ``path`` (for a mapping entry, its key's line)."""
    line = node.start_mark.line + 1
    for seg in path:
        if isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]
            found = next(((k, v) for k, v in match if k.value == str(seg)), None)
            if found is None:
                return line
            line, node = found[0].start_mark.line + 1, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and seg < len(node.value):
            node = node.value[seg]
            line = node.start_mark.line + 1
        else:
            return line
    return line
