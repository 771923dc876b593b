"""MyApp -> apply bodies: the Deployment a MyApp owns, and the MyApp as Git declares it.

Both are server-side-apply bodies: they hold only the fields gitsync owns, already in
the form the API server stores (canonical quantities, ``protocol: TCP``, no empty env
values), so that the projection of the live object equals them with plain ``==`` and
an unchanged object is never written.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from gitsync.model.api import API_VERSION, KIND, MANAGED_BY, MANAGED_BY_LABEL, Obj, subject
from gitsync.model.integers import as_integer
from gitsync.model.quantity import resource_quantity

NAME_LABEL: Final = "app.kubernetes.io/name"
INSTANCE_LABEL: Final = "app.kubernetes.io/instance"
CONTAINER_NAME: Final = "app"
DEFAULT_REPLICAS: Final = 1
#: spec fields the CRD types as integers (gitsync.model.integers says what stands for one)
_INT_SPEC_FIELDS: Final = ("replicas", "port")


def selector_labels(name: str) -> dict[str, str]:
    """The Deployment selector: derived from the name only, since selectors are immutable."""
    return {NAME_LABEL: name, INSTANCE_LABEL: name}


def render(myapp: Obj) -> Obj:
    """The Deployment for a live MyApp, as an SSA apply body.

    ``ownerReferences`` needs ``metadata.uid``; a MyApp not yet created (a preview)
    renders without it, and such a body must not be applied.
    """
    meta = myapp.get("metadata") or {}
    name = _name(meta)
    spec = myapp.get("spec") or {}
    who = subject(KIND, meta.get("namespace", ""), name)
    metadata: Obj = {
        "name": name,
        "labels": {**selector_labels(name), MANAGED_BY_LABEL: MANAGED_BY},
    }
    if meta.get("namespace"):
        metadata["namespace"] = meta["namespace"]
    if meta.get("uid"):
        metadata["ownerReferences"] = [_owner_reference(name, meta["uid"])]
    replicas = spec.get("replicas")
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": DEFAULT_REPLICAS if replicas is None else _int(replicas, who, "replicas"),
            "selector": {"matchLabels": selector_labels(name)},
            "template": {
                "metadata": {"labels": selector_labels(name)},
                "spec": {"containers": [_container(spec, who)]},
            },
        },
    }


def desired_myapp(myapp_from_git: Obj) -> Obj:
    """The apply body of a MyApp from Git: identity, labels, annotations and spec.

    Integer fields written as strings become ints (the CRD types them so). Quantities
    stay as written: a CRD stores its values verbatim, it does not canonicalise. An
    empty mapping or list in the spec (``requests: {}``, ``env: []``) is left out, as
    :func:`without_empty` says why.
    """
    meta = myapp_from_git.get("metadata") or {}
    metadata: Obj = {"name": _name(meta)}
    for key in ("namespace", "labels", "annotations"):
        if meta.get(key):
            metadata[key] = copy.deepcopy(meta[key])
    body: Obj = {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata}
    spec = myapp_from_git.get("spec")
    if isinstance(spec, dict):
        body["spec"] = without_empty(_int_fields(copy.deepcopy(spec)))
    return body


def without_empty(spec: Obj) -> Obj:
    """``spec`` without empty mappings and lists, at any depth (a mapping emptied so
    goes too).

    An empty one sets nothing that its absence does not (:func:`render` reads both
    alike), yet sent in an apply it makes the change unappliable: when Git empties
    ``requests`` that held our ``memory``, server-side apply removes our key and keeps
    the map it still owns as null, which the CRD's schema refuses (422 ``must be of
    type object: null``) on every pass. Left out, the map is ours alone and removed
    with its keys."""
    out: Obj = {}
    for key, value in spec.items():
        if isinstance(value, dict):
            value = without_empty(value)
        if isinstance(value, dict | list) and not value:
            continue
        out[key] = value
    return out


def _name(meta: Obj) -> str:
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{KIND} without metadata.name")
    return name


def _owner_reference(name: str, uid: str) -> Obj:
    # controller + blockOwnerDeletion: the garbage collector removes the Deployment
    # with its MyApp, and foreground deletion waits for it
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _container(spec: Obj, who: str) -> Obj:
    image = spec.get("image")
    if not isinstance(image, str) or not image:
        raise ValueError(f"{who}: spec.image is required")
    container: Obj = {"name": CONTAINER_NAME, "image": image}
    if spec.get("port") is not None:
        port = _int(spec["port"], who, "port")
        # the server defaults protocol; setting it keeps desired == stored
        container["ports"] = [{"containerPort": port, "protocol": "TCP"}]
    env = [_env_var(item, who) for item in spec.get("env") or []]
    if env:
        container["env"] = env
    resources = _resources(spec.get("resources") or {}, who)
    if resources:
        container["resources"] = resources
    return container


def _env_var(item: Any, who: str) -> Obj:
    if not isinstance(item, dict) or not item.get("name"):
        raise ValueError(f"{who}: spec.env items need a name")
    var: Obj = {"name": item["name"]}
    value = item.get("value")
    # EnvVar.value is omitempty: the server stores "" as no value at all
    if value is not None and value != "":
        var["value"] = value
    return var


def _resources(resources: Obj, who: str) -> Obj:
    out: Obj = {}
    for part in ("limits", "requests"):
        quantities = resources.get(part) or {}
        if not quantities:
            continue
        try:
            out[part] = {k: resource_quantity(v) for k, v in quantities.items()}
        except ValueError as e:
            raise ValueError(f"{who}: spec.resources.{part}: {e}") from e
    return out


def _int(value: Any, who: str, field: str) -> int:
    converted = as_integer(value)
    if converted is None:
        raise ValueError(f"{who}: spec.{field} must be an integer, got {value!r}")
    return converted


def _int_fields(spec: Obj) -> Obj:
    for field in _INT_SPEC_FIELDS:
        if field in spec:
            converted = as_integer(spec[field])
            # anything else is left for validation to refuse
            spec[field] = spec[field] if converted is None else converted
    return spec
