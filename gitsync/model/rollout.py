"""A MyApp's rollout, judged, and what an automatic rollback keeps.

Pure. A rollout has failed when the deployment controller says so for the generation
gitsync applied: the Deployment's ``Progressing`` condition is ``False`` with reason
``ProgressDeadlineExceeded`` and its status describes its current spec (the test of
``kubectl rollout status``), never a timer of gitsync's own.

Under ``spec.rollback: auto`` gitsync keeps what a rollback needs in a :class:`Record`
per MyApp, so that any replica, after any restart, reaches the same decision:

- ``healthy``: the spec Git last declared that reached ``Available``, the revision it
  came from and its digest (bounded: a spec over :data:`MAX_SPEC_BYTES` is not kept,
  and the MyApp then says it cannot be rolled back);
- ``rollback``: the rollback in force (from revision, to revision, why, when) and the
  digest of the spec it holds back. While Git declares that same spec, the MyApp is
  held to the healthy one instead (:func:`hold_of`); a commit that changes this
  MyApp's spec releases it (a pin does not: it is not Git's word).

The record lives where only gitsync writes (the instance's status ConfigMap, see
:mod:`gitsync.kube.records`), never in the MyApp's status: status is a report, and
more principals may write ``myapps/status`` than may write a MyApp's spec. The status
shows the record (``status.lastHealthy``, ``status.rollback``) and is never read back
to decide. A record read back is untrusted all the same: :func:`record_of` checks it
with the schema Git's MyApps are checked with, and its digest.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from gitsync.model import stored
from gitsync.model.api import Obj
from gitsync.model.problems import Problems, field_name
from gitsync.model.spec_schema import SPEC

RollbackPolicy = Literal["auto", "off"]
ROLLBACK_POLICIES: Final = ("auto", "off")
#: the Deployment condition and reason that say its rollout failed
PROGRESSING: Final = "Progressing"
DEADLINE_EXCEEDED: Final = "ProgressDeadlineExceeded"
#: the Events (reasons) of a failed rollout: rolled back, or left as it is
ROLLED_BACK: Final = "RolledBack"
ROLLOUT_FAILED: Final = "RolloutFailed"
RELEASED: Final = "RollbackReleased"
#: the largest spec kept as the last healthy one, as stored: a MyApp's status keeps one
#: spec beside its own, and an object is bounded (etcd's request limit is 1.5 MiB)
MAX_SPEC_BYTES: Final = 64 * 1024


def digest(spec: Obj | None) -> str:
    """The digest of a MyApp's desired spec: equal for equal specs whatever the key order,
    so that a commit touching only other files (or only this file's layout) leaves it."""
    text = json.dumps(spec or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def policy_of(spec: Obj | None, default: RollbackPolicy) -> RollbackPolicy:
    value = (spec or {}).get("rollback")
    return value if value in ROLLBACK_POLICIES else default


def seen(deployment: Obj) -> bool:
    """Whether the deployment controller has seen ``deployment``'s current spec: its
    status describes the generation the API server gave that spec (before, the status
    describes an older spec, or there is none). The API server always sets a generation;
    an object without one (made by hand) is taken as seen."""
    st: Obj = deployment.get("status") or {}
    generation = int((deployment.get("metadata") or {}).get("generation") or 0)
    return int(st.get("observedGeneration") or 0) >= generation


def failure(deployment: Obj | None) -> str | None:
    """Why the rollout of ``deployment``'s current generation failed (the deployment
    controller's message), or None while it has not.

    A status older than the spec says nothing of the spec: right after an apply (a
    rollback's among them) the deadline condition of the rollout before still stands
    until the deployment controller has seen the new generation."""
    if deployment is None or not seen(deployment):
        return None
    for c in (deployment.get("status") or {}).get("conditions") or []:
        if (
            c.get("type") == PROGRESSING
            and c.get("status") == "False"
            and c.get("reason") == DEADLINE_EXCEEDED
        ):
            return str(c.get("message") or "progress deadline exceeded")
    return None


@dataclass(frozen=True)
class Healthy:
    """The spec Git declared that last reached ``Available``, and where it came from."""

    revision: str
    digest: str
    spec: Obj

    def to_status(self) -> Obj:
        return {"revision": self.revision, "digest": self.digest, "spec": self.spec}


@dataclass(frozen=True)
class Rollback:
    """A rollback in force: the MyApp runs ``target``'s spec while Git declares the spec
    of digest ``held`` (from revision ``source``), whose rollout failed for ``reason``."""

    source: str
    target: str
    reason: str
    time: str
    held: str

    def to_status(self) -> Obj:
        return {
            "from": self.source,
            "to": self.target,
            "reason": self.reason,
            "time": self.time,
            "heldDigest": self.held,
        }

    def summary(self) -> str:
        return f"rolled back from {self.source or 'an unknown revision'}"


class RecordError(ValueError):
    """A rollback record that gitsync could not have written."""


@dataclass(frozen=True)
class Record:
    """What gitsync keeps of a MyApp's rollouts, where only gitsync writes: the last
    healthy spec, and the rollback in force. The decisions read this alone."""

    healthy: Healthy | None = None
    rollback: Rollback | None = None

    def texts(self, key: str) -> dict[str, str]:
        """Its texts by data key for MyApp ``key`` (``namespace/name``), in the shape of
        the status that shows them; "" for a part it has not (no data key)."""
        healthy, rollback = record_keys(key)
        return {
            healthy: _json(self.healthy.to_status()) if self.healthy is not None else "",
            rollback: _json(self.rollback.to_status()) if self.rollback is not None else "",
        }


#: the data keys of the records: ``healthy.<namespace>.<name>`` for the last healthy
#: spec, ``rollback.<namespace>.<name>`` for the rollback in force (a key of its own, so
#: that removing it by hand tries Git's spec again and keeps the healthy one)
HEALTHY_PREFIX: Final = "healthy."
ROLLBACK_PREFIX: Final = "rollback."
RECORD_PREFIXES: Final = (HEALTHY_PREFIX, ROLLBACK_PREFIX)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def record_keys(key: str) -> tuple[str, str]:
    """The data keys of MyApp ``key``'s (``namespace/name``) record (a namespace is a
    DNS label, without dots: the first dot after the prefix ends it)."""
    dotted = key.replace("/", ".", 1)
    return HEALTHY_PREFIX + dotted, ROLLBACK_PREFIX + dotted


def record_of(healthy: str | None, rollback: str | None) -> Record:
    """The record these texts hold (None or "": that part is absent).
    :class:`RecordError` when gitsync could not have written it: not a JSON object, a
    field of the wrong type, a healthy spec that Git's schema refuses (it came from
    Git), or a digest that is not its spec's."""
    return Record(
        _healthy(_parsed(healthy, "lastHealthy")), _rollback(_parsed(rollback, "rollback"))
    )


def records_of(data: Mapping[str, object] | None) -> dict[str, Record]:
    """The records in a ConfigMap's ``data``, by MyApp key (``namespace/name``); one that
    gitsync could not have written is left out, as a reconcile ignores it."""
    parts: dict[str, dict[str, str]] = {}
    for name, text in (data or {}).items():
        for prefix in RECORD_PREFIXES:
            if name.startswith(prefix) and isinstance(text, str):
                ns, _, app = name[len(prefix) :].partition(".")
                parts.setdefault(f"{ns}/{app}", {})[prefix] = text
    out: dict[str, Record] = {}
    for key, found in parts.items():
        try:
            out[key] = record_of(found.get(HEALTHY_PREFIX), found.get(ROLLBACK_PREFIX))
        except RecordError:
            continue
    return out


def _json(value: Obj) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _parsed(text: str | None, what: str) -> object:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        raise RecordError(f"{what}: not JSON ({e})") from None


def _healthy(value: object) -> Healthy | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("spec"), dict):
        raise RecordError("lastHealthy must be a map with a spec")
    spec: Obj = value["spec"]
    problems = Problems(limit=1)
    SPEC(spec, ("spec",), problems)
    if problems:
        path, message = problems[0]
        raise RecordError(f"lastHealthy.{field_name(path)}: {message}")
    found = _text(value, "digest", "lastHealthy")
    if found != digest(spec):
        raise RecordError("lastHealthy.digest is not the digest of its spec")
    return Healthy(_text(value, "revision", "lastHealthy"), found, spec)


def _rollback(value: object) -> Rollback | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RecordError("rollback must be a map")
    held = _text(value, "heldDigest", "rollback")
    if not _DIGEST.fullmatch(held):
        raise RecordError("rollback.heldDigest is not a sha256 digest")
    return Rollback(
        _text(value, "from", "rollback"),
        _text(value, "to", "rollback"),
        _text(value, "reason", "rollback"),
        _text(value, "time", "rollback"),
        held,
    )


def _text(value: Obj, name: str, within: str) -> str:
    found = value.get(name, "")
    if not isinstance(found, str):
        raise RecordError(f"{within}.{name} must be a string")
    return found


def rollback_of(status: Obj | None) -> Rollback | None:
    """The rollback a MyApp's status reports, for the reports (the drift report, the
    page): never an input to a decision."""
    r = (status or {}).get("rollback")
    if not isinstance(r, dict) or not r.get("heldDigest"):
        return None
    return Rollback(
        str(r.get("from") or ""),
        str(r.get("to") or ""),
        str(r.get("reason") or ""),
        str(r.get("time") or ""),
        str(r["heldDigest"]),
    )


def described(status: Obj | None) -> str:
    """Why the cluster runs another spec than Git's on purpose, as the MyApp's status
    reports it, for the drift report and the page, or "" when no rollback is in force."""
    rb = rollback_of(status)
    if rb is None:
        return ""
    return f"{rb.summary()} to {rb.target or 'the last healthy revision'} ({rb.reason})"


@dataclass(frozen=True)
class Held:
    """A rollback in force, and the healthy spec it holds the MyApp to instead of Git's."""

    rollback: Rollback
    spec: Obj


def hold_of(record: Record | None, git_spec: Obj | None, default: RollbackPolicy) -> Held | None:
    """What holds back ``git_spec`` (what Git declares for the MyApp now), or None: the
    policy Git gives it (``default`` where it gives none) is not ``auto``, no rollback in
    force, no healthy spec to hold to, or Git has changed the MyApp's spec since
    (released)."""
    if record is None or policy_of(git_spec, default) != "auto":
        return None
    rb, healthy = record.rollback, record.healthy
    if rb is None or healthy is None or rb.held != digest(git_spec):
        return None
    return Held(rb, healthy.spec)


def holding(
    record: Record | None, git_spec: Obj | None, default: RollbackPolicy
) -> Rollback | None:
    """The rollback that holds back ``git_spec``, or None (see :func:`hold_of`)."""
    held = hold_of(record, git_spec, default)
    return held.rollback if held is not None else None


def healthy_now(revision: str, git_spec: Obj) -> Healthy | None:
    """What ``lastHealthy`` becomes when ``git_spec`` has just reached ``Available``, or
    None when it is too large to keep (the MyApp then cannot be rolled back to it)."""
    size = stored.size(git_spec)
    if size > MAX_SPEC_BYTES:
        return None
    return Healthy(revision, digest(git_spec), git_spec)


Verdict = Literal["none", "rollback", "no-target", "off"]


def verdict(
    policy: RollbackPolicy, deployment: Obj | None, git_spec: Obj, healthy: Healthy | None
) -> tuple[Verdict, str]:
    """What a failed rollout calls for, and the deployment controller's reason.

    ``none``: the rollout has not failed. ``off``: it failed and the policy leaves it.
    ``no-target``: no healthy spec other than this one to go back to (the first
    revision of a MyApp, or the healthy spec is the one failing now: a rollback never
    rolls back itself). ``rollback``: re-apply ``healthy``."""
    why = failure(deployment)
    if why is None:
        return "none", ""
    if policy == "off":
        return "off", why
    if healthy is None or healthy.digest == digest(git_spec):
        return "no-target", why
    return "rollback", why


@dataclass(frozen=True)
class State:
    """What a reconcile found of the MyApp's rollout, for its status: the last healthy
    spec kept (None: none, or policy off), the rollback in force, why a failed rollout is
    left as it is (the Ready message), and why a hold ended (the RolledBack message)."""

    healthy: Healthy | None = None
    rollback: Rollback | None = None
    failed: str = ""
    released: str = ""

    @property
    def record(self) -> Record:
        """What gitsync's record of the MyApp becomes."""
        return Record(self.healthy, self.rollback)


def with_spec(body: Obj, spec: Obj) -> Obj:
    """``body`` (a MyApp's apply body) with ``spec`` in place of its own."""
    return {**body, "spec": spec}


EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class Judgement:
    """A reconcile's finding on a MyApp's rollout: what status says (``state``), whether
    to re-apply ``state.healthy``'s spec now, and the Events to record (type, reason,
    message)."""

    state: State
    roll_back: bool = False
    events: tuple[tuple[EventType, str, str], ...] = ()


def judge(
    *,
    policy: RollbackPolicy,
    git_spec: Obj,
    record: Record | None,
    phase: str,
    deployment: Obj | None,
    available: bool,
    drift_free: bool,
    revision: str,
    hold: Rollback | None,
    pinned: bool,
    now: str,
) -> Judgement | None:
    """The rollout of a MyApp that Git declares with ``git_spec`` at ``revision``, as its
    Deployment shows it (``available``: at its current generation; ``drift_free``: the
    MyApp and the Deployment are as desired, but for fields other controllers own),
    given gitsync's ``record`` of it, the rollback holding Git's spec back (``hold``),
    and the phase its status last reported (an Event of a failure is said once).
    ``pinned``: ``git_spec`` comes from a pin, not from the head of Git's ref. None:
    nothing to judge (suspended: the rollout is stopped), status says what it said."""
    if git_spec.get("suspend"):
        return None
    healthy = record.healthy if record is not None else None
    ended = record.rollback if record is not None else None
    if hold is not None:
        return Judgement(State(healthy, hold))
    if ended is not None and pinned:
        # a pin is a person's choice, not Git's: the spec held back stays held back,
        # and is held back again when the pin is lifted (the pinned spec is applied)
        return Judgement(State(healthy, ended))
    events: list[tuple[EventType, str, str]] = []
    released = ""
    if ended is not None:
        released = f"Git changed the spec held back since the rollback from {ended.source}"
        events.append(("Normal", RELEASED, f"{released}: applied"))
    found, why = verdict(policy, deployment, git_spec, healthy)
    if found == "rollback":
        assert healthy is not None  # (the verdict says so)
        rb = Rollback(revision, healthy.revision, why, now, digest(git_spec))
        message = (
            f"the rollout of {revision or 'the revision'} failed ({why}); "
            f"rolled back to the spec of {healthy.revision or 'the last healthy revision'}"
        )
        events.append(("Warning", ROLLED_BACK, message))
        return Judgement(State(healthy, rb), True, tuple(events))
    # the record is kept under auto alone: with rollback off it decides nothing, and a
    # spec that reached Available before auto was set is not known as healthy
    kept = healthy if policy == "auto" else None
    if found != "none":
        left = "rollback is off" if found == "off" else "no earlier healthy spec to go back to"
        failed = f"the rollout of {revision or 'this revision'} failed ({why}); {left}"
        if phase != "Degraded":
            events.append(("Warning", ROLLOUT_FAILED, failed))
        return Judgement(State(kept, None, failed, released), False, tuple(events))
    if (
        policy == "auto"
        and available
        and drift_free
        and (kept is None or kept.digest != digest(git_spec))
    ):
        # Available at Git's spec: what a later failed rollout goes back to (a spec too
        # large to keep leaves the one before)
        kept = healthy_now(revision, git_spec) or kept
    return Judgement(State(kept, None, "", released), False, tuple(events))
