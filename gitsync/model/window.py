"""Sync windows: when a gitsync instance may apply a MyApp, in the manner of Argo CD's
allow and deny windows, with the edge cases decided.

Pure: the current time is always a parameter (a timezone-aware ``datetime``), nothing here
reads a clock, sleeps or schedules; the daemon does that with :func:`next_change`.

The text of one window (``--sync-window``, once per window; in an environment variable or
a ConfigMap value several, separated by ``;`` or newlines)::

    KIND MIN HOUR DOM MON DOW DURATION [ZONE] [name=NAME] [namespaces=NS,...] [selector=SEL]

- KIND is ``allow`` or ``deny``.
- Five cron fields as Vixie cron reads them: ``*``, numbers, ranges ``a-b``, steps ``*/n``
  and ``a-b/n``, lists ``a,b``; ``jan``..``dec`` and ``sun``..``sat`` in any case;
  weekdays 0-7, 0 and 7 both Sunday. A day matches when its month does and, if the day of
  month field or the weekday field begins with ``*`` (``*``, ``*/2``), both day fields
  match; otherwise (both restricted) either one does: ``0 0 13 * 5`` is every 13th and
  every Friday.
- DURATION is ``d``, ``h``, ``m``, ``s`` amounts in that order (``90m``, ``1h30m``,
  ``1d12h``), more than nothing and at most 31 days.
- ZONE is an IANA time zone (default ``UTC``): the one token without ``=`` after DURATION.
- ``name=`` defaults to the text up to the duration (``deny 0 22 * * 1-5 8h``); names are
  unique. ``namespaces=`` limits the window to MyApps in those namespaces; ``selector=`` to
  MyApps whose labels match a Kubernetes label selector (``k=v``, ``k==v``, ``k!=v``,
  ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``, joined by commas). A set term holds
  spaces, so ``selector=`` takes the rest of the text: it must come last.

What a window means:

- An occurrence starts at every wall-clock minute of ZONE the cron fields match and lasts
  DURATION of elapsed time: an 8 h window across a DST switch ends 8 real hours later,
  its local end moved by the hour the clocks moved.
- A start in a spring-forward gap (02:30 on the day Berlin skips 02:00-03:00) starts at
  the first instant after the gap (03:00), once however many starts the gap held. A start
  in a fall-back overlap (a wall time that happens twice) starts once, at the first of the
  two (``fold=0``).
- A window is active at instant t when some start s has s <= t < s + DURATION: overlapping
  or touching occurrences are one stretch.
- A window applies to a MyApp when its namespaces (if given) hold the MyApp's namespace and
  its selector (if given) matches the MyApp's labels.
- The verdict over the windows that apply: closed while one of the deny windows is active
  (deny wins); else closed while there are allow windows and none of them is active; else
  open. No window that applies: open.

``until`` and :func:`next_change` look :data:`HORIZON` ahead and no further, so a window
that never opens costs a bounded search. Starts are found by walking local dates and the
matched hours and minutes of each matched day, never minute by minute; each day's
starts are computed once (:func:`_starts`), and so is each window's next
opening and closing after an instant: give every MyApp of a pass the same ``now``.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gitsync.errors import ConfigError, printable, quote
from gitsync.model.api import Obj
from gitsync.model.order import SYNC_WINDOW, Wait

Kind = Literal["allow", "deny"]
#: how far ahead ``until`` and :func:`next_change` look
HORIZON: Final = timedelta(days=366)
#: the longest window: one stretch a month at most, so that a missing window shows
MAX_DURATION: Final = timedelta(days=31)
#: beyond the horizon: later than any instant that is compared with it
NEVER: Final = datetime.max.replace(tzinfo=UTC)
_DAY: Final = timedelta(days=1)
_NUMBER = re.compile(r"[0-9]{1,9}")
_DURATION = re.compile(r"(?:([0-9]{1,9})d)?(?:([0-9]{1,9})h)?(?:([0-9]{1,9})m)?(?:([0-9]{1,9})s)?")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = rf"(?:[a-z0-9](?:[-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}"
_VALUE = re.compile(f"(?:{_NAME})?")
_EXISTS = re.compile(rf"(!?)\s*({_KEY})")
_EQUALS = re.compile(rf"({_KEY})\s*(==|!=|=)\s*(\S*)")
_SET = re.compile(rf"({_KEY})\s+(in|notin)\s*\(([^()]*)\)")
#: a comma between terms: not inside the parentheses of a set
_TERMS = re.compile(r",(?![^()]*\))")
_SELECTOR = re.compile(r"(?:^|\s)selector=")
_LAST = "selector= takes the rest of the text, so it comes last"


@dataclass(frozen=True)
class Field:
    """One cron field: its name in messages, its range and the names of its values."""

    name: str
    low: int
    high: int
    #: the names of its values, from ``low`` on, space-separated
    names: str = ""


_FIELDS: Final = (
    Field("minute", 0, 59),
    Field("hour", 0, 23),
    Field("day of month", 1, 31),
    Field("month", 1, 12, "jan feb mar apr may jun jul aug sep oct nov dec"),
    Field("day of week", 0, 7, "sun mon tue wed thu fri sat"),
)


@dataclass(frozen=True)
class Cron:
    """The five fields as the sets of values they match (weekdays 0-6, Sunday 0)."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    #: the field begins with ``*``: the Vixie rule then wants both day fields to match
    any_day: bool
    any_weekday: bool

    def matches(self, day: date) -> bool:
        """Whether the fields match ``day`` (a local date)."""
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = day.isoweekday() % 7 in self.weekdays
        return (dom and dow) if self.any_day or self.any_weekday else (dom or dow)


