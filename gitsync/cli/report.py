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
    for c in (app.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return str(c.get("status", "Unknown"))
    return "Unknown"


def drift_rows(apps: list[Obj], replicas: Mapping[int, str] | None = None) -> list[dict[str, Any]]:
    """One row per MyApp; with ``replicas`` (a sharded instance's buckets and who
    serves each), the replica that serves it ("" while none does)."""
    rows = []
    for app in sorted(apps, key=lambda a: (a["metadata"]["namespace"], a["metadata"]["name"])):
        drift = (app.get("status") or {}).get("drift") or []
        since = min((str(d.get("time") or "") for d in drift), default="")
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
                "drift": drift,
                "held": order.held(app.get("status")),
            }
        )
    return rows


COLUMNS = ("NAMESPACE", "NAME", "SYNCED", "DRIFTED", "PATHS", "CHANGED BY", "SINCE")


def render_table(rows: list[dict[str, Any]]) -> str:
    sharded = any("replica" in r for r in rows)
    table = [COLUMNS + (("REPLICA",) if sharded else ())] + [
        (
            r["namespace"],
            r["name"],
            r["synced"],
            "True" if r["drifted"] else "False",
            ",".join(r["paths"]) or "<none>",
            ",".join(r["changedBy"]) or "<none>",
            r["since"] or "<none>",
            *((r.get("replica") or "<none>",) if sharded else ()),
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
