"""Env values hidden by path: the value itself, an env entry, an env list, and every env
list below a container or spec; everything else untouched."""

from __future__ import annotations

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