@dataclass(frozen=True)
class Requirement:
    """One term of a label selector; ``k=v`` is ``k in (v)``, ``k!=v`` is ``k notin (v)``."""

    key: str
    operator: Literal["in", "notin", "exists", "absent"]
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator in ("exists", "absent"):
            return (self.key in labels) == (self.operator == "exists")
        # Kubernetes' rule: notin (and !=) also match a MyApp without the label
        inside = self.key in labels and labels[self.key] in self.values
        return inside == (self.operator == "in")


@dataclass(frozen=True)
class Window:
    """One window, parsed: see the module's docstring for what it means."""

    kind: Kind
    cron: Cron
    duration: timedelta
    zone: ZoneInfo
    name: str
    #: empty: every namespace
    namespaces: frozenset[str]
    #: empty: every MyApp
    selector: tuple[Requirement, ...]
    text: str

    def applies(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether the window governs a MyApp of ``namespace`` with ``labels``."""
        in_namespace = not self.namespaces or namespace in self.namespaces
        return in_namespace and all(r.matches(labels) for r in self.selector)

    def active(self, at: datetime) -> bool:
        """Whether an occurrence of the window holds instant ``at``."""
        return _covering(self, _aware(at)) is not None


@dataclass(frozen=True)
class Verdict:
    """Whether a MyApp may be synced now; when not, the window that holds it and when it
    may (None: not within :data:`HORIZON`)."""

    open: bool
    #: the active deny window; or, outside every allow window, the one that opens first
    window: Window | None = None
    until: datetime | None = None

    def describe(self) -> str:
        """``held by window "NAME" until TIME`` (in the window's zone), or ``open``."""
        if self.open or self.window is None:
            return "open"
        w = self.window
        how = "by window" if w.kind == "deny" else "outside allow window"
        until = (
            "further notice" if self.until is None else self.until.astimezone(w.zone).isoformat()
        )
        return f'held {how} "{printable(w.name)}" until {until}'


def parse(text: str) -> Window:
    """One window from its text; :class:`ConfigError` quoting the text says what is wrong."""
    try:
        return _parse(text)
    except ValueError as e:
        raise ConfigError(f"sync window {quote(text.strip())}: {e}") from None


def parse_all(texts: Iterable[str]) -> tuple[Window, ...]:
    """The windows of every text, each split at ``;`` and newlines (blank parts skipped)."""
    windows: list[Window] = []
    for text in texts:
        windows += [parse(part) for part in re.split(r"[;\r\n]", text) if part.strip()]
    names = [w.name for w in windows]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"two sync windows are named {quote(name)}: names are unique")
    return tuple(windows)


def verdict(
    windows: Iterable[Window], namespace: str, labels: Mapping[str, str], now: datetime
) -> Verdict:
    """The verdict for one MyApp at ``now`` under the windows that apply to it."""
    now = _aware(now)
    applying = [w for w in windows if w.applies(namespace, labels)]
    denies = [w for w in applying if w.kind == "deny"]
    allows = [w for w in applying if w.kind == "allow"]
    limit = now + HORIZON
    held = next((w for w in denies if w.active(now)), None)
    if held is None and allows and not any(w.active(now) for w in allows):
        # the allow window that opens first holds it: the first of them on a tie
        held = min(allows, key=lambda w: _next_start(w, now, limit))
    if held is None:
        return Verdict(True)
    return Verdict(False, held, _until(denies, allows, now, limit))


def next_change(windows: Iterable[Window], now: datetime) -> datetime | None:
    """The first instant after ``now`` at which a window opens or closes (None: not within
    :data:`HORIZON`): a pass then, rather than at the next poll, keeps to the windows."""
    now = _aware(now)
    limit = now + HORIZON
    change = min((_change(w, now, limit) for w in windows), default=NEVER)
    return change if change <= limit else None


def _parse(text: str) -> Window:
    found = _SELECTOR.search(text)
    head = text[: found.start()] if found else text
    tokens = head.split()
    if len(tokens) < 7:
        raise ValueError("give KIND MIN HOUR DOM MON DOW DURATION, then options")
    kind = tokens[0].lower()
    if kind not in ("allow", "deny"):
        raise ValueError(f"the kind {quote(tokens[0])} is neither allow nor deny")
    minutes, hours, days, months, weekdays = map(_field, tokens[1:6], _FIELDS)
    any_day, any_weekday = tokens[3].startswith("*"), tokens[5].startswith("*")
    cron = Cron(
        tuple(sorted(minutes)), tuple(sorted(hours)), days, months, weekdays, any_day, any_weekday
    )
    # with any weekday, only the days of month open the window: one no month has, never
    # (the longest of each month is a leap year's: 2028's)
    if cron.any_weekday and not any(
        d <= calendar.monthrange(2028, m)[1] for m in cron.months for d in cron.days
    ):
        raise ValueError(f"no month of {tokens[4]} has a day {tokens[3]}: it never opens")
    options = _options(tokens[7:])
    return Window(
        kind,  # type: ignore[arg-type]
        cron,
        _duration(tokens[6]),
        _zone(options.get("", "UTC")),
        options.get("name", " ".join(tokens[:7])),
        _namespaces(options.get("namespaces")),
        () if found is None else _selector(text[found.end() :]),
        text.strip(),
    )


def _field(text: str, field: Field) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        span, slash, step_text = item.partition("/")
        first, dash, last = span.partition("-")
        if span == "*":
            low, high = field.low, field.high
        else:
            low = _value(first, field)
            high = _value(last, field) if dash else low
            if slash and not dash:
                raise ValueError(f"{field.name} {quote(item)}: a step needs a range or *")
            if low > high:
                raise ValueError(f"{field.name} range {quote(span)} runs backwards")
        step = _value(step_text, Field("step", 1, field.high)) if slash else 1
        values.update(range(low, high + 1, step))
    # Sunday is 0 and 7; no other field reaches 7 values past its low end
    return frozenset(v % 7 if field.high == 7 else v for v in values)


def _value(text: str, field: Field) -> int:
    names = field.names.split()
    if text.lower() in names:
        return field.low + names.index(text.lower())
    if not _NUMBER.fullmatch(text):
        raise ValueError(f"{field.name} {quote(text)} is not a number")
    number = int(text)
    if not field.low <= number <= field.high:
        raise ValueError(f"{field.name} {number} is out of {field.low}-{field.high}")
    return number


def _duration(text: str) -> timedelta:
    found = _DURATION.fullmatch(text)
    if found is None:
        raise ValueError(f"the duration {quote(text)} is not like 90m, 1h30m or 1d12h")
    d, h, m, s = (int(g or 0) for g in found.groups())
    # counted in seconds first: a huge amount is refused, not an OverflowError
    seconds = ((d * 24 + h) * 60 + m) * 60 + s
    if not 0 < seconds <= MAX_DURATION.total_seconds():
        raise ValueError(f"the duration {text} is not between 1s and 31d")
    return timedelta(seconds=seconds)


def _options(tokens: list[str]) -> dict[str, str]:
    """The zone (key "") and the options before ``selector=``."""
    options: dict[str, str] = {}
    for i, token in enumerate(tokens):
        key, eq, value = token.partition("=")
        if not eq and i == 0:
            key, value = "", token
        elif key not in ("name", "namespaces") or not value:
            raise ValueError(
                f"unexpected {quote(token)}: after DURATION come ZONE, name=, namespaces= and"
                f" selector=, each once and given a value ({_LAST})"
            )
        if key in options:
            raise ValueError(f"{key}= is given twice")
        options[key] = value
    return options


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"unknown time zone {quote(name)}") from None


