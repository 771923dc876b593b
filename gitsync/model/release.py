"""Letting go of the Deployments gitsync rendered, so that removing gitsync (or its CRD, or
the MyApps) leaves the applications serving (``gitsync uninstall``).

A Deployment is owned by its MyApp through a controller ``ownerReference``; deleting the
MyApp (as deleting the CRD does, for every MyApp) makes the garbage collector delete
the Deployment and its Pods. Released, it has no MyApp among its owners: the garbage
collector leaves it alone. The release changes ``metadata.ownerReferences`` alone:
not the Pod template, so no rollout follows, and not even the Deployment's
``generation`` (which an annotation would move: a Deployment counts its annotations as
part of its desired state).

It keeps every label gitsync gave it, so a gitsync installed again finds it in its cache
and adopts it: the missing ownerReference is drift, corrected by the next apply, again
without a rollout.

Pure: :mod:`gitsync.cli.uninstall` reads and writes.
"""

from __future__ import annotations

from gitsync.model.api import GROUP, KIND, Obj


def myapp_owned(ref: Obj) -> bool:
    """Whether an ownerReference names a MyApp (of any version of the API group)."""
    api_version = str(ref.get("apiVersion", ""))
    return ref.get("kind") == KIND and api_version.split("/", 1)[0] == GROUP


def release_patch(deployment: Obj) -> Obj | None:
    """The JSON merge patch that releases ``deployment`` from its MyApp, or None when no
    MyApp owns it. Its other owners stay; the resourceVersion makes the patch fail
    (409) rather than drop an owner added since it was read."""
    meta = deployment.get("metadata", {})
    refs = meta.get("ownerReferences") or []
    kept = [r for r in refs if not myapp_owned(r)]
    if len(kept) == len(refs):
        return None
    return {
        "metadata": {
            "resourceVersion": meta.get("resourceVersion"),
            # a merge patch replaces a list whole; null removes the key
            "ownerReferences": kept or None,
        }
    }


def label_selector(selector: Obj) -> str | None:
    """A LabelSelector (``matchLabels`` and ``matchExpressions``) as the query string a
    LIST takes; None when it has an operator this does not know, or selects nothing
    (``{}`` selects every object, and no Deployment has it: the API server refuses it)."""
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if not key:
            return None
        if op == "In":
            terms.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            terms.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            terms.append(key)
        elif op == "DoesNotExist":
            terms.append(f"!{key}")
        else:
            return None
    return ",".join(terms) or None
