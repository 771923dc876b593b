"""Bounded YAML composing for manifests read from Git; private to :mod:`gitsync.source.manifests`.

A manifest file is written by whoever can push to the repository, so turning it into nodes
must have a bounded cost: :class:`Composer` counts nesting depth, alias expansion, nodes and
bytes (per value, per document, per file) while it builds the nodes, and stops the file with
:class:`TooComplex` at the first limit hit. It also records duplicate mapping keys, which
PyYAML would settle silently in favour of the last one (a key both given and merged by
``<<`` is refused as it is constructed, for the same reason), and :func:`line_of` finds a
field's line in the composed nodes so that an error can point at it.

Plain scalars are read as kubectl reads them (sigs.k8s.io/yaml, on go-yaml v2), not as
PyYAML's YAML 1.1 does: ``1:20`` is the string "1:20", not the sexagesimal 80 (whose
conversion is also quadratic in the number of parts); ``0o17``, ``0x1F``, ``0b101`` and
``1_000`` are integers; an integer only when it fits 64 bits (beyond, a float or a string,
never an unbounded conversion); a date stays a string; ``y`` and ``n`` are booleans. So
what ``gitsync validate`` accepts is what ``kubectl apply`` would send (docs/operating.md
lists where gitsync is stricter).

Apart from ``manifests`` because it is about YAML alone: it knows nothing of files, MyApps
or the schema.

Why not PyYAML alone (or another YAML library): PyYAML does the scanning and parsing
here; what none of them offers is a cost bound while composing, duplicate keys
reported rather than settled, and kubectl's reading of plain scalars.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from gitsync.errors import plain_or_quote, quote

# libyaml parses ~10x faster than the pure-Python parser and gives the same events and marks
if TYPE_CHECKING:
    _Base = yaml.SafeLoader
else:
    _Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# aliases share nodes, so a small file can stand for a huge tree; a 1 MiB file of plain YAML
# has well under this many nodes (and bytes), so anything above is amplification, refused
MAX_NODES_PER_FILE = 1_000_000
MAX_BYTES_PER_FILE = 8 << 20

STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
MERGE = "tag:yaml.org,2002:merge"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"


class TooComplex(Exception):
    """A limit was hit while composing; the rest of the file is not read."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.line: int | None = mark.line + 1 if mark is not None else None
        self.column: int | None = mark.column + 1 if mark is not None else None


# --- scalars, as go-yaml v2 resolves them --------------------------------------------------