def _namespaces(text: str | None) -> frozenset[str]:
    names = frozenset(text.split(",")) if text is not None else frozenset()
    for name in names:
        if not _LABEL.fullmatch(name):
            raise ValueError(f"the namespace {quote(name)} is not a DNS label")
    return names


def _selector(text: str) -> tuple[Requirement, ...]:
    return tuple(_requirement(term.strip(), text) for term in _TERMS.split(text))


def _requirement(term: str, text: str) -> Requirement:
    if found := _EXISTS.fullmatch(term):
        return Requirement(found[2], "absent" if found[1] else "exists")
    if (found := _EQUALS.fullmatch(term)) and _VALUE.fullmatch(found[3]):
        return Requirement(found[1], "notin" if found[2] == "!=" else "in", frozenset([found[3]]))
    if found := _SET.fullmatch(term):
        values = [v.strip() for v in found[3].split(",")]
        if found[3].strip() and all(_VALUE.fullmatch(v) for v in values):
            return Requirement(found[1], found[2], frozenset(values))  # type: ignore[arg-type]
    hint = f" ({_LAST})" if re.search(r"\s(name|namespaces|selector)=", text) else ""
    raise ValueError(
        f"the selector term {quote(term)} is not k=v, k!=v, k in (a,b), k notin (a,b),"
        f" k or !k{hint}"
    )


