"""A pin: a revision set by hand that sync passes use instead of the branch head.

``gitsync rollback --to REV`` pins the whole instance, ``gitsync rollback MyApp/NS/NAME
--to REV`` one MyApp; ``gitsync resume`` lifts it. Pure: the record, its text in the
status ConfigMap, and which revision each MyApp of a pass comes from. Reading and writing
the ConfigMap is :mod:`gitsync.gitops.pins`.

Each pin is one key of the status ConfigMap's ``data``: ``pin`` for the instance,
``pin.<namespace>.<name>`` for one MyApp (a namespace is a DNS label, without dots, so the
first dot after the prefix ends it). One key per pin, so that pinning or resuming one
MyApp is a merge patch of that key alone, which never loses another pin written at the
same time. The value is a small JSON object (revision, by, at, reason).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from gitsync.errors import ConfigError, one_line, quote
from gitsync.model.api import KIND

#: the data key of the instance's pin
INSTANCE_KEY = "pin"
#: the data keys of one MyApp's pin: ``pin.<namespace>.<name>``
APP_PREFIX = "pin."
#: a pin names a commit by its full sha: a tag or a branch can move, a pin must not
COMMIT = re.compile(r"[0-9a-f]{40}")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
#: a ConfigMap key's longest
_MAX_KEY = 253
#: a reason or a name longer than this is cut: the record is shown on one line
MAX_TEXT = 500

A = TypeVar("A")


@dataclass(frozen=True)
class Pin:
    """One pin: ``revision`` (a full commit sha) set by ``by`` at ``at`` (RFC 3339) for
    ``reason``; for MyApp ``app`` (``namespace/name``), or the whole instance ("")."""

    revision: str
    by: str
    at: str
    reason: str = ""
    app: str = ""

    @property
    def key(self) -> str:
        """Its key in the status ConfigMap's data."""
        return data_key(self.app)

    @property
    def subject(self) -> str:
        return f"{KIND}/{self.app}" if self.app else "the instance"

    def value(self) -> str:
        """Its value in the status ConfigMap's data."""
        record = {"revision": self.revision, "by": self.by, "at": self.at, "reason": self.reason}
        return json.dumps(record, sort_keys=True)

    def describe(self) -> str:
        """``pinned to REV by WHO at TIME: REASON``, one line whatever the text holds."""
        text = f"pinned to {self.revision} by {self.by or 'unknown'} at {self.at}"
        return one_line(text + (f": {self.reason}" if self.reason else ""), 2 * MAX_TEXT)


@dataclass
class Pins:
    """The pins of one instance, as the status ConfigMap holds them."""

    instance: Pin | None = None
    #: by MyApp key (``namespace/name``)
    apps: dict[str, Pin] = field(default_factory=dict)
    #: data keys whose record cannot be read, with why: never taken for "not pinned"
    invalid: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.instance is not None or bool(self.apps) or bool(self.invalid)

    def all(self) -> list[Pin]:
        """The instance's pin first, then each MyApp's, by key."""
        head = [self.instance] if self.instance is not None else []
        return head + [self.apps[k] for k in sorted(self.apps)]

    def lines(self) -> list[str]:
        """What the sync state, ``diff`` and ``drift`` say of the pins, one line each."""
        out = [
            f"{p.subject} {p.describe()}" if p.app else f"instance {p.describe()}"
            for p in self.all()
        ]
        return out + [f"unreadable pin {k}: {why}" for k, why in sorted(self.invalid.items())]


def data_key(app: str) -> str:
    """The data key of the pin of MyApp ``app`` (``namespace/name``), or the instance's."""
    if not app:
        return INSTANCE_KEY
    ns, _, name = app.partition("/")
    key = f"{APP_PREFIX}{ns}.{name}"
    if len(key) > _MAX_KEY:
        raise ConfigError(f"{KIND}/{app}: the name is too long to pin (a key of {len(key)})")
    return key


def app_of_key(key: str) -> str | None:
    """The MyApp (``namespace/name``) a data key pins, "" for the instance's, None when
    the key is no pin's."""
    if key == INSTANCE_KEY:
        return ""
    if not key.startswith(APP_PREFIX):
        return None
    ns, dot, name = key.removeprefix(APP_PREFIX).partition(".")
    return f"{ns}/{name}" if dot and ns and name else None


