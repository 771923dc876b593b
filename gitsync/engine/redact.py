"""Env values hidden from whatever leaves the cluster: the drift page, its JSON API and
every notification.

The CRD's ``env`` has only ``name`` and ``value``, so whatever an application needs (a
password, a token) sits there in plain text. Inside the cluster that is the object's own
business (RBAC guards it); a page without authentication or a chat channel is another
matter. There an env value is shown as a digest: enough to see *that* Git and the live
object differ, and whether a value changed again, never the value.

The digest is keyed with a secret of this process: a plain hash of a short password
could be checked against guesses offline; this one can only be compared with other
digests the same daemon showed.

Pure: paths as :func:`~gitsync.engine.managedfields.human_path` writes them, plain
values in, copies out.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Iterable
from typing import Any, Final

#: what a hidden value starts with
PREFIX: Final = "hidden:"
_PROCESS_KEY: Final = secrets.token_bytes(32)
#: the keys of ``status.drift[]`` entries (and blame rows) that hold values
VALUE_KEYS: Final = ("desired", "live")
_CONTAINER_LISTS: Final = ("containers", "initContainers", "ephemeralContainers")
# one segment of a human path: a field (``.name``) or a bracket (``[name=X]``, whose
# quoted key may hold anything, a ``]`` too)
_SEGMENT: Final = re.compile(
    r"""\.?(?P<field>[A-Za-z0-9_$-]+)"""
    r"""|\[(?P<key>(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\]'"])*)\]"""
)


def mask(value: Any, key: bytes = _PROCESS_KEY) -> Any:
    """``hidden:`` and 8 hex digits of a keyed digest of ``value``; None stays None
    (no value is not a secret)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return PREFIX + hmac.new(key, text.encode(), hashlib.sha256).hexdigest()[:8]


def hidden(path: str, val: Any, key: bytes = _PROCESS_KEY) -> Any:
    """``val``, found at ``path`` of a MyApp or a Deployment, with every env value in it
    hidden: the value itself at ``spec.env[name=X].value``, the values of an env entry
    or list, and of every env list in a container or a spec above them."""
    segments = _segments(path)
    if segments is None:
        # a path we cannot read might be an env value: hide it, whatever it is
        return _hide_all(val, key)
    at = _env_at(segments)
    if at is None:
        return _walk(val, key)
    below = segments[at + 1 :]
    if not below:
        return _env_list(val, key)
    if len(below) == 1 and below[0][0] == "key":
        return _env_item(val, key)
    if len(below) == 2 and below[1] == ("field", "name"):
        return val  # the name is in the path already
    return _hide_all(val, key)


def drift_entries(items: Iterable[Any], key: bytes = _PROCESS_KEY) -> list[Any]:
    """``status.drift[]`` entries (``path``, ``desired``, ``live``, ...) with env values
    hidden; anything else in the list is hidden whole."""
    out: list[Any] = []
    for item in items:
        if not isinstance(item, dict):
            out.append(mask(item, key))
            continue
        path = str(item.get("path", ""))
        out.append({k: hidden(path, v, key) if k in VALUE_KEYS else v for k, v in item.items()})
    return out


def _segments(path: str) -> list[tuple[str, str]] | None:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(path):
        m = _SEGMENT.match(path, pos)
        if m is None or m.end() == pos:
            return None
        if m.group("field") is not None:
            out.append(("field", m.group("field")))
        else:
            out.append(("key", m.group("key")))
        pos = m.end()
    return out


def _env_at(segments: list[tuple[str, str]]) -> int | None:
    """Index of the ``env`` field of a MyApp's spec or of a container, if the path has one."""
    for i, seg in enumerate(segments):
        if seg != ("field", "env"):
            continue
        if i == 1 and segments[0] == ("field", "spec"):
            return i  # MyApp spec.env
        if i >= 2 and segments[i - 1][0] == "key" and segments[i - 2][1] in _CONTAINER_LISTS:
            return i  # a container's env
    return None


def _walk(val: Any, key: bytes) -> Any:
    # a path above the env lists (a whole container, spec.template): hide inside
    if isinstance(val, dict):
        return {
            k: _env_list(v, key) if k == "env" and isinstance(v, list) else _walk(v, key)
            for k, v in val.items()
        }
    if isinstance(val, list):
        return [_walk(v, key) for v in val]
    return val


def _env_list(val: Any, key: bytes) -> Any:
    if not isinstance(val, list):
        return _hide_all(val, key)
    return [_env_item(v, key) for v in val]


def _env_item(val: Any, key: bytes) -> Any:
    if not isinstance(val, dict):
        return _hide_all(val, key)
    return {k: v if k == "name" else mask(v, key) for k, v in val.items()}


def _hide_all(val: Any, key: bytes) -> Any:
    return mask(val, key)
