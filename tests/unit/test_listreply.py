"""read_list: a LIST reply decoded one item at a time, equal to ``json.loads``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitsync.kube.listreply import read_list
from gitsync.model.api import Obj

DEPLOYMENT = {
    "metadata": {"name": "web", "namespace": "apps", "resourceVersion": "7", "uid": "u-1"},
    "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
}


def _read(reply: str | bytes) -> tuple[Obj, list[Obj]]:
    items: list[Obj] = []
    head = read_list(reply, lambda item, _: items.append(item))
    return head, items


def _as_loads(reply: str) -> tuple[Obj, list[Obj]]:
    whole = json.loads(reply)
    return {k: v for k, v in whole.items() if k != "items"}, whole.get("items") or []


@pytest.mark.parametrize(
    "reply",
    [
        # a built-in list: Go's struct order, items last, no apiVersion/kind in them
        {
            "kind": "DeploymentList",
            "apiVersion": "apps/v1",
            "metadata": {"resourceVersion": "42", "continue": "abc"},
            "items": [DEPLOYMENT, {**DEPLOYMENT, "metadata": {"name": "api"}}],
        },
        # a custom resource's list: an unstructured map, keys sorted, items in between
        {
            "apiVersion": "apps.example.com/v1",
            "items": [{"apiVersion": "apps.example.com/v1", "kind": "MyApp", **DEPLOYMENT}],
            "kind": "MyAppList",
            "metadata": {"resourceVersion": "43"},
        },
        {"kind": "List", "items": [], "metadata": {}},
        {"kind": "List", "metadata": {"resourceVersion": "1"}},
        {"kind": "List", "items": None},
        {},
        {"items": [{}, {"a": ["ü", "\u2028", '"quoted"', 1.5e300, None, True]}]},
    ],
)
@pytest.mark.parametrize("indent", [None, 2, "\t"])
def test_a_reply_reads_as_json_loads_reads_it(reply: dict[str, Any], indent: Any) -> None:
    text = json.dumps(reply, indent=indent, ensure_ascii=False)
    assert _read(text) == _as_loads(text)
    assert _read(text.encode()) == _as_loads(text)


_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(
    head=st.dictionaries(st.text().filter(lambda k: k != "items"), _json, max_size=4),
    items=st.none() | st.lists(st.dictionaries(st.text(), _json, max_size=4), max_size=5),
    at=st.integers(min_value=0, max_value=4),
    spaced=st.booleans(),
)
def test_any_list_reads_as_json_loads_reads_it(
    head: dict[str, Any], items: list[Obj] | None, at: int, spaced: bool
) -> None:
    members = list(head.items())
    if items is not None:
        members.insert(min(at, len(members)), ("items", items))
    text = json.dumps(dict(members), indent=1 if spaced else None)
    assert _read(text) == _as_loads(text)


def test_each_item_is_handed_over_before_the_next_is_decoded() -> None:
    # the second item is cut short: the first was given to ``each`` already
    reply = '{"kind":"List","items":[{"n":1},{"n":2,"x":],"metadata":{}}'
    items: list[Obj] = []
    with pytest.raises(ValueError):
        read_list(reply, lambda item, _: items.append(item))
    assert items == [{"n": 1}]


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   ",
        "[]",
        '"items"',
        "{",
        '{"items":[{"n":1}',
        '{"items":[{"n":1}]',
        '{"items":[{"n":1}]}}',
        '{"items":[{"n":1}]} x',
        '{"items":[1]}',
        '{"items":[{"n":1} {"n":2}]}',
        '{"items":[{"n":1},]}',
        '{"kind" "List"}',
        '{"kind":"List" "items":[]}',
        '{"kind":"List",}',
        "{1:2}",
        'x"kind":"List"}',
        '{"kind";"List"}',
        '{"items":[{"n":1};{"n":2}]}',
        '{"items":{}}',
        '{"items":"none"}',
        '{"items":nul}',
    ],
)
def test_what_is_not_one_list_object_is_refused(reply: str) -> None:
    with pytest.raises(ValueError):
        read_list(reply, lambda item, head: None)
    with pytest.raises(ValueError):
        read_list(reply.encode() + b"\xff", lambda item, head: None)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ('{"items":{"n":1}}', "the list's items are not an array"),
        ('{"items":[{"n":1},2]}', "an item of the list is not an object"),
        ('{"kind":"List"} {}', "extra data after the list"),
        ('{"kind":"List"', "the reply ends too soon"),
        ('{"kind";"List"}', "expected ':'"),
    ],
)
def test_a_refusal_says_what_is_wrong_and_where(reply: str, message: str) -> None:
    with pytest.raises(json.JSONDecodeError, match=message) as refused:
        read_list(reply, lambda item, head: None)
    assert refused.value.doc == reply


def test_each_item_comes_with_the_members_read_before_it() -> None:
    seen: list[tuple[Obj, Obj]] = []
    reply = '{"kind":"DeploymentList","apiVersion":"apps/v1","items":[{"n":1}],"metadata":{}}'
    head = read_list(reply, lambda item, before: seen.append((item, dict(before))))
    assert seen == [({"n": 1}, {"kind": "DeploymentList", "apiVersion": "apps/v1"})]
    assert head == {"kind": "DeploymentList", "apiVersion": "apps/v1", "metadata": {}}
    seen.clear()
    read_list('{"apiVersion":"v1","items":[{"n":1}],"kind":"L"}', lambda i, b: seen.append((i, b)))
    assert seen == [({"n": 1}, {"apiVersion": "v1", "kind": "L"})]  # the same dict, filled on


def test_what_each_raises_is_raised_as_it_is() -> None:
    def each(item: Obj, head: Obj) -> None:
        raise IndexError("the caller's own")

    with pytest.raises(IndexError, match="the caller's own"):
        read_list('{"items":[{"n":1}]}', each)
