"""The names gitsync gives objects: the work-queue key and the subject of messages."""

from __future__ import annotations

import pytest

from gitsync.model.api import Obj, key_of, subject


@pytest.mark.parametrize(
    ("obj", "key"),
    [
        ({"metadata": {"namespace": "shop", "name": "web"}}, "shop/web"),
        ({"metadata": {"name": "shop"}}, "/shop"),  # cluster-scoped: no namespace
        ({"metadata": {"namespace": "shop"}}, "shop/"),
        ({}, "/"),
    ],
)
def test_key_of(obj: Obj, key: str) -> None:
    assert key_of(obj) == key


def test_subject() -> None:
    assert subject("MyApp", "shop", "web") == "MyApp/shop/web"
    assert subject("Namespace", "", "shop") == "Namespace/shop"
