"""Where an SMD path stands, at the edges: the leaves of a body in the body's own order,
a path through a value of another shape, list items that are not maps, an alias, and
the loader's lines of a list shorter than the value."""

from __future__ import annotations

import pytest
import yaml

from gitsync.engine import fieldpaths
from gitsync.engine.fieldpaths import leaves, line_in, line_of, lines_of, value_at
from gitsync.source._yaml import Loader

DOC = """\
a: &b
  x: 1
c: *b
l:
  - plain
  - name: x
"""
ENV_Z = ("f:spec", "f:env", 'k:{"name":"Z"}')
ENV_A = ("f:spec", "f:env", 'k:{"name":"A"}')


def _node(text: str = DOC) -> yaml.Node:
    node = yaml.compose(text, Loader=Loader)
    assert node is not None
    return node


def test_leaves_follow_the_body_not_the_alphabet() -> None:
    body = {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {"name": "web", "labels": {"z": "1", "a": "2"}},
        "spec": {
            "image": "nginx",
            "env": [{"name": "Z", "value": "1"}, {"name": "A", "value": "2"}],
            "command": ["serve", "--port"],
        },
    }
    # what can drift first (the spec), then the metadata compared
    assert leaves(body) == [
        ("f:spec", "f:image"),
        (*ENV_Z, "f:name"),
        (*ENV_Z, "f:value"),
        (*ENV_A, "f:name"),
        (*ENV_A, "f:value"),
        ("f:spec", "f:command"),  # a plain list is one value
        ("f:metadata", "f:labels", "f:z"),
        ("f:metadata", "f:labels", "f:a"),
    ]


def test_value_at_a_path_through_a_value_of_another_shape_is_none() -> None:
    obj = {"a": 1, "l": ["plain", {"name": "x"}]}
    assert value_at(obj, ()) == obj
    assert value_at(obj, ("f:a", "f:deeper")) is None  # through a scalar
    assert value_at(obj, ("f:l", "f:name")) is None  # a field of a list
    assert value_at(obj, ("f:a", 'k:{"name":"x"}')) is None  # an item of a scalar
    # an item that is not a map is never the one a key names
    assert value_at(obj, ("f:l", 'k:{"name":"x"}')) == {"name": "x"}
    assert value_at(obj, ("f:l", 'k:{"name":"x"}', "f:name")) == "x"


def test_line_of_a_path_through_a_value_of_another_shape_is_none() -> None:
    node = _node()
    assert line_of(node, ()) is None
    assert line_of(node, ("f:a",)) == 1
    assert line_of(node, ("f:l",)) == 4  # the key's line, not its value's (5)
    assert line_of(node, ("f:a", "f:x")) == 2
    assert line_of(node, ("f:a", "f:x", "f:deeper")) is None
    assert line_of(node, ("f:l", "f:name")) is None
    assert line_of(node, ("f:a", 'k:{"name":"x"}')) is None
    # a list item that is not a map is skipped, not matched or misread
    assert line_of(node, ("f:l", 'k:{"name":"x"}')) == 6


def test_an_aliased_node_is_walked_once_where_its_anchor_is() -> None:
    lines = lines_of(_node())
    assert lines == ("a", 1, ("x", 2, None), "c", 3, None, "l", 4, (5, None, 6, ("name", 6, None)))
    obj = yaml.safe_load(DOC)
    assert line_in(lines, obj, ("f:a", "f:x")) == 2
    # the alias holds the value, but no line of its own
    assert obj["c"] == {"x": 1}
    assert line_in(lines, obj, ("f:c",)) == 3
    assert line_in(lines, obj, ("f:c", "f:x")) is None


def test_line_in_a_path_through_a_value_of_another_shape_is_none() -> None:
    lines, obj = lines_of(_node()), yaml.safe_load(DOC)
    assert line_in(lines, obj, ()) is None
    assert line_in(lines, obj, ("f:a", "f:x", "f:deeper")) is None
    assert line_in(lines, obj, ("f:l", "f:name")) is None
    assert line_in(lines, obj, ("f:a", 'k:{"name":"x"}')) is None
    assert line_in(lines, obj, ("f:l", 'k:{"name":"x"}')) == 6
    assert line_in(lines, obj, ("f:l", 'k:{"name":"x"}', "f:name")) == 6


def test_line_in_a_value_longer_than_its_lines_is_none() -> None:
    """A value and lines of two different documents (the value read again after the
    file changed): an item past the lines' end has no line, and nothing is misread."""
    lines = lines_of(_node("l:\n  - name: a\n  - name: b\n"))
    obj = {"l": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
    assert line_in(lines, obj, ("f:l", 'k:{"name":"b"}')) == 3
    assert line_in(lines, obj, ("f:l", 'k:{"name":"c"}')) is None


def test_documents_written_alike_share_one_lines_and_their_parts() -> None:
    web, api = (
        lines_of(_node(f"metadata:\n  name: {n}\nspec:\n  image: {n}:1\n  port: 80\n"))
        for n in ("web", "api")
    )
    assert web == api and web is api
    other = lines_of(_node("metadata:\n  name: db\nspec:\n  port: 80\n  image: db:1\n"))
    assert other != web
    assert other is not None and web is not None
    assert other[2] is web[2]  # the same metadata part, held once


def test_lines_nothing_holds_are_forgotten_parts_too_and_held_ones_kept() -> None:
    fieldpaths._sweep()
    before = len(fieldpaths._LINES)
    kept = lines_of(_node("kept:\n  a: {b: 1}\n"))
    lines_of(_node("gone:\n  a: {b: 1}\n  c: 2\n"))
    # kept: the whole, {a}, {b}; gone: its whole and {a, c} (its {b} is kept's)
    assert len(fieldpaths._LINES) == before + 5
    assert fieldpaths._sweep() == 2
    assert len(fieldpaths._LINES) == before + 3
    assert lines_of(_node("kept:\n  a: {b: 1}\n")) is kept
    del kept
    assert fieldpaths._sweep() == 3
    assert len(fieldpaths._LINES) == before


def test_the_table_is_swept_when_it_reaches_its_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    fieldpaths._sweep()
    before = len(fieldpaths._LINES)
    monkeypatch.setattr(fieldpaths, "_sweep_at", before + 4)
    lines_of(_node("one: {a: 1}\n"))  # two, which nothing holds once it returns
    assert len(fieldpaths._LINES) == before + 2
    two = lines_of(_node("two:\n  a: 2\n"))  # the mark: one's are forgotten, two's kept
    assert len(fieldpaths._LINES) == before + 2
    assert lines_of(_node("two:\n  a: 2\n")) is two
    assert fieldpaths._sweep_at == fieldpaths._SWEEP_AT_LEAST
    # past the least mark, the next is twice what the sweep left
    monkeypatch.setattr(fieldpaths, "_SWEEP_AT_LEAST", 1)
    monkeypatch.setattr(fieldpaths, "_sweep_at", 1)
    lines_of(_node("three:\n  a: 3\n"))
    assert fieldpaths._sweep_at == 2 * len(fieldpaths._LINES)