# go-yaml v2's booleans, y, Y, n and N among them (PyYAML and YAML 1.2 read those as
# strings): kubectl sends `value: y` as true, which the API server refuses where a string
# is wanted; so gitsync refuses it too, rather than apply "y" where kubectl applies nothing
_BOOLS = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE"), True),
    **dict.fromkeys(("on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE"), False),
    **dict.fromkeys(("off", "Off", "OFF"), False),
}
_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_SPECIAL_FLOATS = {
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
# Go's strconv.ParseInt(s, 0, 64) grammar, once go-yaml has removed every "_"
_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|0[0-7]*|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")  # ParseFloat of what starts with "."
# digits of 2**64 in each base: anything longer is out of range, and is never converted
_MAX_DIGITS = {2: 64, 8: 22, 10: 20, 16: 16}
_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1


def go_int(text: str) -> int | None:
    """The integer go-yaml v2 reads from a plain scalar, or None. Linear in ``text``."""
    m = _INT.fullmatch(text.replace("_", ""))
    if m is None:
        return None
    sign, body = m.groups()
    prefix = body[:2].lower()
    base = {"0x": 16, "0b": 2, "0o": 8}.get(prefix, 8 if body[0] == "0" else 10)
    digits = body[2:] if prefix in ("0x", "0b", "0o") else body
    digits = digits.lstrip("0") or "0"
    if len(digits) > _MAX_DIGITS[base]:
        return None  # beyond 64 bits: checked before converting, so never costly
    value = int(digits, base)
    if sign == "-":
        value = -value
    # ParseInt: int64; then ParseUint: unsigned, and without a sign
    if _INT64_MIN <= value < 2**63 or (not sign and value <= _UINT64_MAX):
        return value
    return None


def go_float(text: str) -> float | None:
    """The float go-yaml v2 reads from a plain scalar that is not an integer, or None."""
    if text in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[text]
    if text.startswith("."):
        plain = text if _DOT_FLOAT.fullmatch(text) else ""
    else:
        plain = text.replace("_", "")
        plain = plain if _FLOAT.fullmatch(plain) else ""
    if not plain:
        return None
    value = float(plain)
    return None if math.isinf(value) else value  # Go: out of range, so a string


def resolve(value: str, plain: bool) -> str:
    """The tag of an untagged scalar: go-yaml v2's resolve(), without timestamps (which
    sigs.k8s.io/yaml hands on as strings)."""
    if not plain:
        return STR  # quoted or block scalars are strings
    if value in _NULLS:
        return NULL
    if value in _BOOLS:
        return BOOL
    if value == "<<":
        return MERGE
    if value[:1] in ("+", "-", ".", *"0123456789"):  # go-yaml looks no further otherwise
        if go_int(value) is not None:
            return INT
        if go_float(value) is not None:
            return FLOAT
    return STR


class Loader(_Base):
    """The safe loader, constructing int, float and bool as :func:`resolve` reads them, so
    that an explicit ``!!int 1:20`` is refused the way kubectl refuses it."""

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """The merge key ``<<`` as the YAML merge spec and go-yaml (so kubectl) read it:
        the merged mappings in their order, the first of ``<<: [*a, *b]`` before the
        second. (PyYAML 6.0.2 and later let the last win.) A key both given and merged,
        or merged by two ``<<`` keys, is refused: go-yaml keeps whichever comes last, the
        merge spec the given one, so what was meant is not known."""
        own: list[tuple[yaml.Node, yaml.Node]] = []
        merged: list[list[tuple[yaml.Node, yaml.Node]]] = []
        merges: list[tuple[yaml.Node, list[yaml.Node]]] = []  # each << and the keys it brings
        for key_node, value_node in node.value:
            if key_node.tag != MERGE:
                if key_node.tag == "tag:yaml.org,2002:value":
                    key_node.tag = STR
                own.append((key_node, value_node))
                continue
            subs = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            keys: list[yaml.Node] = []
            for sub in subs:
                if not isinstance(sub, yaml.MappingNode):
                    raise ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"expected a mapping or list of mappings for merging, found {sub.id}",
                        sub.start_mark,
                    )
                self.flatten_mapping(sub)
                merged.append(sub.value)
                keys += [k for k, _ in sub.value]
            merges.append((key_node, keys))
        if merged:
            _refuse_overlap([k for k, _ in own], merges)
            # a mapping is constructed key by key, the last of equal keys kept: so the
            # pairs that win come last
            node.value = [pair for pairs in reversed(merged) for pair in pairs] + own


def _refuse_overlap(own: list[yaml.Node], merges: list[tuple[yaml.Node, list[yaml.Node]]]) -> None:
    """Raises at the first key that more than one of ``own`` and ``merges`` sets (keys of
    one ``<<: [*a, *b]`` may repeat: the first wins, in go-yaml as in the merge spec)."""
    by: dict[object, yaml.Node] = {}  # a merged key -> the << that merged it first
    for merge_node, keys in merges:
        mine = {key_value(k): k for k in keys}
        for key, key_node in mine.items():
            first = by.setdefault(key, merge_node)
            if first is not merge_node:
                msg = (
                    f"key {quote(str(key_node.value))} is merged by two '<<' keys (lines"
                    f" {first.start_mark.line + 1} and {merge_node.start_mark.line + 1}):"
                    " kubectl keeps the last, so merge it once"
                )
                raise ConstructorError(None, None, msg, merge_node.start_mark)
    for key_node in own:
        merger = by.get(key_value(key_node))
        if merger is not None:
            msg = (
                f"key {quote(str(key_node.value))} is both given and merged by the '<<' on"
                f" line {merger.start_mark.line + 1}: kubectl keeps whichever comes last,"
                " so give it once"
            )
            raise ConstructorError(None, None, msg, key_node.start_mark)


