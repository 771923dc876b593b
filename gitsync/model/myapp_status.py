"""What gitsync writes into ``MyApp.status``: pure functions of what it observed.

Status has one writer (field manager ``gitsync`` on /status), so the whole
status is computed here every time: the sync loop's part (``source``, the
Synced condition) is carried over from the live status unless the sync loop
passes a newer one. Applying a partial status under the same manager would
remove the fields left out.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Final

from gitsync.model import order as orderlib
from gitsync.model import rollout as rolloutlib
from gitsync.model import stored
from gitsync.model.api import Obj
from gitsync.model.crd_schema import OPENAPI_V3_SCHEMA

#: ``status.drift`` entries written (the CRD's maxItems); the Drifted condition counts
#: the rest. Unbounded, drift of a large MyApp (every env value, desired and live) made
#: the object too large to store, and every status write failed
MAX_DRIFT_ENTRIES: Final[int] = OPENAPI_V3_SCHEMA["properties"]["status"]["properties"]["drift"][
    "maxItems"
]
#: bytes (as stored) of one entry's path, desired or live value; a longer one is cut to
#: its start (a string saying how much was cut), and the Drifted condition counts them
MAX_DRIFT_VALUE_BYTES: Final = 1024
#: the condition of an automatic rollback (see gitsync.model.rollout), named as its Event
ROLLED_BACK: Final = rolloutlib.ROLLED_BACK
#: the Synced reason of a MyApp whose file in Git no longer loads
LOAD_FAILED: Final = "LoadFailed"


@dataclass(frozen=True)
class SyncInfo:
    """The sync loop's part of a MyApp's status, from one pass."""

    revision: str
    path: str
    time: str
    ok: bool = True
    message: str = ""
    #: the Synced reason, when not the one ``ok`` gives (:data:`LOAD_FAILED`)
    reason: str = ""


def source_for(changed: bool, myapp: Obj, info: SyncInfo) -> SyncInfo:
    """The source a MyApp reports: the commit that last changed it. A commit that
    leaves a MyApp as it was does not rewrite its status (with N MyApps, stamping
    each new revision on all of them would cost N writes a commit)."""
    source = (myapp.get("status") or {}).get("source") or {}
    if not changed and source.get("path") == info.path and source.get("revision"):
        return SyncInfo(
            str(source["revision"]), info.path, str(source.get("lastSyncTime") or info.time)
        )
    return info


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def phase_of(deployment: Obj | None) -> str:
    """The phase, from the Deployment's own spec and status alone.

    Not from the MyApp's ``spec.replicas``: another controller (an HPA) may own the
    Deployment's replicas, and then the MyApp's number is never what runs. The test is
    ``kubectl rollout status``'s: the deployment controller has seen the current
    generation, every desired replica runs the current template, no old one is left,
    and every updated one is available.
    """
    if deployment is None:
        return "Pending"
    spec: Obj = deployment.get("spec") or {}
    st: Obj = deployment.get("status") or {}
    for c in st.get("conditions") or []:
        if c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded":
            return "Degraded"
    if not rolloutlib.seen(deployment):
        return "Progressing"  # the status describes an older spec
    want = int(spec.get("replicas", 1))
    updated = int(st.get("updatedReplicas", 0))
    if updated < want or int(st.get("replicas", 0)) > updated:
        return "Progressing"
    if int(st.get("availableReplicas", 0)) < updated:
        return "Progressing"
    return "Available"


def condition(
    type_: str, ok: bool, reason: str, message: str, generation: int, previous: list[Obj]
) -> Obj:
    """A metav1.Condition; lastTransitionTime moves only when status does."""
    status = "True" if ok else "False"
    prev = next((c for c in previous if c.get("type") == type_), None)
    since = prev["lastTransitionTime"] if prev and prev.get("status") == status else now()
    return {
        "type": type_,
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }


def compute(
    myapp: Obj,
    deployment: Obj | None,
    *,
    drift: list[Obj],
    sync: SyncInfo | None = None,
    error: str = "",
    rollout: rolloutlib.State | None = None,
    wait: orderlib.Wait | None = None,
) -> Obj:
    """The full status of ``myapp``. ``rollout`` None: what status says of rollbacks is
    carried over (a reconcile that did not judge the rollout). ``wait``: what Git's
    change to it waits for (the Waiting condition, and Synced says so)."""
    live: Obj = myapp.get("status") or {}
    prev: list[Obj] = live.get("conditions") or []
    gen = int(myapp["metadata"].get("generation", 0))
    dst: Obj = (deployment or {}).get("status", {})
    phase = phase_of(deployment)
    suspended = bool(myapp.get("spec", {}).get("suspend"))
    status: Obj = {
        "observedGeneration": gen,
        "replicas": int(dst.get("replicas", 0)),
        "availableReplicas": int(dst.get("availableReplicas", 0)),
        "phase": phase,
    }
    # the counts go in the condition's message, not in fields of their own: a CRD
    # older than gitsync (Helm never upgrades one) would refuse every status write
    status["drift"], omitted, values_cut = bounded_drift(drift)
    if error:
        ready = condition("Ready", False, "ReconcileError", error, gen, prev)
    elif suspended:
        ready = condition(
            "Ready", phase == "Available", "Suspended", "spec.suspend is set", gen, prev
        )
    else:
        message = (rollout.failed if rollout else "") or _ready_message(deployment)
        ready = condition("Ready", phase == "Available", phase, message, gen, prev)
    drifted = condition(
        "Drifted",
        bool(drift),
        "Drifted" if drift else "NoDrift",
        _drift_message(drift, omitted, values_cut),
        gen,
        prev,
    )
    conditions = [ready, drifted]
    held = _rollback(status, conditions, live, rollout, gen)
    if (waiting := _waiting(wait, gen, prev)) is not None:
        conditions.append(waiting)
    if sync is not None:
        status["source"] = _source(live, sync)
        if sync.reason == LOAD_FAILED:
            # this revision declares nothing for it that could be applied, waited for or
            # held back: whatever held the last revision's change, this is the news
            conditions.append(condition("Synced", False, LOAD_FAILED, sync.message, gen, prev))
        elif wait is not None:
            # Git's change is not applied yet, and not for want of trying
            message = f"this revision's change is not applied yet: {wait.message}"
            conditions.append(condition("Synced", False, wait.reason, message, gen, prev))
        elif held is not None:
            # the cluster runs an older spec than this revision's, on purpose
            message = f"{held.summary()}: this revision's spec is held back until Git changes it"
            conditions.append(condition("Synced", False, "RolledBack", message, gen, prev))
        else:
            reason = "Applied" if sync.ok else "SyncFailed"
            msg = sync.message or f"applied revision {sync.revision}"
            conditions.append(condition("Synced", sync.ok, reason, msg, gen, prev))
    else:
        if live.get("source"):
            status["source"] = live["source"]
        synced = next((c for c in prev if c.get("type") == "Synced"), None)
        if synced:
            conditions.append(synced)
    status["conditions"] = conditions
    return status


def _waiting(wait: orderlib.Wait | None, gen: int, prev: list[Obj]) -> Obj | None:
    """The Waiting condition: True while Git's change waits, False once it no longer
    does (kept from then on, its transition time too, so ``kubectl wait
    --for=condition=Waiting=false`` works), absent on a MyApp that never waited."""
    if wait is not None:
        return condition(orderlib.WAITING, True, wait.reason, wait.message, gen, prev)
    if not any(c.get("type") == orderlib.WAITING for c in prev):
        return None
    return condition(orderlib.WAITING, False, "Released", "no longer waiting", gen, prev)


def _source(live: Obj, sync: SyncInfo) -> Obj:
    old = live.get("source") or {}
    same_source = old.get("revision") == sync.revision and old.get("path") == sync.path
    # the time this revision was applied, not of the latest pass: a pass that
    # changes nothing must not write (steady state costs zero writes)
    when = old.get("lastSyncTime") if same_source and old.get("lastSyncTime") else sync.time
    return {"revision": sync.revision, "path": sync.path, "lastSyncTime": when}


def _rollback(
    status: Obj, conditions: list[Obj], live: Obj, rollout: rolloutlib.State | None, gen: int
) -> rolloutlib.Rollback | None:
    """``status.lastHealthy``, ``status.rollback`` and the RolledBack condition, into
    ``status`` and ``conditions``; the rollback in force, if any."""
    prev: list[Obj] = live.get("conditions") or []
    before = next((c for c in prev if c.get("type") == ROLLED_BACK), None)
    if rollout is None:
        for name in ("lastHealthy", "rollback"):
            if live.get(name):
                status[name] = live[name]
        if before is not None:
            conditions.append(before)
        return rolloutlib.rollback_of(live)
    if rollout.healthy is not None:
        status["lastHealthy"] = rollout.healthy.to_status()
    rb = rollout.rollback
    if rb is not None:
        status["rollback"] = rb.to_status()
        message = (
            f"the rollout of {rb.source or 'the revision'} failed ({rb.reason}); "
            f"running the spec of {rb.target or 'the last healthy revision'}, "
            "held until Git changes this MyApp"
        )
        conditions.append(condition(ROLLED_BACK, True, "RolledBack", message, gen, prev))
    elif before is not None:
        # once rolled back, the condition stays to say how the hold ended
        if before.get("status") == "False" and not rollout.released:
            conditions.append(before)
        else:
            message = rollout.released or "no rollback in force"
            conditions.append(condition(ROLLED_BACK, False, "Released", message, gen, prev))
    return rb


def _ready_message(deployment: Obj | None) -> str:
    if deployment is None:
        return "no Deployment yet"
    # of the Deployment's own desired count, which another controller may set
    want = (deployment.get("spec") or {}).get("replicas", 1)
    available = (deployment.get("status") or {}).get("availableReplicas", 0)
    return f"{available}/{want} replicas available"


def bounded_drift(drift: list[Obj]) -> tuple[list[Obj], int, int]:
    """``drift`` as ``status.drift`` holds it: at most :data:`MAX_DRIFT_ENTRIES`, each
    path and value at most :data:`MAX_DRIFT_VALUE_BYTES` stored; and the entries left
    out and the values cut."""
    entries: list[Obj] = []
    values_cut = 0
    for entry in drift[:MAX_DRIFT_ENTRIES]:
        short = dict(entry)
        for name in ("path", "desired", "live"):
            if name in short:
                short[name], cut = stored.shorten(short[name], MAX_DRIFT_VALUE_BYTES)
                values_cut += cut
        entries.append(short)
    return entries, len(drift) - len(entries), values_cut


def _drift_message(drift: list[Obj], omitted: int = 0, values_cut: int = 0) -> str:
    if not drift:
        return "live state matches the desired state"
    paths = ", ".join(f"{d['object']} {stored.shorten(d['path'], 256)[0]}" for d in drift[:5])
    more = f" and {len(drift) - 5} more" if len(drift) > 5 else ""
    cut = []
    if omitted:
        cut.append(f"{omitted} not listed in status.drift")
    if values_cut:
        cut.append(f"{values_cut} values cut to {MAX_DRIFT_VALUE_BYTES} bytes")
    note = f" ({', '.join(cut)})" if cut else ""
    return f"{len(drift)} drifted{note}: {paths}{more}"


def keep_recorded_drift(entries: list[Obj], myapp: Obj, obj: str) -> list[Obj]:
    """``entries`` with the drift of ``obj`` replaced by what ``myapp``'s status last
    recorded for it: for a pass that could not compare ``obj`` (its apply failed), so
    that a failure does not read as "no drift"."""
    recorded = (myapp.get("status") or {}).get("drift") or []
    kept = [e for e in recorded if e.get("object") == obj]
    fresh = [e for e in entries if e.get("object") != obj]
    return sorted(fresh + kept, key=lambda e: (str(e.get("object")), str(e.get("path"))))


def same(live: Obj | None, desired: Obj) -> bool:
    """Whether writing ``desired`` would change nothing, ignoring timestamps that
    ``compute`` carries over anyway."""
    return bool(_strip(live or {}) == _strip(desired))


def _strip(status: Obj) -> Any:
    out = {k: v for k, v in status.items() if k != "conditions"}
    out["drift"] = status.get("drift") or []
    out["conditions"] = sorted(
        (
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in status.get("conditions") or []
        ),
        key=lambda c: str(c.get("type")),
    )
    return out
