"""Kube.list_items: a list read a page at a time, every page's items in order."""

from __future__ import annotations

from typing import Any

from gitsync.kube.client import Kube


def test_pages_are_followed_until_no_continue_token() -> None:
    pages = {
        None: {"items": [{"n": 1}, {"n": 2}], "metadata": {"continue": "t1"}},
        "t1": {"items": [{"n": 3}], "metadata": {"continue": "t2"}},
        "t2": {"items": [], "metadata": {}},
    }
    asked: list[dict[str, Any]] = []

    def fake_list(path: str, *, params: Any = None, subject: str = "") -> Any:
        asked.append({"path": path, **params})
        return pages[params.get("continue")]

    kube = Kube.__new__(Kube)
    kube.list = fake_list  # type: ignore[method-assign]
    items = kube.list_items("/api/v1/pods", params={"labelSelector": "a=1"}, page=2)
    assert items == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert asked == [
        {"path": "/api/v1/pods", "labelSelector": "a=1", "limit": 2},
        {"path": "/api/v1/pods", "labelSelector": "a=1", "limit": 2, "continue": "t1"},
        {"path": "/api/v1/pods", "labelSelector": "a=1", "limit": 2, "continue": "t2"},
    ]
