"""The drift page: the documents behind ``/api/v1/apps`` and their HTML.

Pure functions: plain dicts (MyApps and Deployments from the informer caches, the sync
state) in, JSON-ready dicts and HTML text out. Names, images and field values come from
whoever can push to Git or edit an object, so every value is escaped here, and the
script (:data:`SCRIPT`) only ever sets ``textContent``.

What the documents hold is chosen, not copied: no managedFields, no annotations, no
spec beyond image and replicas, nothing of the daemon's configuration (the webhook
secret, Git credentials), so the unauthenticated endpoint gives away no secret. Env
values, which the drift and blame tables would otherwise show, are hidden
(:mod:`gitsync.engine.redact`): the page says that one differs and who changed it.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from gitsync.engine import redact
from gitsync.engine.blame import BlameRow, describe
from gitsync.engine.changeset import ChangeSet
from gitsync.model import order
from gitsync.model.api import Obj, key_of

#: what the status ConfigMap's data says of the last sync pass, as the page shows it
SYNC_FIELDS: Final = ("revision", "result", "lastError", "lastChange", "pruneSkipped", "pinned")
DRIFT_FIELDS: Final = ("object", "path", "desired", "live", "manager", "operation", "time")
#: headers of every page: no script but our own, no framing, no referrer
SECURITY_HEADERS: Final = (
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
)


def app_doc(myapp: Obj, deployment: Obj | None, replica: str | None = None) -> Obj:
    """One MyApp on the page; ``replica``: with sharding, who serves it ("" nobody now)."""
    meta = myapp.get("metadata") or {}
    spec = myapp.get("spec") or {}
    st = myapp.get("status") or {}
    source = st.get("source") or {}
    drift = [
        {**{k: d[k] for k in DRIFT_FIELDS if k in d}, "conflict": bool(d.get("conflict"))}
        for d in redact.drift_entries(d for d in st.get("drift") or [] if isinstance(d, dict))
    ]
    conditions = {
        str(c.get("type")): str(c.get("status"))
        for c in st.get("conditions") or []
        if isinstance(c, dict)
    }
    # with sharding, another replica's Deployments are not in this one's cache: the
    # figures its status last recorded stand in
    dep_status = (deployment or {}).get("status") or st
    served = {} if replica is None else {"replica": replica}
    return {
        **served,
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "image": spec.get("image"),
        "replicas": spec.get("replicas", 1),
        "availableReplicas": dep_status.get("availableReplicas", 0),
        "phase": st.get("phase", "Pending"),
        "revision": source.get("revision", ""),
        "file": source.get("path", ""),
        "lastSyncTime": source.get("lastSyncTime", ""),
        "synced": conditions.get("Synced", "Unknown"),
        "ready": conditions.get("Ready", "Unknown"),
        "drift": [d for d in drift if not d["conflict"]],
        "conflicts": [d for d in drift if d["conflict"]],
        # a rollback in force: the cluster runs an older spec than Git's, on purpose
        "held": order.held(st),
    }


def apps_doc(
    myapps: Iterable[Obj],
    deployments: Mapping[str, Obj],
    sync: Mapping[str, str] | None,
    replica_of: Callable[[str], str] | None = None,
    history: list[Obj] | None = None,
) -> Obj:
    """``/api/v1/apps``: every MyApp, and the source's last sync result; with sharding
    (``replica_of``), the replica that serves each; this replica's last passes, oldest
    first (``history``, each a :func:`pass_entry`)."""
    apps = [
        app_doc(
            a, deployments.get(key_of(a)), None if replica_of is None else replica_of(key_of(a))
        )
        for a in myapps
    ]
    apps.sort(key=lambda a: (a["namespace"], a["name"]))
    return {
        "sync": {k: (sync or {}).get(k, "") for k in SYNC_FIELDS} if sync is not None else None,
        "apps": apps,
        "drifted": sum(1 for a in apps if a["drift"] or a["conflicts"]),
        "history": list(history or []),
    }


def pass_entry(
    changes: ChangeSet, trigger: str, time: str, drifted: int, delivery: str = ""
) -> Obj:
    """One pass in the page's history: when, why, at which revision, how long, what it
    wrote, whether it failed, and how many MyApps stood drifted after it."""
    counts = changes.counts()
    return {
        "time": time,
        "revision": changes.revision,
        "trigger": trigger + (f" {delivery}" if delivery else ""),
        "seconds": round(changes.seconds, 3),
        "created": counts["created"],
        "configured": counts["configured"],
        "pruned": counts["pruned"],
        "failed": changes.failures(),
        "result": "Succeeded" if changes.ok else "Failed",
        "drifted": drifted,
    }


def blame_doc(app: Obj, rows: list[BlameRow]) -> Obj:
    """``/api/v1/apps/<ns>/<name>``: the app and its blame table."""
    blame = []
    for r in rows:
        row = r.to_json()
        for k in redact.VALUE_KEYS:
            row[k] = redact.hidden(r.path, row[k])
        blame.append({**row, "describe": describe(r.origin)})
    return {"app": app, "blame": blame}


# --- HTML ----------------------------------------------------------------------------------


def _e(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return html.escape(text, quote=True)


def _short(revision: str) -> str:
    # main@sha1:<40 hex> reads as main@1a2b3c4
    ref, sep, sha = revision.partition("@sha1:")
    return f"{ref}@{sha[:7]}" if sep else revision


def drift_text(d: Mapping[str, Any]) -> str:
    who = d.get("manager") or "unknown"
    if d.get("operation"):
        who += f" ({d['operation']})"
    when = f" at {d['time']}" if d.get("time") else ""
    live = json.dumps(d.get("live")) if "live" in d else "<none>"
    return (
        f"{d.get('object')} {d.get('path')}: Git {json.dumps(d.get('desired'))}, "
        f"live {live}, by {who}{when}"
    )


def _layout(title: str, view: str, body: str, data: str = "") -> str:
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title>"
        '<link rel="stylesheet" href="/ui.css"></head>'
        f'<body data-view="{_e(view)}"{data}>'
        '<header><a href="/">gitsync</a> <span class="muted">drift</span>'
        '<span id="updated" class="muted"></span></header>'
        f"<main>{body}</main>"
        '<script src="/ui.js"></script></body></html>\n'
    )


def sync_html(sync: Mapping[str, Any] | None) -> str:
    if sync is None:
        return '<p id="sync" class="muted">No Git source: the operator alone.</p>'
    result = sync.get("result") or "not synced yet"
    parts = [
        f'<span class="badge {_e(str(result).lower())}">{_e(result)}</span>',
        f"revision <code>{_e(_short(str(sync.get('revision') or '-')))}</code>",
    ]
    if sync.get("lastChange"):
        parts.append(f"last change: {_e(sync['lastChange'])}")
    if sync.get("lastError"):
        parts.append(f'<span class="bad">error: {_e(sync["lastError"])}</span>')
    if sync.get("pruneSkipped"):
        parts.append(f'<span class="warn">prune skipped: {_e(sync["pruneSkipped"])}</span>')
    # held by a pin (gitsync rollback): said with who, when and why, a line per pin
    parts.extend(
        f'<span class="warn">{_e(line)}</span>'
        for line in str(sync.get("pinned") or "").splitlines()
    )
    return '<p id="sync">' + " · ".join(parts) + "</p>"


def _drift_cell(app: Mapping[str, Any]) -> str:
    items = [("drift", d) for d in app["drift"]] + [("conflict", d) for d in app["conflicts"]]
    held = f'<li class="held">held: {_e(app["held"])}</li>' if app["held"] else ""
    if not items and not held:
        return '<span class="ok">in sync</span>'
    lines = "".join(f'<li class="{k}">{_e(drift_text(d))}</li>' for k, d in items)
    return f"<ul>{held}{lines}</ul>"


def app_row(app: Mapping[str, Any]) -> str:
    href = f"/apps/{_e(app['namespace'])}/{_e(app['name'])}"
    cls = "drifted" if app["drift"] or app["conflicts"] else ""
    return (
        f'<tr class="{cls}"><td>{_e(app["namespace"])}</td>'
        f'<td><a href="{href}">{_e(app["name"])}</a></td>'
        f'<td><span class="badge {_e(str(app["phase"]).lower())}">{_e(app["phase"])}</span></td>'
        f"<td>{_e(app['availableReplicas'])}/{_e(app['replicas'])}</td>"
        f"<td><code>{_e(_short(str(app['revision'])))}</code></td>"
        f"<td>{_e(app['synced'])}</td>"
        f"<td>{_drift_cell(app)}</td>"
        + (f"<td>{_e(app['replica'] or 'none')}</td>" if "replica" in app else "")
        + "</tr>"
    )


APPS_HEAD: Final = (
    "<tr><th>Namespace</th><th>Name</th><th>Phase</th><th>Ready</th><th>Revision</th>"
    "<th>Synced</th><th>Drift and conflicts</th></tr>"
)


def index_html(doc: Mapping[str, Any]) -> str:
    rows = "".join(app_row(a) for a in doc["apps"])
    history = doc.get("history") or []
    passes = "".join(pass_row(p) for p in reversed(history))
    body = (
        f"{sync_html(doc['sync'])}"
        f'<p id="summary">{len(doc["apps"])} MyApps, {doc["drifted"]} drifted</p>'
        f'<table id="apps"><thead>{apps_head(doc)}</thead><tbody>{rows}</tbody></table>'
        "<h2>Last passes</h2>"
        f"{timeline_svg(history)}"
        f'<table id="passes"><thead>{PASSES_HEAD}</thead><tbody>{passes}</tbody></table>'
    )
    return _layout("gitsync: drift", "index", body)


PASSES_HEAD: Final = (
    "<tr><th>Time</th><th>Trigger</th><th>Revision</th><th>Seconds</th>"
    "<th>Written</th><th>Result</th><th>Drifted</th></tr>"
)


def written_text(p: Mapping[str, Any]) -> str:
    return f"{p['created']} created, {p['configured']} configured, {p['pruned']} pruned"


def pass_row(p: Mapping[str, Any]) -> str:
    cls = "failed" if p["result"] == "Failed" else ""
    return (
        f'<tr class="{cls}"><td>{_e(p["time"])}</td><td>{_e(p["trigger"])}</td>'
        f"<td><code>{_e(_short(str(p['revision'])))}</code></td><td>{_e(p['seconds'])}</td>"
        f"<td>{_e(written_text(p))}</td><td>{_e(p['result'])}</td><td>{_e(p['drifted'])}</td>"
        "</tr>"
    )


#: the timeline's size, in SVG units
TIMELINE: Final = (600, 90)
#: the passes the page keeps, lists and draws (a slot each on the timeline)
HISTORY: Final = 30


def timeline_svg(history: list[Mapping[str, Any]]) -> str:
    """The last passes drawn: a bar per pass, as tall as it was long (blue; red when it
    failed), and the drifted MyApps after each (an orange line). Drawn here, with
    presentation attributes only: no script, no style, and so within the page's CSP."""
    width, height = TIMELINE
    if not history:
        return '<p class="muted" id="timeline">No pass yet on this replica.</p>'
    slot = width / max(len(history), HISTORY)  # one pass is a narrow bar, not the width
    longest = max(float(p["seconds"]) for p in history) or 1.0
    most = max(int(p["drifted"]) for p in history) or 1
    parts = []
    points = []
    for i, p in enumerate(history):
        h = max(1.0, (height - 10) * float(p["seconds"]) / longest)
        x = i * slot
        colour = "#a4161a" if p["result"] == "Failed" else "#3b6ea5"
        tip = f"{p['time']}: {p['trigger']}, {p['seconds']} s, {p['drifted']} drifted"
        parts.append(
            f'<rect x="{x + slot * 0.15:.1f}" y="{height - h:.1f}" width="{slot * 0.7:.1f}" '
            f'height="{h:.1f}" fill="{colour}"><title>{_e(tip)}</title></rect>'
        )
        y = height - 5 - (height - 10) * int(p["drifted"]) / most
        points.append(f"{x + slot / 2:.1f},{y:.1f}")
    line = f'<polyline points="{" ".join(points)}" fill="none" stroke="#e8a317" stroke-width="2"/>'
    return (
        f'<svg id="timeline" role="img" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}"><title>Pass durations (bars, longest {longest:g} s) and drifted '
        f"MyApps (line, most {most})</title>{''.join(parts)}{line}</svg>"
    )


