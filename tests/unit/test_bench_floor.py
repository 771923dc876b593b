"""The benchmark's wait for a pushed image (:func:`bench.floor.until_applied`) against a
scripted watch: a watch the server ends early is resumed, not taken for the end."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from bench import floor

DEPS = "/apis/apps/v1/namespaces/shop/deployments"


def _dep(name: str, image: str, rv: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": rv},
        "spec": {"template": {"spec": {"containers": [{"image": image}]}}},
    }


def _event(name: str, image: str, rv: str) -> dict[str, Any]:
    return {"type": "MODIFIED", "object": _dep(name, image, rv)}


class Server:
    """Scripted watches, one list of events each; the version a list reads; the
    Deployments a GET reads."""

    def __init__(self, *watches: list[dict[str, Any]], versions: tuple[str, ...] = ("10",)) -> None:
        self.watches = list(watches)
        self.versions = list(versions)
        self.stored: dict[str, dict[str, Any]] = {}
        self.watched_from: list[str] = []
        self.got: list[str] = []

    def list(self, path: str, *, params: dict[str, Any]) -> dict[str, Any]:
        assert path == DEPS and params == {"limit": 1}
        version = self.versions.pop(0) if len(self.versions) > 1 else self.versions[0]
        return {"metadata": {"resourceVersion": version}}

    def stream(
        self, path: str, *, params: dict[str, Any], read_timeout: float
    ) -> Iterator[dict[str, Any]]:
        assert path == DEPS and params["watch"] == "true"
        self.watched_from.append(params["resourceVersion"])
        yield from self.watches.pop(0) if self.watches else []

    def get(self, path: str) -> dict[str, Any]:
        name = path.rsplit("/", 1)[1]
        self.got.append(name)
        return self.stored[name]


@pytest.fixture(autouse=True)
def _short_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    pause = time.sleep
    monkeypatch.setattr(time, "sleep", lambda _s: pause(0.01))


def _wait(server: Server, timeout: float = 600.0) -> float:
    sent: list[bool] = []
    took = floor.until_applied(
        server,  # type: ignore[arg-type]
        "shop",
        ["a", "b"],
        "nginx:2",
        lambda: sent.append(True),
        timeout=timeout,
    )
    assert sent == [True]
    return took


def test_a_watch_closed_early_is_resumed_from_the_last_version_seen() -> None:
    server = Server(
        [_event("b", "nginx:1", "11"), _event("a", "nginx:2", "12")],
        [_event("b", "nginx:2", "13")],
    )
    assert _wait(server) >= 0
    assert server.watched_from == ["10", "12"]
    assert server.got == []


def test_an_error_event_resumes_too_and_only_the_matching_image_counts() -> None:
    error = {"type": "ERROR", "object": {"code": 504, "message": "Too large resource version"}}
    server = Server(
        [_event("a", "nginx:2", "11"), error, _event("b", "nginx:2", "12")],
        [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "14"}}}],
        [_event("b", "nginx:3", "15"), _event("b", "nginx:2", "16")],
    )
    _wait(server)
    # the events after the error were not taken from a stream that ended with it
    assert server.watched_from == ["10", "11", "14"]


def test_a_version_gone_begins_anew_and_reads_what_is_still_awaited() -> None:
    gone = {"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}
    server = Server(
        [_event("a", "nginx:2", "11"), gone], [_event("b", "nginx:2", "40")], versions=("10", "30")
    )
    server.stored["b"] = _dep("b", "nginx:1", "20")
    _wait(server)
    assert server.got == ["b"]
    assert server.watched_from == ["10", "30"]


def test_a_version_gone_ends_the_wait_when_the_reads_find_the_image() -> None:
    gone = {"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}
    server = Server([gone])
    server.stored.update(a=_dep("a", "nginx:2", "20"), b=_dep("b", "nginx:2", "21"))
    _wait(server)
    assert sorted(server.got) == ["a", "b"]
    assert len(server.watched_from) == 1


def test_the_timeout_says_how_often_and_why_the_watch_ended_early() -> None:
    server = Server([_event("a", "nginx:2", "11")])
    with pytest.raises(TimeoutError) as e:
        _wait(server, timeout=0.05)
    assert str(e.value).startswith("1 of 2 Deployments without nginx:2 in 0 s")
    assert "the watch ended early" in str(e.value)
    assert "last: the server closed the watch" in str(e.value)
