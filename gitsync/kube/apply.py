"""Server-side apply of MyApps, their Deployments and MyApp status.

Every write is SSA under one field manager; no read-modify-write, no
last-applied annotation. Callers decide *whether* to write (unchanged objects
are never sent); this module only knows *how*.
"""

from __future__ import annotations

from gitsync.kube.client import Kube, path_of
from gitsync.model.api import API_VERSION, FIELD_MANAGER, KIND, Obj, subject


def subject_of(obj: Obj) -> str:
    meta = obj.get("metadata", {})
    return subject(str(obj.get("kind")), meta.get("namespace", ""), meta.get("name", ""))


class Applier:
    def __init__(self, kube: Kube, field_manager: str = FIELD_MANAGER) -> None:
        self.kube = kube
        self.field_manager = field_manager

    def apply(self, obj: Obj, *, force: bool = False, dry_run: bool = False) -> Obj:
        """SSA ``obj``; with ``dry_run`` the API server computes the result and stores nothing."""
        meta = obj["metadata"]
        return self.kube.apply(
            path_of(obj["kind"], meta["namespace"], meta["name"]),
            obj,
            field_manager=self.field_manager,
            force=force,
            dry_run=dry_run,
            subject=subject_of(obj),
        )

    def apply_status(self, namespace: str, name: str, status: Obj) -> Obj:
        """SSA on the /status subresource: only the status fields we own."""
        body = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": name, "namespace": namespace},
            "status": status,
        }
        path = path_of(KIND, namespace, name, "status")
        written = self.kube.apply(
            path,
            body,
            field_manager=self.field_manager,
            # status is ours alone: nobody else has a say in what gitsync observed
            force=True,
            subject=subject(KIND, namespace, name),
        )
        # and so is what it leaves out: a field someone else wrote into it (a forged
        # rollback, say) would go on reporting what gitsync never said, and every
        # reconcile would find the status changed and write it again (SSA lets go only
        # of the fields gitsync owns)
        foreign = [k for k in (written.get("status") or {}) if k not in status]
        if not foreign:
            return written
        return self.kube.merge_patch(
            path,
            {"status": dict.fromkeys(foreign)},
            field_manager=self.field_manager,
            subject=subject(KIND, namespace, name),
        )

    def remove_annotation(self, kind: str, namespace: str, name: str, key: str) -> Obj:
        """Remove annotation ``key``, whoever set it (a merge patch: SSA can only let go
        of what gitsync itself owns)."""
        return self.kube.merge_patch(
            path_of(kind, namespace, name),
            {"metadata": {"annotations": {key: None}}},
            field_manager=self.field_manager,
            subject=subject(kind, namespace, name),
        )

    def delete(
        self, kind: str, namespace: str, name: str, uid: str, resource_version: str | None = None
    ) -> None:
        """Delete exactly the object we decided on: the uid precondition refuses a
        same-named object created since, the resourceVersion one (when given) an
        object changed since we looked (relabelled by another instance, say). Owned
        Deployments go through the garbage collector (background propagation),
        never by a separate delete."""
        preconditions = {"uid": uid}
        if resource_version:
            preconditions["resourceVersion"] = resource_version
        self.kube.delete(
            path_of(kind, namespace, name),
            subject=subject(kind, namespace, name),
            body={
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": preconditions,
                "propagationPolicy": "Background",
            },
        )