def _aware(at: datetime) -> datetime:
    if at.utcoffset() is None:
        raise ValueError(f"{at.isoformat()} has no time zone: windows need an instant")
    return at


def _instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant a start at local wall time ``wall`` happens: in an overlap the first of
    the two, in a gap the first instant after it."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # the gap's end is the first instant whose offset is the one after the switch, from
    # the wall time read with that offset (fold=1, before the gap) to ``first``
    low = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    after = _offset(first, zone)
    span = range(int((first - low).total_seconds()))
    seconds = bisect_left(span, after, key=lambda s: _offset(low + timedelta(seconds=s), zone))
    return low + timedelta(seconds=seconds)


def _offset(at: datetime, zone: ZoneInfo) -> timedelta:
    # never None: a ZoneInfo gives every instant an offset
    return at.astimezone(zone).utcoffset() or timedelta()


@lru_cache(maxsize=4096)
def _starts(cron: Cron, zone: ZoneInfo, day: date) -> tuple[datetime, ...]:
    """The instants the occurrences of local date ``day`` start, in order: a start never
    comes before one of an earlier wall time (a gap's collapse onto its end included), so
    each day's also follow the day before's."""
    if not cron.matches(day):
        return ()
    walls = (datetime.combine(day, time(h, m)) for h in cron.hours for m in cron.minutes)
    return tuple(_instant(wall, zone) for wall in walls)


@lru_cache(maxsize=4096)
def _midnight(day: date, zone: ZoneInfo) -> datetime:
    """When local date ``day`` begins: no start of that day or later is before it."""
    return _instant(datetime.combine(day, time()), zone)


def _day_starts(w: Window, day: date) -> tuple[datetime, ...]:
    return _starts(w.cron, w.zone, day)


@lru_cache(maxsize=4096)
def _runs(
    cron: Cron, zone: ZoneInfo, duration: timedelta, day: date
) -> tuple[tuple[datetime, datetime], ...]:
    """The occurrences starting on local date ``day``, merged where one starts before or
    as the ones before it end: (start, end) of each stretch. A window that starts every
    minute is one stretch a day, not 1440 starts to walk."""
    out: list[tuple[datetime, datetime]] = []
    for start in _starts(cron, zone, day):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], start + duration))
        else:
            out.append((start, start + duration))
    return tuple(out)


def _local_date(at: datetime, zone: ZoneInfo) -> date:
    return at.astimezone(zone).date()


def _covering(w: Window, at: datetime) -> datetime | None:
    """The end of the last occurrence of ``w`` to start at or before ``at``, when it holds
    ``at``; None when none does. Occurrences last alike: the last to start ends last."""
    day = _local_date(at, w.zone)
    # a start on an earlier day than ``at - duration``'s is over by then
    first = _local_date(at - w.duration, w.zone)
    while day >= first:
        starts = _day_starts(w, day)
        i = bisect_right(starts, at)
        if i:
            end = starts[i - 1] + w.duration
            return end if end > at else None
        day -= _DAY
    return None