def apps_head(doc: Mapping[str, Any]) -> str:
    """The table's head; with sharding, a column for the replica serving each MyApp."""
    if any("replica" in a for a in doc["apps"]):
        return APPS_HEAD.removesuffix("</tr>") + "<th>Replica</th></tr>"
    return APPS_HEAD


BLAME_HEAD: Final = "<tr><th>Object</th><th>Field</th><th>Live</th><th>Origin</th></tr>"


def blame_row(row: Mapping[str, Any]) -> str:
    cls = row["origin"]["kind"] if row["drifted"] else ""
    return (
        f'<tr class="{_e(cls)}"><td>{_e(row["object"])}</td><td><code>{_e(row["path"])}</code>'
        f"</td><td><code>{_e(row['live'])}</code></td><td>{_e(row['describe'])}</td></tr>"
    )


def app_html(doc: Mapping[str, Any]) -> str:
    app = doc["app"]
    ns, name = app["namespace"], app["name"]
    rows = "".join(blame_row(r) for r in doc["blame"])
    body = (
        f"<h1>MyApp {_e(ns)}/{_e(name)}</h1>"
        f'<table id="app"><thead>{APPS_HEAD}</thead><tbody>{app_row(app)}</tbody></table>'
        f'<h2>Blame</h2><p class="muted">From {_e(app["file"] or "no file")} at '
        f"<code>{_e(_short(str(app['revision'])))}</code></p>"
        f'<table id="blame"><thead>{BLAME_HEAD}</thead><tbody>{rows}</tbody></table>'
    )
    data = f' data-namespace="{_e(ns)}" data-name="{_e(name)}"'
    return _layout(f"gitsync: {ns}/{name}", "app", body, data)


