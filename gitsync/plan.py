"""The diff engine behind ``gitsync diff``: desired (Git) against live, as a change set.

Reads only (one LIST of MyApps and one of Deployments); never writes, not even
a dry-run. Per object the fast path compares the projection of live with
canonical desired using ``==``; only objects that differ go through deepdiff
to say which fields changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gitsync import diff as difflib
from gitsync import drift as driftlib
from gitsync.api import KIND, Obj, subject
from gitsync.render import render

Action = Literal["created", "configured", "unchanged", "pruned"]


@dataclass(frozen=True)
class ObjectChange:
    subject: str
    action: Action
    live: Obj | None
    desired: Obj | None
    changes: tuple[difflib.Change, ...] = ()

    def to_json(self) -> Obj:
        return {
            "object": self.subject,
            "action": self.action,
            "changes": [{"path": c.path, "live": c.old, "git": c.new} for c in self.changes],
        }


@dataclass
class ChangeSet:
    objects: list[ObjectChange] = field(default_factory=list)

    def count(self, action: Action) -> int:
        return sum(1 for o in self.objects if o.action == action)

    @property
    def differs(self) -> bool:
        return any(o.action != "unchanged" for o in self.objects)

    def summary(self) -> str:
        return ", ".join(
            f"{self.count(a)} {a}" for a in ("created", "configured", "unchanged", "pruned")
        )


def compare(label: str, desired: Obj, live: Obj | None) -> ObjectChange:
    if live is None:
        return ObjectChange(label, "created", None, desired, tuple(difflib.changes(None, desired)))
    if driftlib.fast_equal(desired, live):
        return ObjectChange(label, "unchanged", live, desired)
    changes = tuple(difflib.changes(live, desired))
    if not changes:
        return ObjectChange(label, "unchanged", live, desired)
    projected = driftlib.project(live, desired)
    return ObjectChange(label, "configured", projected, desired, changes)


def plan(
    desired: dict[str, Obj],
    myapps: dict[str, Obj],
    deployments: dict[str, Obj],
    prune: tuple[str, ...] = (),
) -> ChangeSet:
    """``desired``: MyApp apply bodies by key; ``myapps``/``deployments``: live, by key."""
    out = ChangeSet()
    for key in sorted(desired):
        ns, name = key.split("/", 1)
        body = desired[key]
        live_app = myapps.get(key)
        out.objects.append(compare(subject(KIND, ns, name), body, live_app))
        # the Deployment as the operator would render it from the MyApp-to-be
        future = {**body, "metadata": {**body["metadata"]}}
        if live_app is not None:
            future["metadata"]["uid"] = live_app["metadata"].get("uid")
        else:
            future["metadata"]["uid"] = "<to be assigned>"
        dep = render(future)
        live_dep = deployments.get(key)
        out.objects.append(compare(subject("Deployment", ns, name), dep, live_dep))
    for key in prune:
        ns, name = key.split("/", 1)
        out.objects.append(ObjectChange(subject(KIND, ns, name), "pruned", myapps.get(key), None))
    return out