@lru_cache(maxsize=1024)
def _inactive_from(w: Window, at: datetime, limit: datetime) -> datetime:
    """The first instant from ``at`` on at which ``w`` is not active (NEVER past limit)."""
    end = _covering(w, at)
    if end is None:
        return at
    day = _local_date(at, w.zone)
    # a day that begins after ``end`` holds no start that could carry the stretch on
    while end <= limit and _midnight(day, w.zone) <= end:
        for start, run_end in _runs(w.cron, w.zone, w.duration, day):
            if start > end:
                return end
            # a stretch that began before ``at`` ends before ``end``: max keeps it
            end = max(end, run_end)
        day += _DAY
    return end if end <= limit else NEVER


@lru_cache(maxsize=1024)
def _next_start(w: Window, at: datetime, limit: datetime) -> datetime:
    """The first start of ``w`` after ``at`` (NEVER past ``limit``): where ``w`` is not
    active at ``at``, when it opens next."""
    day = _local_date(at, w.zone)
    while _midnight(day, w.zone) <= limit:
        for start in _day_starts(w, day):
            if start > at:
                return start if start <= limit else NEVER
        day += _DAY
    return NEVER


def _active_from(w: Window, at: datetime, limit: datetime) -> datetime:
    return at if _covering(w, at) is not None else _next_start(w, at, limit)


def _change(w: Window, at: datetime, limit: datetime) -> datetime:
    """When ``w`` next opens or closes after ``at``."""
    return _inactive_from(w, at, limit) if w.active(at) else _next_start(w, at, limit)


def _until(
    denies: list[Window], allows: list[Window], now: datetime, limit: datetime
) -> datetime | None:
    """The first instant from ``now`` on at which no deny window is active and, if there
    are allow windows, one of them is; None past ``limit``. Each step jumps to the end of
    the deny stretch that lasts longest (closed all along), or to the first allow window's
    opening (closed until then), and checks again there."""
    at = now
    while at <= limit:
        free = max((_inactive_from(w, at, limit) for w in denies), default=at)
        if free == at:
            opens = min((_active_from(w, at, limit) for w in allows), default=at)
            if opens == at:
                return at
            free = opens
        at = free
    return None


#: on a live MyApp, lets its next change from Git through a closed window, once: gitsync
#: removes it when that change is applied (``kubectl annotate myapp web
#: gitsync.apps.example.com/sync-window-override=INC-123``; its value is recorded)
OVERRIDE_ANNOTATION: Final = "gitsync.apps.example.com/sync-window-override"


def closed_for(windows: Iterable[Window], myapp: Obj, now: datetime) -> Wait | None:
    """What holds a change of ``myapp`` (Git's body) back at ``now``: a
    :class:`~gitsync.model.order.Wait` naming the window and until when; None when open."""
    meta = myapp.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    found = verdict(windows, str(meta.get("namespace") or ""), labels, now)
    if found.open or found.window is None:
        return None
    return Wait(SYNC_WINDOW, found.describe(), found.window.name)


def override_of(live: Obj | None) -> str:
    """The one-shot override a live MyApp carries (its annotation's value), or ""."""
    annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(OVERRIDE_ANNOTATION)
    return str(value) if value else ""


#: how ``gitsync sync --ignore-windows`` is named where it let a change through
IGNORE_FLAG: Final = "--ignore-windows"


@dataclass(frozen=True)
class Closed:
    """A window closed for a MyApp now: ``wait`` says which and until when, ``override``
    what lets a change through it anyway ("" nothing: the annotation's value, or
    :data:`IGNORE_FLAG`), ``frozen`` whether drift stays uncorrected meanwhile."""

    wait: Wait
    override: str = ""
    frozen: bool = False


@dataclass(frozen=True)
class Windows:
    """An instance's sync windows and how they apply: ``--sync-window``,
    ``--windows-block-corrections`` (a closed window holds drift corrections back too),
    and ``gitsync sync --ignore-windows`` (no window holds that run's changes back)."""

    windows: tuple[Window, ...] = ()
    block_corrections: bool = False
    ignore: bool = False

    def closed(self, git: Obj, live: Obj | None, now: datetime) -> Closed | None:
        """The window closed now for Git's ``git`` (``live``: the MyApp as it is, which
        may carry the one-shot override), or None."""
        if not self.windows:
            return None
        wait = closed_for(self.windows, git, now)
        if wait is None:
            return None
        override = IGNORE_FLAG if self.ignore else override_of(live)
        return Closed(wait, override, self.block_corrections and not override)
