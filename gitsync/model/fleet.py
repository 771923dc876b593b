"""What the MyApps' status says of the fleet, for the metrics an alert or a dashboard
reads: how many MyApps are in each state, and since when each drifted one has drifted.

Pure: the daemon reads the MyApps it serves from its cache at each scrape.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Final

from gitsync.model.api import Obj, key_of

#: the states counted, each a series of ``gitsync_myapps`` (0 included)
STATES: Final = ("total", "drifted", "conflict", "not_synced", "not_ready")


def _condition(myapp: Obj, type_: str) -> Obj | None:
    conditions = (myapp.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == type_), None)


def _is(myapp: Obj, type_: str, status: str) -> bool:
    return (_condition(myapp, type_) or {}).get("status") == status


def states(myapps: Iterable[Obj]) -> dict[str, float]:
    """How many of ``myapps`` are in each state: drifted (a field differs from Git that
    gitsync owns), conflict (one another field manager owns), not synced (Git's
    change not applied: failed, held or waiting), not ready (its Deployment not
    Available). A MyApp may be in several; one with no status yet is in none."""
    out = dict.fromkeys(STATES, 0.0)
    for myapp in myapps:
        out["total"] += 1
        drift = (myapp.get("status") or {}).get("drift") or []
        entries = [e for e in drift if isinstance(e, dict)]
        if _is(myapp, "Drifted", "True") and any(not e.get("conflict") for e in entries):
            out["drifted"] += 1
        if any(e.get("conflict") for e in entries):
            out["conflict"] += 1
        if _is(myapp, "Synced", "False"):
            out["not_synced"] += 1
        if _is(myapp, "Ready", "False"):
            out["not_ready"] += 1
    return out


def drifted_since(myapps: Iterable[Obj]) -> dict[str, float]:
    """``namespace/name`` of each drifted MyApp → the Unix time its Drifted condition
    became True (an alert fires on drift that stands longer than it should)."""
    out: dict[str, float] = {}
    for myapp in myapps:
        drifted = _condition(myapp, "Drifted")
        if drifted is None or drifted.get("status") != "True":
            continue
        try:
            since = dt.datetime.fromisoformat(str(drifted.get("lastTransitionTime")))
        except ValueError:
            continue
        if since.tzinfo is None:
            continue  # not a metav1.Time: not ours to guess the zone of
        out[key_of(myapp)] = since.timestamp()
    return out
