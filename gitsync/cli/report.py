"""The ``gitsync drift`` report: rows from MyApp status, and a kubectl-like table."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gitsync.errors import printable
from gitsync.model import order
from gitsync.model.api import Obj
from gitsync.model.shards import bucket_of


def _condition(app: Obj, type_: str) -> str:
    return str((_conditions(app, type_) or {}).get("status", "Unknown"))


def _conditions(app: Obj, type_: str) -> Obj | None:
    for c in (app.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def since_of(app: Obj, drift: list[Obj]) -> tuple[str, bool]:
    """When the drift began, and whether that is gitsync's own observation: the earliest
    time the API server recorded for a drifted field (its managedFields entry), else,
    when it recorded none (a change through ``/scale`` carries no time), when gitsync
    first saw the drift (the Drifted condition's transition)."""
    recorded = [str(d["time"]) for d in drift if d.get("time")]
    if recorded:
        return min(recorded), False
    seen = _conditions(app, "Drifted") or {}
    if drift and seen.get("status") == "True" and seen.get("lastTransitionTime"):
        return str(seen["lastTransitionTime"]), True
    return "", False


def drift_rows(apps: list[Obj], replicas: Mapping[int, str] | None = None) -> list[dict[str, Any]]:
    """One row per MyApp; with ``replicas`` (a sharded instance's buckets and who
    serves each), the replica that serves it ("" while none does)."""
    rows = []
    for app in sorted(apps, key=lambda a: (a["metadata"]["namespace"], a["metadata"]["name"])):
        drift = (app.get("status") or {}).get("drift") or []
        since, seen = since_of(app, drift)
        meta = app["metadata"]
        served = {}
        if replicas is not None:
            served = {"replica": replicas.get(bucket_of(meta["namespace"], meta["name"]), "")}
        rows.append(
            {
                **served,
                "namespace": app["metadata"]["namespace"],
                "name": app["metadata"]["name"],
                "synced": _condition(app, "Synced"),
                "drifted": bool(drift),
                "paths": [f"{d.get('object')} {d.get('path')}" for d in drift],
                "changedBy": sorted({str(d.get("manager") or "unknown") for d in drift}),
                "since": since,
                # since is when gitsync first saw it: the server recorded no time
                "sinceSeen": seen,
                "drift": drift,
                # -o wide
                "ready": _condition(app, "Ready"),
                "image": (app.get("spec") or {}).get("image") or "",
                "revision": ((app.get("status") or {}).get("source") or {}).get("revision", ""),
                "held": order.held(app.get("status")),
            }
        )
    return rows


COLUMNS = ("NAMESPACE", "NAME", "SYNCED", "DRIFTED", "PATHS", "CHANGED BY", "SINCE")
#: -o wide, as kubectl: more columns after the same ones
WIDE = ("READY", "REVISION", "IMAGE")


def render_table(rows: list[dict[str, Any]], wide: bool = False) -> str:
    sharded = any("replica" in r for r in rows)
    head = COLUMNS + (("REPLICA",) if sharded else ()) + (WIDE if wide else ())
    table = [head] + [
        (
            r["namespace"],
            r["name"],
            r["synced"],
            "True" if r["drifted"] else "False",
            ",".join(r["paths"]) or "<none>",
            ",".join(r["changedBy"]) or "<none>",
            (r["since"] + (" (seen)" if r["sinceSeen"] else "")) or "<none>",
            *((r.get("replica") or "<none>",) if sharded else ()),
            *(
                (r["ready"], _short(r["revision"]) or "<none>", r["image"] or "<none>")
                if wide
                else ()
            ),
        )
        for r in rows
    ]
    # names, paths and managers come from the cluster: one row stays one line
    table = [tuple(printable(cell) for cell in row) for row in table]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "".join(
        "   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in table
    )


def render_details(rows: list[dict[str, Any]]) -> str:
    """One line per drifted path, under the table: the values (desired from Git, live in
    the cluster) and who changed it, which a table cell has no room for; and one per
    MyApp held back from Git, with why."""
    lines = []
    for r in rows:
        if r["held"]:
            lines.append(f"held {r['namespace']}/{r['name']}: {r['held']}")
        for d in r["drift"]:
            who = d.get("manager") or "unknown"
            how = f", {d['operation']}" if d.get("operation") else ""
            lines.append(
                f"drifted {r['namespace']}/{r['name']} {d.get('object')} {d.get('path')}: "
                f"desired {_value(d.get('desired'))}, live {_value(d.get('live'))} "
                f"(changed by {who}{how})"
            )
    # values, paths and managers come from the cluster: each finding stays one line
    return "".join(printable(line) + "\n" for line in lines)


def _value(v: Any) -> str:
    return json.dumps(v, default=str) if v is not None else "<none>"


def _short(revision: str) -> str:
    """main@sha1:<40 hex> as main@1a2b3c4, as the drift page shows it."""
    ref, sep, sha = revision.partition("@sha1:")
    return f"{ref}@{sha[:7]}" if sep else revision