# --- static files ---------------------------------------------------------------------------

STYLE: Final = """\
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6em 1em}header a{color:#fff;font-weight:600}
header #updated{float:right}main{padding:1em}table{border-collapse:collapse;width:100%;
background:#fff}th,td{border-bottom:1px solid #e3e6ea;padding:.4em .6em;text-align:left;
vertical-align:top}th{background:#eef0f3}ul{margin:0;padding-left:1.2em}code{font-size:13px}
.muted{color:#7a8394}.badge{border-radius:3px;padding:0 .4em;background:#e3e6ea}
.available,.succeeded{background:#d4f4dd}.degraded,.failed{background:#f9d6d5}
.progressing{background:#fdf1c7}tr.drifted,tr.drift{background:#fff6e0}
tr.failed{background:#fdeceb}#timeline{display:block;margin:.5em 0;background:#fff}
tr.conflict,li.conflict{color:#a4161a}li.held{color:#9c6500}.ok{color:#2b8a3e}.bad{color:#a4161a}.warn{color:#9c6500}
"""

SCRIPT: Final = """\
"use strict";
// Live refresh: poll the JSON endpoint and rebuild the tables. Values only ever go
// into textContent, never into HTML, so a name or value cannot become markup.
(function () {
  var view = document.body.dataset.view;
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }
  function show(v) {
    if (v === undefined || v === null) return "";
    return typeof v === "string" ? v : JSON.stringify(v);
  }
  function short(rev) {
    var i = rev.indexOf("@sha1:");
    return i < 0 ? rev : rev.slice(0, i) + "@" + rev.slice(i + 6, i + 13);
  }
  function driftText(d) {
    var who = d.manager || "unknown";
    if (d.operation) who += " (" + d.operation + ")";
    var live = ("live" in d) ? JSON.stringify(d.live) : "<none>";
    return d.object + " " + d.path + ": Git " + JSON.stringify(d.desired) + ", live " +
      live + ", by " + who + (d.time ? " at " + d.time : "");
  }
  function appRow(a) {
    var tr = el("tr", null, a.drift.length || a.conflicts.length ? "drifted" : "");
    tr.appendChild(el("td", a.namespace));
    var name = el("td"), link = el("a", a.name);
    link.href = "/apps/" + encodeURIComponent(a.namespace) + "/" + encodeURIComponent(a.name);
    name.appendChild(link); tr.appendChild(name);
    var phase = el("td"); phase.appendChild(el("span", a.phase, "badge " + a.phase.toLowerCase()));
    tr.appendChild(phase);
    tr.appendChild(el("td", a.availableReplicas + "/" + a.replicas));
    var rev = el("td"); rev.appendChild(el("code", short(a.revision))); tr.appendChild(rev);
    tr.appendChild(el("td", a.synced));
    var cell = el("td");
    if (!a.drift.length && !a.conflicts.length && !a.held) {
      cell.appendChild(el("span", "in sync", "ok"));
    } else {
      var ul = el("ul");
      if (a.held) ul.appendChild(el("li", "held: " + a.held, "held"));
      a.drift.forEach(function (d) { ul.appendChild(el("li", driftText(d), "drift")); });
      a.conflicts.forEach(function (d) { ul.appendChild(el("li", driftText(d), "conflict")); });
      cell.appendChild(ul);
    }
    tr.appendChild(cell);
    if (a.replica !== undefined) tr.appendChild(el("td", a.replica || "none"));
    return tr;
  }
  function fill(id, rows) {
    var body = document.querySelector("#" + id + " tbody");
    while (body.firstChild) body.removeChild(body.firstChild);
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function blameRow(r) {
    var tr = el("tr", null, r.drifted ? r.origin.kind : "");
    tr.appendChild(el("td", r.object));
    var p = el("td"); p.appendChild(el("code", r.path)); tr.appendChild(p);
    var v = el("td"); v.appendChild(el("code", show(r.live))); tr.appendChild(v);
    tr.appendChild(el("td", r.describe));
    return tr;
  }
  function syncText(s) {
    if (!s) return "No Git source: the operator alone.";
    var t = (s.result || "not synced yet") + " · revision " + short(s.revision || "-");
    if (s.lastChange) t += " · last change: " + s.lastChange;
    if (s.lastError) t += " · error: " + s.lastError;
    if (s.pruneSkipped) t += " · prune skipped: " + s.pruneSkipped;
    if (s.pinned) t += " · " + s.pinned.split("\\n").join(" · ");
    return t;
  }
  function passRow(p) {
    var tr = el("tr", null, p.result === "Failed" ? "failed" : "");
    tr.appendChild(el("td", p.time));
    tr.appendChild(el("td", p.trigger));
    var rev = el("td"); rev.appendChild(el("code", short(p.revision))); tr.appendChild(rev);
    tr.appendChild(el("td", show(p.seconds)));
    tr.appendChild(el("td", p.created + " created, " + p.configured + " configured, " +
      p.pruned + " pruned"));
    tr.appendChild(el("td", p.result));
    tr.appendChild(el("td", show(p.drifted)));
    return tr;
  }
  function render(doc) {
    if (view === "app") {
      fill("app", [appRow(doc.app)]);
      fill("blame", doc.blame.map(blameRow));
    } else {
      fill("apps", doc.apps.map(appRow));
      fill("passes", doc.history.slice().reverse().map(passRow));
      document.getElementById("sync").textContent = syncText(doc.sync);
      document.getElementById("summary").textContent =
        doc.apps.length + " MyApps, " + doc.drifted + " drifted";
    }
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  }
  var url = "/api/v1/apps";
  if (view === "app") {
    url += "/" + encodeURIComponent(document.body.dataset.namespace) + "/" +
      encodeURIComponent(document.body.dataset.name);
  }
  // "no-cache": the browser asks with the ETag it holds and the daemon answers 304,
  // no body, while nothing changed; the tables are rebuilt only when something did
  var seen = null;
  function poll() {
    fetch(url, {cache: "no-cache"}).then(function (r) {
      if (!r.ok) throw new Error(r.status);
      var tag = r.headers.get("ETag");
      if (tag && tag === seen) return null;
      seen = tag;
      return r.json();
    }).then(function (doc) {
      if (doc) render(doc);
      else document.getElementById("updated").textContent =
        "updated " + new Date().toLocaleTimeString();
    }).catch(function () {
      document.getElementById("updated").textContent = "not updated: the daemon did not answer";
    }).finally(function () { setTimeout(poll, 1000); });
  }
  setTimeout(poll, 1000);
})();
"""