def _construct(
    kind: str, read: Callable[[str], object | None]
) -> Callable[[yaml.SafeLoader, yaml.ScalarNode], object]:
    def construct(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> object:
        value = read(str(node.value))
        if value is None:
            msg = f"cannot read {quote(node.value)} as {kind}"
            raise ConstructorError(None, None, msg, node.start_mark)
        return value

    return construct


def _int_or_float(text: str) -> float | None:
    number = go_int(text)
    return float(number) if number is not None else go_float(text)


def _timestamp(text: str) -> object | None:
    # PyYAML's own constructor fails with an AttributeError on what its pattern does not
    # match (a five-digit year); only an explicit !!timestamp gets here, plain dates stay
    # strings
    node = yaml.ScalarNode("tag:yaml.org,2002:timestamp", text)
    try:
        return SafeConstructor.construct_yaml_timestamp(_TIMESTAMPS, node)
    except (AttributeError, ValueError, OverflowError):
        return None


_TIMESTAMPS = SafeConstructor()

Loader.add_constructor(INT, _construct("an integer", go_int))
Loader.add_constructor(FLOAT, _construct("a float", _int_or_float))
Loader.add_constructor(BOOL, _construct("a boolean", _BOOLS.get))
Loader.add_constructor("tag:yaml.org,2002:timestamp", _construct("a timestamp", _timestamp))


def key_value(node: yaml.Node) -> object:
    """What a scalar mapping key constructs to (``~`` is None, ``0x1`` is 1, ``on`` is
    True), so that a field path built from constructed keys finds its key node again."""
    if not isinstance(node, yaml.ScalarNode):
        return node
    text = str(node.value)
    read: dict[str, Callable[[str], object | None]] = {
        NULL: lambda _: None,
        BOOL: _BOOLS.get,
        INT: go_int,
        FLOAT: _int_or_float,
    }
    return read[node.tag](text) if node.tag in read else text


# --- composing, within bounds --------------------------------------------------------------


@dataclass
class _Built:
    node: yaml.Node
    size: int  # nodes in the tree once aliases are expanded
    aliases: int  # alias uses in the tree once aliases are expanded
    nbytes: int  # once aliases are expanded: 1 per node + the UTF-8 bytes of each scalar
    mark: Any  # where it starts (for an alias, the alias)


def _nbytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


class Composer:
    """Builds nodes from parser events, bounding depth and alias expansion as it goes.

    libyaml's composer cannot be hooked, and the alias bomb is cheap to compose (nodes are
    shared) but explodes in whatever walks the result; so count here what a walk would see.
    """

    def __init__(
        self,
        loader: Any,
        *,
        max_depth: int,
        max_aliases: int,
        max_document_bytes: int,
        max_value_bytes: int,
    ) -> None:
        self._loader = loader
        self._max_depth = max_depth
        self._max_aliases = max_aliases
        self._max_document_bytes = max_document_bytes
        self._max_value_bytes = max_value_bytes
        self._anchors: dict[str, _Built] = {}
        self._open: set[str] = set()
        self._file_nodes = 0
        self._file_bytes = 0
        self._between = True
        self.index = -1
        #: (key, line, column) of each repeated key in the current document
        self.duplicate_keys: list[tuple[str, int, int]] = []

    @property
    def document(self) -> int:
        """The index of the document an error found now is in: between two documents
        (a bad directive or document start), the next one."""
        return self.index + 1 if self._between else self.index

    def documents(self) -> Iterator[yaml.Node]:
        self._loader.get_event()  # StreamStartEvent
        while True:
            self._between = True
            if self._loader.check_event(yaml.StreamEndEvent):
                break
            ev = self._loader.get_event()  # DocumentStartEvent
            if getattr(ev, "version", None) or getattr(ev, "tags", None):
                # kubectl cuts a file into documents at its "---" lines before parsing, so
                # a directive is a document of its own to it, which it refuses: a file with
                # %YAML (1.1 or 1.2) or %TAG is refused here too, not read as libyaml would
                raise yaml.parser.ParserError(
                    None,
                    None,
                    "a %YAML or %TAG directive: kubectl cannot read a file that has one"
                    " (remove it)",
                    ev.start_mark,
                )
            self._between = False
            self.index += 1
            self._anchors.clear()  # anchors never cross documents
            self.duplicate_keys = []
            built = self._compose(0)
            self._loader.get_event()  # DocumentEndEvent
            self._file_nodes += built.size
            self._file_bytes += built.nbytes
            if self._file_nodes > MAX_NODES_PER_FILE:
                raise TooComplex("too many YAML nodes once aliases are expanded", ev.start_mark)
            if self._file_bytes > MAX_BYTES_PER_FILE:
                msg = (
                    f"the file holds more than {MAX_BYTES_PER_FILE} bytes once aliases are expanded"
                )
                raise TooComplex(msg, ev.start_mark)
            yield built.node

    def _compose(self, depth: int) -> _Built:
        ev = self._loader.get_event()
        if isinstance(ev, yaml.AliasEvent):
            return self._alias(ev)
        if isinstance(ev, yaml.ScalarEvent):
            tag = ev.tag
            if tag is None:
                tag = resolve(ev.value, ev.implicit[0])
            elif tag == "!":  # the non-specific tag of a quoted scalar: a string
                tag = STR
            marks: Any = (ev.start_mark, ev.end_mark)  # libyaml's Mark type, same fields
            node = yaml.ScalarNode(tag, ev.value, marks[0], marks[1], style=ev.style)
            return self._anchor(ev, _Built(node, 1, 0, 1 + _nbytes(ev.value), ev.start_mark))
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
            raise TooComplex(f"recursive alias *{plain_or_quote(ev.anchor)}", ev.start_mark)
        target = self._anchors.get(ev.anchor or "")
        if target is None:
            raise TooComplex(f"undefined alias *{plain_or_quote(ev.anchor or '')}", ev.start_mark)
        built = _Built(target.node, target.size, target.aliases + 1, target.nbytes, ev.start_mark)
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
        built = _Built(node, 1, 0, 1, ev.start_mark)
        while not self._loader.check_event(yaml.SequenceEndEvent):
            item = self._compose(depth + 1)
            node.value.append(item.node)
            self._add(built, item, ev, depth)
        node.end_mark = self._loader.get_event().end_mark
        return built

    def _mapping(self, ev: Any, depth: int) -> _Built:
        node = yaml.MappingNode(_tag(ev, _MAP), [], ev.start_mark, None, flow_style=ev.flow_style)
        built = _Built(node, 1, 0, 1, ev.start_mark)
        keys: set[str] = set()
        while not self._loader.check_event(yaml.MappingEndEvent):
            key = self._compose(depth + 1)
            value = self._compose(depth + 1)
            if isinstance(key.node, yaml.ScalarNode) and key.node.value != "<<":
                # PyYAML keeps the last of two equal keys silently; a GitOps tool must not
                if key.node.value in keys:
                    mark = key.node.start_mark
                    self.duplicate_keys.append((key.node.value, mark.line + 1, mark.column + 1))
                keys.add(key.node.value)
            node.value.append((key.node, value.node))
            self._add(built, key, ev, depth)
            self._add(built, value, ev, depth)
        node.end_mark = self._loader.get_event().end_mark
        return built

    def _add(self, parent: _Built, child: _Built, ev: Any, depth: int) -> None:
        # bytes are counted as the tree grows, so an amplified value is stopped before
        # anything walks (and copies) it: one 256 KiB anchor used 100 times is 25 MiB
        self._value_bounded(child)
        parent.size += child.size
        parent.aliases += child.aliases
        parent.nbytes += child.nbytes
        self._bounded(parent, ev)
        if depth == 0:  # the document itself
            if parent.nbytes > self._max_document_bytes:
                msg = f"the document is larger than {self._max_document_bytes} bytes"
                raise TooComplex(msg + " once aliases are expanded", child.mark)
        else:
            self._value_bounded(parent, child.mark)

    def _value_bounded(self, built: _Built, mark: Any = None) -> None:
        if built.nbytes > self._max_value_bytes:
            msg = f"a value is larger than {self._max_value_bytes} bytes"
            if built.aliases:
                msg += " once aliases are expanded"
            raise TooComplex(msg, mark or built.mark)


def _tag(ev: Any, default: str) -> str:
    return default if ev.tag in (None, "!") else str(ev.tag)


def line_of(
    node: yaml.Node, path: Sequence[str | int], name: Callable[[object], str] = str
) -> tuple[int, int]:
    """Line and column of the deepest node on ``path`` (for a mapping entry, its key's).

    ``name`` turns a constructed key into its path segment, as the schema named it (a
    ``~`` key is the segment ``null``, not ``~``)."""
    mark = node.start_mark
    for seg in path:
        if isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]
            found = next(
                ((k, v) for k, v in match if k.value == str(seg) or name(key_value(k)) == seg),
                None,
            )
            if found is None:
                break
            mark, node = found[0].start_mark, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and seg < len(node.value):
            node = node.value[seg]
            mark = node.start_mark
        else:
            break
    return mark.line + 1, mark.column + 1
