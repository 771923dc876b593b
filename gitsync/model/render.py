"""MyApp -> apply bodies: the Deployment a MyApp owns, and the MyApp as Git declares it.

Both are server-side-apply bodies: they hold only the fields gitsync owns, already in
the form the API server stores (canonical quantities, ``protocol: TCP``, no empty env
values), so that the projection of the live object equals them with plain ``==`` and
an unchanged object is never written.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from gitsync.model.api import (
    API_VERSION,
    BUCKET_LABEL,
    KIND,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    Obj,
    subject,
)
from gitsync.model.crd_schema import OPENAPI_V3_SCHEMA
from gitsync.model.integers import as_integer
from gitsync.model.quantity import resource_quantity
from gitsync.model.shards import bucket_of

NAME_LABEL: Final = "app.kubernetes.io/name"
INSTANCE_LABEL: Final = "app.kubernetes.io/instance"
CONTAINER_NAME: Final = "app"
_SPEC_SCHEMA: Final = OPENAPI_V3_SCHEMA["properties"]["spec"]["properties"]
#: what the API server stores for a MyApp without replicas (the CRD defaults it)
DEFAULT_REPLICAS: Final[int] = _SPEC_SCHEMA["replicas"]["default"]
#: spec fields the CRD types as integers (gitsync.model.integers says what stands for one)
_INT_SPEC_FIELDS: Final = tuple(k for k, v in _SPEC_SCHEMA.items() if v.get("type") == "integer")


def selector_labels(name: str) -> dict[str, str]:
    """The Deployment selector: derived from the name only, since selectors are immutable.

    Its keys in the order the API server returns a map's (sorted), as every label map
    :func:`render` builds: a rendering the planner keeps a copy of (where nothing else
    holds what it was made from, :func:`gitsync.engine.planner.stamp_of`) then shares
    its label maps with the live Deployment's in the caches (:mod:`gitsync.model.compact`
    shares equal nodes only when their keys come in the same order)."""
    return {INSTANCE_LABEL: name, NAME_LABEL: name}


def inputs(myapp: Obj) -> tuple[object, ...]:
    """What :func:`render` reads of a MyApp: MyApps with equal inputs render equal
    Deployments. Parts of ``myapp`` itself, not copies: a cached MyApp's next version
    holds the same spec dict (:mod:`gitsync.model.compact`), so holding them costs
    nothing, and comparing the spec with its next version's is one identity check."""
    meta = myapp.get("metadata") or {}
    return (meta.get("name"), meta.get("namespace"), meta.get("uid"), myapp.get("spec"))


def render(myapp: Obj) -> Obj:
    """The Deployment for a live MyApp, as an SSA apply body.

    ``ownerReferences`` needs ``metadata.uid``; a MyApp not yet created (a preview)
    renders without it, and such a body must not be applied. It reads what
    :func:`inputs` names, and nothing else.
    """
    meta = myapp.get("metadata") or {}
    name = _name(meta)
    spec = myapp.get("spec") or {}
    who = subject(KIND, meta.get("namespace", ""), name)
    labels = {
        **selector_labels(name),
        MANAGED_BY_LABEL: MANAGED_BY,
        BUCKET_LABEL: str(bucket_of(meta.get("namespace", ""), name)),
    }
    metadata: Obj = {"name": name, "labels": dict(sorted(labels.items()))}
    if meta.get("namespace"):
        metadata["namespace"] = meta["namespace"]
    if meta.get("uid"):
        metadata["ownerReferences"] = [_owner_reference(name, meta["uid"])]
    deployment_spec: Obj = {}
    container: Obj = {"name": CONTAINER_NAME}
    for row in FROM_SPEC:
        value = row.build(spec.get(row.field), who)
        if value not in (None, [], {}):  # an unset field sets nothing
            (deployment_spec if row.into == "spec" else container)[row.key] = value
    deployment_spec["selector"] = {"matchLabels": selector_labels(name)}
    deployment_spec["template"] = {
        "metadata": {"labels": selector_labels(name)},
        "spec": {"containers": [container]},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": deployment_spec,
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


def _replicas(value: Any, who: str) -> int:
    return DEFAULT_REPLICAS if value is None else _int(value, who, "replicas")


def _deadline(value: Any, who: str) -> int | None:
    # unset: the Deployment keeps Kubernetes' default (600), owned by no one
    return None if value is None else _int(value, who, "progressDeadlineSeconds")


def _image(value: Any, who: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{who}: spec.image is required")
    return value


def _ports(value: Any, who: str) -> list[Obj] | None:
    if value is None:
        return None
    # the server defaults protocol; setting it keeps desired == stored
    return [{"containerPort": _int(value, who, "port"), "protocol": "TCP"}]


def _env(value: Any, who: str) -> list[Obj]:
    return [_env_var(item, who) for item in value or []]


def _env_var(item: Any, who: str) -> Obj:
    if not isinstance(item, dict) or not item.get("name"):
        raise ValueError(f"{who}: spec.env items need a name")
    var: Obj = {"name": item["name"]}
    value = item.get("value")
    # EnvVar.value is omitempty: the server stores "" as no value at all
    if value is not None and value != "":
        var["value"] = value
    return var


def _resources(value: Any, who: str) -> Obj:
    resources = value or {}
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


@dataclass(frozen=True)
class Rendered:
    """Where one MyApp spec field lands in the Deployment, and how."""

    #: the MyApp's spec field
    field: str
    #: the Deployment's spec, or its one container
    into: Literal["spec", "container"]
    #: the key the field sets there
    key: str
    #: (the MyApp's value or None, the MyApp's subject) -> the value; None or empty: unset
    build: Callable[[Any, str], Any]
    #: below ``key`` the value has the MyApp field's own shape (env items by name,
    #: resources by part and name), so a path below it maps one to one
    same_shape: bool = False


#: the MyApp -> Deployment mapping, stated once: render follows it, and blame
#: (gitsync.engine.blame.rendered_from) traces a Deployment field back through it
FROM_SPEC: Final = (
    Rendered("replicas", "spec", "replicas", _replicas),
    Rendered("progressDeadlineSeconds", "spec", "progressDeadlineSeconds", _deadline),
    Rendered("image", "container", "image", _image),
    Rendered("port", "container", "ports", _ports),
    Rendered("env", "container", "env", _env, same_shape=True),
    Rendered("resources", "container", "resources", _resources, same_shape=True),
)
