"""The MyApp API (``apps.example.com/v1``) and the names gitsync puts on objects."""

from __future__ import annotations

from typing import Any, Final, Literal

#: a Kubernetes object as decoded from JSON: plain dicts on every hot path
Obj = dict[str, Any]

GROUP: Final = "apps.example.com"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "MyApp"
PLURAL: Final = "myapps"

FIELD_MANAGER: Final = "gitsync"

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "gitsync"
#: the prefix of every label and annotation gitsync sets or reads as a control: never
#: accepted from Git (see :mod:`gitsync.model.schema`)
CONTROL_PREFIX: Final = "gitsync.apps.example.com/"
#: names the source instance (repo URL + path, hashed); prune only touches its own
SOURCE_LABEL: Final = "gitsync.apps.example.com/source"
#: on a rendered Deployment: its MyApp's bucket, so each replica of a sharded instance
#: watches only the Deployments of the buckets it serves
BUCKET_LABEL: Final = "gitsync.apps.example.com/bucket"
#: "true" on a MyApp made by hand: its owner hands it to the instance whose Git declares it
ADOPT_ANNOTATION: Final = "gitsync.apps.example.com/adopt"
#: a hash of the desired state last applied (tells desired moving from live moving)
APPLIED_ANNOTATION: Final = "gitsync.apps.example.com/applied"
#: the file in the repository a Git-managed MyApp came from
SOURCE_PATH_ANNOTATION: Final = "gitsync.apps.example.com/source-path"
#: on the status ConfigMap: the full sha of one signed commit to apply although it does
#: not descend from the last applied one (once: a commit it let through is not again)
ACCEPT_ANNOTATION: Final = "gitsync.apps.example.com/accept-non-fast-forward"

#: kubectl's copy of what it last applied client-side: its bookkeeping, never drift
LAST_APPLIED_ANNOTATION: Final = "kubectl.kubernetes.io/last-applied-configuration"

DriftPolicy = Literal["correct", "report"]
DRIFT_POLICIES: Final = ("correct", "report")

#: managers that are one-off tools: gitsync takes fields back from them with force
DEFAULT_FORCE_MANAGERS: Final = ("kubectl", "before-first-apply")


def key_of(obj: Obj) -> str:
    """``namespace/name`` of an object, the work-queue key."""
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def subject(kind: str, namespace: str, name: str) -> str:
    """How errors, logs and reports name an object: ``MyApp/ns/name``."""
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"