def parse(key: str, value: str) -> Pin:
    """The pin of data key ``key``; :class:`ConfigError` when the record cannot be read."""
    app = app_of_key(key)
    if app is None:
        raise ConfigError(f"{quote(key)} is not the key of a pin")
    try:
        record = json.loads(value)
    except json.JSONDecodeError as e:
        raise ConfigError(f"pin {key}: not JSON ({e.msg})") from None
    if not isinstance(record, dict):
        raise ConfigError(f"pin {key}: not a JSON object")
    fields = {name: record.get(name, "") for name in ("revision", "by", "at", "reason")}
    if not all(isinstance(v, str) for v in fields.values()):
        raise ConfigError(f"pin {key}: revision, by, at and reason must be strings")
    revision = check_revision(fields["revision"])
    return Pin(revision, fields["by"], fields["at"], fields["reason"], app)


def pins_of(data: Mapping[str, str] | None) -> Pins:
    """The pins in a status ConfigMap's ``data`` (None: no ConfigMap)."""
    pins = Pins()
    for key, value in sorted((data or {}).items()):
        app = app_of_key(key)
        if app is None:
            continue
        try:
            pin = parse(key, value)
        except ConfigError as e:
            pins.invalid[key] = str(e)
            continue
        if pin.app:
            pins.apps[pin.app] = pin
        else:
            pins.instance = pin
    return pins


def check_revision(text: str) -> str:
    """A full commit sha, lower case; :class:`ConfigError` for anything else."""
    sha = text.strip().lower()
    if not COMMIT.fullmatch(sha):
        raise ConfigError(f"revision {quote(text)} is not a full commit sha (40 hex digits)")
    return sha


def app_key(text: str) -> str:
    """``MyApp/NS/NAME`` (or ``NS/NAME``) as a MyApp key ``NS/NAME``; :class:`ConfigError`
    for anything else."""
    parts = text.split("/")
    if len(parts) == 3 and parts[0].lower() in (KIND.lower(), "myapps", "myapps.apps.example.com"):
        parts = parts[1:]
    if len(parts) != 2 or not _LABEL.fullmatch(parts[0]) or not _SUBDOMAIN.fullmatch(parts[1]):
        raise ConfigError(f"{quote(text)} does not name a MyApp: give MyApp/NAMESPACE/NAME")
    return f"{parts[0]}/{parts[1]}"


def clip(text: str) -> str:
    """A reason or a name as recorded: one line, cut."""
    return one_line(text.strip(), MAX_TEXT)


@dataclass(frozen=True)
class Selection(Generic[A]):
    """The MyApps of one pass, each from the revision it is to come from."""

    #: by key: the MyApps the pass applies
    apps: dict[str, A]
    #: by key: the pinned MyApps the pass cannot apply, with why (not pruned either)
    missing: dict[str, str]
    #: by key: where a MyApp was taken from a pin, the pin
    pinned: dict[str, Pin]


def base_revision(pins: Pins) -> str:
    """The commit the pass reads every MyApp from that has no pin of its own: the
    instance's pin, else "" (the branch head)."""
    return pins.instance.revision if pins.instance is not None else ""


def app_revisions(pins: Pins) -> set[str]:
    """The commits, besides the base, that some pinned MyApp is read from."""
    base = base_revision(pins)
    return {p.revision for p in pins.apps.values() if p.revision != base}


def select(base: Mapping[str, A], at: Mapping[str, Mapping[str, A]], pins: Pins) -> Selection[A]:
    """Each MyApp from where the pins say: a pinned MyApp from its pin's revision (``at``:
    the MyApps of each such revision, by key), every other one from ``base`` (the MyApps
    of the instance's pin, else of the head). A MyApp pin is more specific than the
    instance's, so it wins. A pinned MyApp its revision lacks is missing, not dropped: a
    pin holds a MyApp in place, and a prune must not take it away."""
    apps = dict(base)
    missing: dict[str, str] = {}
    pinned: dict[str, Pin] = {}
    for key, pin in sorted(pins.apps.items()):
        declared = at.get(pin.revision, base if pin.revision == base_revision(pins) else {})
        if key in declared:
            apps[key] = declared[key]
            pinned[key] = pin
        else:
            apps.pop(key, None)
            missing[key] = (
                f"{KIND}/{key} is {pin.describe()}, but revision {pin.revision} does not declare it"
            )
    if pins.instance is not None:
        for key in apps:
            pinned.setdefault(key, pins.instance)
    return Selection(apps, missing, pinned)


def held(head: Mapping[str, A], chosen: Mapping[str, A], pins: Pins) -> dict[str, Pin]:
    """The MyApps a pin holds back from the ref's head, with the pin: each whose manifest
    at the head (``head``, by key) differs from the one the pass uses (``chosen``),
    absent on one side included (created or pruned at the head). What ``gitsync diff``
    shows as held, as it shows what ``suspend`` holds."""
    out: dict[str, Pin] = {}
    for key in sorted(set(head) | set(chosen)):
        pin = pins.apps.get(key) or pins.instance
        if pin is not None and head.get(key) != chosen.get(key):
            out[key] = pin
    return out
