"""Env values hidden by path: the value itself, an env entry, an env list, and every env
list below a container or spec; everything else untouched."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gitsync.engine import redact

KEY = b"k" * 32
SECRET = "s3cr3t-Tok3n"
CONTAINER = "spec.template.spec.containers[name=app]"


def _masked(value: Any) -> str:
    return str(redact.mask(value, KEY))


@pytest.mark.parametrize(
    ("path", "value", "want"),
    [
        ("spec.env[name=TOKEN].value", SECRET, _masked(SECRET)),
        (f"{CONTAINER}.env[name=TOKEN].value", SECRET, _masked(SECRET)),
        ("spec.env[name=TOKEN].name", "TOKEN", "TOKEN"),
        (
            "spec.env[name=TOKEN]",
            {"name": "TOKEN", "value": SECRET},
            {"name": "TOKEN", "value": _masked(SECRET)},
        ),
        ("spec.env", [{"name": "A", "value": SECRET}], [{"name": "A", "value": _masked(SECRET)}]),
        (
            f"{CONTAINER}.env",
            [{"name": "A", "value": SECRET}],
            [{"name": "A", "value": _masked(SECRET)}],
        ),
        (
            "spec.template.spec.containers",
            [{"name": "app", "image": "i", "env": [{"name": "A", "value": SECRET}]}],
            [{"name": "app", "image": "i", "env": [{"name": "A", "value": _masked(SECRET)}]}],
        ),
        (
            "spec",
            {"replicas": 2, "env": [{"name": "A", "value": SECRET}]},
            {"replicas": 2, "env": [{"name": "A", "value": _masked(SECRET)}]},
        ),
        # a hostile env name cannot end the key early and pass for another path
        ("spec.env[name='x].name'].value", SECRET, _masked(SECRET)),
        # a path that cannot be read is hidden whole
        ("spec.env[name=x.value", SECRET, _masked(SECRET)),
        # not env: as it is
        ("spec.replicas", 5, 5),
        (f"{CONTAINER}.image", "nginx:1", "nginx:1"),
        ("metadata.labels.env", "prod", "prod"),
        ("spec.env[name=TOKEN].value", None, None),
    ],
)
def test_env_values_are_hidden_by_path(path: str, value: Any, want: Any) -> None:
    assert redact.hidden(path, value, KEY) == want


def test_a_digest_tells_values_apart_but_is_not_the_value() -> None:
    a, b = redact.mask(SECRET, KEY), redact.mask("other", KEY)
    assert a != b and a == redact.mask(SECRET, KEY)
    assert a.startswith(redact.PREFIX) and SECRET not in a
    # keyed: another daemon's (or an attacker's) digest of a guess does not match
    assert redact.mask(SECRET, b"x" * 32) != a


def test_drift_entries_hide_desired_and_live_only() -> None:
    entries = [
        {
            "object": "Deployment/web",
            "path": f"{CONTAINER}.env[name=TOKEN].value",
            "desired": SECRET,
            "live": "live-" + SECRET,
            "manager": "kubectl",
        },
        {"object": "Deployment/web", "path": "spec.replicas", "desired": 2, "live": 5},
        "not an entry " + SECRET,
    ]
    out = redact.drift_entries(entries, KEY)
    assert SECRET not in repr(out)
    assert out[0]["manager"] == "kubectl" and out[0]["path"] == entries[0]["path"]  # type: ignore[index]
    assert (out[1]["desired"], out[1]["live"]) == (2, 5)


def test_a_digest_is_eight_hex_digits_and_the_same_for_equal_objects() -> None:
    assert re.fullmatch(r"hidden:[0-9a-f]{8}", redact.mask(SECRET, KEY))
    # an env entry's value as a whole: the same object however its keys are ordered
    assert redact.mask({"a": 1, "b": 2}, KEY) == redact.mask({"b": 2, "a": 1}, KEY)


def test_what_is_no_drift_entry_is_hidden_whole() -> None:
    assert redact.drift_entries([SECRET], KEY) == [redact.mask(SECRET, KEY)]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        # an "env" that is neither the MyApp's spec.env nor a container's is left alone
        ("status.env", [{"name": "A", "value": "plain"}]),
        ("spec.foo.env", [{"name": "A", "value": "plain"}]),
        ("metadata.annotations.env", "plain"),
    ],
)
def test_an_env_field_elsewhere_is_not_taken_for_an_env_list(path: str, value: Any) -> None:
    assert redact.hidden(path, value, KEY) == value


def test_the_env_of_a_container_list_at_the_top_of_the_path_is_hidden() -> None:
    got = redact.hidden("containers[name=main].env[name=TOKEN].value", SECRET, KEY)
    assert got == redact.mask(SECRET, KEY)


def test_above_the_env_lists_only_env_values_are_hidden() -> None:
    ports = [{"name": "http", "containerPort": 80}]
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "env": [{"name": "TOKEN", "value": SECRET}],
                # a list of name/value-like items that is no env list stays as it is
                "ports": ports,
                "args": ["--env", "plain"],
            }
        ],
        "env": "not a list",
    }
    got = redact.hidden("spec.template.spec", spec, KEY)
    container = got["containers"][0]
    assert container["env"] == [{"name": "TOKEN", "value": redact.mask(SECRET, KEY)}]
    assert container["ports"] == ports
    assert container["args"] == ["--env", "plain"]
    assert got["env"] == "not a list"


@pytest.mark.parametrize(
    "path", ["spec.env", "spec.env[name=TOKEN]", f"{CONTAINER}.env", f"{CONTAINER}.env[name=T]"]
)
def test_an_env_list_or_entry_of_an_unexpected_shape_is_hidden_whole(path: str) -> None:
    assert redact.hidden(path, SECRET, KEY) == redact.mask(SECRET, KEY)
