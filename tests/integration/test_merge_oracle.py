"""The planner's preview of an apply against the oracle: the API server's own merge.

``gitsync diff`` shows what a sync will write by computing, in Python, what the server
will hold once the step's body is applied (:func:`gitsync.engine.planner.after`, with
:func:`~gitsync.engine.planner.released` for what the apply removes). This property
holds that copy of server-side apply to the real thing, on random histories:

- **live**: a Deployment or a MyApp written by several managers in turn: created by
  gitsync's own apply, by ``kubectl create`` (an Update) or by another controller's
  apply; then gitsync applying other versions of its body (so that the desired body
  drops fields gitsync set before), ``kubectl``-style edits (a PUT of the whole object
  under ``kubectl-edit``, or under ``helm``, a controller gitsync never forces) that
  add, remove, change and reorder keyed items (containers by name, ports by
  containerPort+protocol, env by name), another controller's forced or plain apply of
  part of the object, and an HPA's Update of ``/scale``; or no live object at all;
- **desired**: a random apply body of the same object; the step is
  :func:`~gitsync.engine.planner.decide`'s under a random drift policy, so the body,
  and whether it is sent with ``force``, are exactly what a sync would send.

The step's body goes through a real SSA dry-run (``dryRun=All``, manager ``gitsync``,
``force`` as decided) against that live object. Then, field for field:

1. ``after(step)`` equals the dry-run result, list order included (a rendered
   Deployment follows the MyApp's env order, so order is part of the preview), except:
   ``metadata.managedFields, resourceVersion, generation, creationTimestamp`` and
   ``status`` (server bookkeeping, not the merge); the deployment controller's
   ``deployment.kubernetes.io/revision`` annotation (written on its own schedule, it may
   land between our read and the dry-run); ``uid``, where ``after`` of a new object has
   the placeholder :data:`UID_TO_BE_ASSIGNED` and the server must have assigned one
   (the placeholder is what gives a new MyApp's Deployment its ownerReference); and a
   server default at one of :data:`DEFAULTS` where ``after`` holds no value (defaulting
   is the server's, and nothing rendered depends on it). A default where ``after``
   does hold a value is compared like any other field.
2. ``step.released`` is exactly the outermost paths live holds and the result does not
   (what the apply removed), where a released field the server defaults again counts
   as removed when the result holds the default (a default put back cannot be told
   from a value kept).

The API calls are the cost (a few per example): the short profile (``make test``) runs
:data:`SHORT` examples, derandomized so each run is the same; ``GITSYNC_FUZZ=long`` runs
:data:`LONG`, random; ``GITSYNC_FUZZ_EXAMPLES`` overrides either. A failure prints the
falsifying example, shrunk, and ``@reproduce_failure`` to run it again.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from gitsync.engine.fieldrules import ROOT, Rule
from gitsync.engine.managedfields import Path, item_key, key_element
from gitsync.engine.planner import UID_TO_BE_ASSIGNED, Policy, after, decide, stamped, value_at
from gitsync.errors import APIConflictError, APIInvalidError, APINotFoundError
from gitsync.kube.client import Kube, path_of
from gitsync.model.api import DEFAULT_FORCE_MANAGERS, Obj

SHORT: Final = 40
LONG: Final = 600
_PROFILE = os.environ.get("GITSYNC_FUZZ", "short")
_EXAMPLES = int(os.environ.get("GITSYNC_FUZZ_EXAMPLES", LONG if _PROFILE == "long" else SHORT))

#: the server's defaults ``after`` does not predict, by path ("*": any item of a keyed
#: list), with the default value (ANY: depends on other fields, e.g. imagePullPolicy
#: on the image's tag, or is a whole defaulted struct)
ANY: Final[Any] = object()
_POD = ("spec", "template", "spec")
_CONTAINER = (*_POD, "containers", "*")
DEFAULTS: Final[dict[str, dict[tuple[str, ...], Any]]] = {
    "Deployment": {
        ("spec", "replicas"): 1,
        ("spec", "strategy"): ANY,
        ("spec", "revisionHistoryLimit"): 10,
        ("spec", "progressDeadlineSeconds"): 600,
        ("spec", "template", "metadata", "creationTimestamp"): None,
        (*_POD, "restartPolicy"): "Always",
        (*_POD, "dnsPolicy"): "ClusterFirst",
        (*_POD, "schedulerName"): "default-scheduler",
        (*_POD, "securityContext"): {},
        (*_POD, "terminationGracePeriodSeconds"): 30,
        (*_CONTAINER, "terminationMessagePath"): "/dev/termination-log",
        (*_CONTAINER, "terminationMessagePolicy"): "File",
        (*_CONTAINER, "imagePullPolicy"): ANY,
        (*_CONTAINER, "resources"): {},
        (*_CONTAINER, "ports", "*", "protocol"): "TCP",
    },
    # the CRD's schema default
    "MyApp": {("spec", "replicas"): 1},
}
#: server bookkeeping, never part of a merge
_SERVER_META: Final = ("managedFields", "resourceVersion", "generation", "creationTimestamp")
_REVISION: Final = "deployment.kubernetes.io/revision"

# --- what is generated -----------------------------------------------------------

CONTAINERS: Final = ("app", "side", "log")
IMAGES: Final = ("nginx:1.27", "nginx:1.28", "busybox:1.36")
PORTS: Final = ((80, "TCP"), (80, "UDP"), (8080, "TCP"), (9090, "TCP"))
ENV_NAMES: Final = ("A", "B", "C", "D", "E")
VALUES: Final = ("1", "2")
LABELS: Final = ("team", "tier", "env")
#: quantities as the API server stores them (a Deployment's are canonicalised by the
#: server, which ``after`` does not do: render gives canonical ones already); every
#: request below every limit, so that any mix of them is valid
QUANTITIES: Final = {
    "requests": {"cpu": ("100m", "200m"), "memory": ("64Mi", "96Mi")},
    "limits": {"cpu": ("300m", "500m"), "memory": ("128Mi", "256Mi")},
}

names = st.lists(st.sampled_from(ENV_NAMES), unique=True, max_size=4)
env_lists = names.flatmap(
    lambda ns: st.tuples(*[st.sampled_from(VALUES) for _ in ns]).map(
        lambda vs: [{"name": n, "value": v} for n, v in zip(ns, vs, strict=True)]
    )
)
label_maps = st.dictionaries(st.sampled_from(LABELS), st.sampled_from(VALUES), max_size=2)
resource_maps = st.dictionaries(
    st.sampled_from(("requests", "limits")),
    st.dictionaries(st.sampled_from(("cpu", "memory")), st.integers(0, 1), min_size=1),
    max_size=2,
).map(lambda r: {k: {q: QUANTITIES[k][q][i] for q, i in m.items()} for k, m in r.items()})


@st.composite
def containers(draw: st.DrawFn, *, partial: bool = False) -> list[Obj]:
    """Containers in a random order, each with keyed ports and env; ``partial``: only
    some fields, as another controller applies its share."""
    chosen = draw(st.lists(st.sampled_from(CONTAINERS), unique=True, min_size=1, max_size=3))
    out = []
    for name in chosen:
        c: Obj = {"name": name}
        if not partial or draw(st.booleans()):
            c["image"] = draw(st.sampled_from(IMAGES))
        ports = draw(st.lists(st.sampled_from(PORTS), unique=True, max_size=3))
        if ports:
            c["ports"] = [{"containerPort": p, "protocol": proto} for p, proto in ports]
        env = draw(env_lists)
        if env:
            c["env"] = env
        resources = draw(resource_maps) if not partial else {}
        if resources:
            c["resources"] = resources
        out.append(c)
    return out


def _meta(name: str, ns: str, labels: dict[str, str], annotations: dict[str, str]) -> Obj:
    meta: Obj = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return meta


@st.composite
def deployment_body(draw: st.DrawFn, name: str, ns: str, *, partial: bool = False) -> Obj:
    """A Deployment apply body: gitsync's shape, with more containers, ports and env
    than a render gives, for the merge to work on."""
    spec: Obj = {}
    if not partial or draw(st.booleans()):
        spec["replicas"] = draw(st.integers(0, 3))
    if not partial:
        spec["selector"] = {"matchLabels": {"app": name}}
    pod_labels = {"app": name} if not partial else {}
    spec["template"] = {
        "metadata": {"labels": {**pod_labels, **draw(label_maps)}},
        "spec": {"containers": draw(containers(partial=partial))},
    }
    if not spec["template"]["metadata"]["labels"]:
        del spec["template"]["metadata"]
    meta = _meta(name, ns, draw(label_maps), draw(label_maps))
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}


@st.composite
def myapp_body(draw: st.DrawFn, name: str, ns: str, *, partial: bool = False) -> Obj:
    spec: Obj = {}
    if not partial or draw(st.booleans()):
        spec["image"] = draw(st.sampled_from(IMAGES))
    if draw(st.booleans()):
        spec["replicas"] = draw(st.integers(0, 3))
    if draw(st.booleans()):
        spec["port"] = draw(st.sampled_from((80, 8080)))
    env = draw(env_lists)
    if env:
        spec["env"] = env
    resources = draw(resource_maps) if not partial else {}
    if resources:
        spec["resources"] = resources
    if not partial and draw(st.booleans()):
        spec["driftPolicy"] = draw(st.sampled_from(("correct", "report")))
    meta = _meta(name, ns, draw(label_maps), draw(label_maps))
    return {"apiVersion": "apps.example.com/v1", "kind": "MyApp", "metadata": meta, "spec": spec}


#: an edit of a kubectl-style Update, applied to the live object at run time:
#: (what, container, key, value); one that does not apply there is skipped
edits = st.one_of(
    st.tuples(
        st.just("env-add"),
        st.sampled_from(CONTAINERS),
        st.sampled_from(ENV_NAMES),
        st.integers(0, 4),
    ),
    st.tuples(
        st.just("env-remove"), st.sampled_from(CONTAINERS), st.sampled_from(ENV_NAMES), st.none()
    ),
    st.tuples(
        st.just("env-set"),
        st.sampled_from(CONTAINERS),
        st.sampled_from(ENV_NAMES),
        st.sampled_from(VALUES),
    ),
    st.tuples(
        st.just("port-add"), st.sampled_from(CONTAINERS), st.sampled_from(PORTS), st.integers(0, 3)
    ),
    st.tuples(
        st.just("port-remove"), st.sampled_from(CONTAINERS), st.sampled_from(PORTS), st.none()
    ),
    st.tuples(st.just("image"), st.sampled_from(CONTAINERS), st.none(), st.sampled_from(IMAGES)),
    st.tuples(st.just("replicas"), st.none(), st.none(), st.integers(0, 3)),
    st.tuples(
        st.just("label"), st.none(), st.sampled_from(LABELS), st.sampled_from((*VALUES, None))
    ),
    st.tuples(st.just("container-remove"), st.sampled_from(CONTAINERS), st.none(), st.none()),
    st.tuples(st.just("reverse-env"), st.sampled_from(CONTAINERS), st.none(), st.none()),
)


@dataclass(frozen=True)
class Write:
    """One write of the history: ``how`` is ``apply`` (SSA), ``update`` (a PUT of the
    whole object with ``edits``) or ``scale`` (an Update of ``/scale``)."""

    how: str
    manager: str
    body: Obj | None = None
    force: bool = False
    edits: tuple[tuple[Any, ...], ...] = ()
    replicas: int = 0


@dataclass(frozen=True)
class Case:
    kind: str
    #: the first write creates the object; none: it does not exist
    history: tuple[Write, ...]
    desired: Obj
    correct: bool


_SERIAL = itertools.count()


@st.composite
def cases(draw: st.DrawFn, ns: str) -> Case:
    kind = draw(st.sampled_from(("Deployment", "MyApp")))
    # one object per example in the test's namespace: a fresh name each time, so no
    # example sees another's managedFields
    name = f"o{next(_SERIAL)}"
    body = deployment_body if kind == "Deployment" else myapp_body

    def gitsync_apply() -> Write:
        return Write("apply", "gitsync", stamped(draw(body(name, ns))), force=True)

    history: list[Write] = []
    first = draw(st.sampled_from(("gitsync", "gitsync", "gitsync", "kubectl", "other", "none")))
    if first == "gitsync":
        history.append(gitsync_apply())
    elif first == "kubectl":
        history.append(Write("create", "kubectl-create", draw(body(name, ns))))
    elif first == "other":
        history.append(Write("apply", "other-operator", draw(body(name, ns)), force=True))
    if history:
        for _ in range(draw(st.integers(0, 4))):
            how = draw(st.sampled_from(("gitsync", "update", "apply", "scale")))
            if how == "gitsync":
                history.append(gitsync_apply())
            elif how == "update":
                manager = draw(st.sampled_from(("kubectl-edit", "kubectl-patch", "helm")))
                changes = tuple(draw(st.lists(edits, min_size=1, max_size=4)))
                history.append(Write("update", manager, edits=changes))
            elif how == "apply":
                part = draw(body(name, ns, partial=True))
                history.append(Write("apply", "other-operator", part, force=draw(st.booleans())))
            elif kind == "Deployment":
                history.append(
                    Write("scale", "kube-controller-manager", replicas=draw(st.integers(0, 3)))
                )
    return Case(kind, tuple(history), draw(body(name, ns)), draw(st.booleans()))


# --- the live object, written by its managers -----------------------------------


def _container(obj: Obj, kind: str, name: str) -> Obj | None:
    """The container an edit works on: a MyApp's spec stands for its one container."""
    if kind == "MyApp":
        spec: Obj = obj.setdefault("spec", {})
        return spec
    items: list[Obj] = obj["spec"]["template"]["spec"]["containers"]
    return next((c for c in items if c["name"] == name), None)


def edit(obj: Obj, kind: str, change: tuple[Any, ...]) -> None:
    """One edit, in place, as a person in ``kubectl edit`` would make it."""
    what, cname, key, value = change
    c = _container(obj, kind, cname) if cname is not None else None
    if what == "env-add" and c is not None:
        env = c.setdefault("env", [])
        if all(e["name"] != key for e in env):
            env.insert(min(value, len(env)), {"name": key, "value": "x"})
    elif what == "env-remove" and c is not None:
        c["env"] = [e for e in c.get("env", []) if e["name"] != key]
        if not c["env"]:
            del c["env"]
    elif what == "env-set" and c is not None:
        for e in c.get("env", []):
            if e["name"] == key:
                e["value"] = value
    elif what == "reverse-env" and c is not None and c.get("env"):
        c["env"].reverse()
    elif what == "port-add" and c is not None:
        if kind == "MyApp":
            c["port"] = key[0]
        else:
            ports = c.setdefault("ports", [])
            if all((p["containerPort"], p.get("protocol", "TCP")) != key for p in ports):
                ports.insert(min(value, len(ports)), {"containerPort": key[0], "protocol": key[1]})
    elif what == "port-remove" and c is not None:
        if kind == "MyApp":
            c.pop("port", None)
        else:
            c["ports"] = [
                p for p in c.get("ports", []) if (p["containerPort"], p["protocol"]) != key
            ]
            if not c["ports"]:
                del c["ports"]
    elif what == "image" and c is not None:
        c["image"] = value
    elif what == "replicas":
        obj["spec"]["replicas"] = value
    elif what == "label":
        labels = obj["metadata"].setdefault("labels", {})
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    elif what == "container-remove" and kind == "Deployment":
        pod = obj["spec"]["template"]["spec"]
        if len(pod["containers"]) > 1:  # a pod needs one
            pod["containers"] = [x for x in pod["containers"] if x["name"] != cname]


def write(kube: Kube, kind: str, ns: str, name: str, w: Write) -> str:
    """Carry out one write of the history; what happened, for the example's notes."""
    path = path_of(kind, ns, name)
    try:
        if w.how == "apply":
            assert w.body is not None
            kube.apply(path, w.body, field_manager=w.manager, force=w.force)
        elif w.how == "create":
            assert w.body is not None
            kube.request("POST", path_of(kind, ns), body=w.body, params={"fieldManager": w.manager})
        elif w.how == "update":
            live = kube.get(path)
            for change in w.edits:
                edit(live, kind, change)
            kube.request("PUT", path, body=live, params={"fieldManager": w.manager})
        else:
            body = {"spec": {"replicas": w.replicas}}
            kube.request(
                "PATCH",
                f"{path}/scale",
                body=body,
                content_type="application/merge-patch+json",
                params={"fieldManager": w.manager},
            )
    except APIConflictError:
        return f"{w.how} by {w.manager}: refused, a conflict (not forced)"
    except APIInvalidError as e:
        # a generated write the server finds invalid (a partial container with no
        # image, say) is one the history simply does not have
        return f"{w.how} by {w.manager}: refused as invalid: {e}"
    return f"{w.how} by {w.manager}"


# --- what is compared -------------------------------------------------------------


def _matches(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    return len(pattern) == len(path) and all(
        p in ("*", q) for p, q in zip(pattern, path, strict=True)
    )


def without_bookkeeping(obj: Obj) -> Obj:
    """The object minus what no merge decides (see the module's docstring)."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata", {})
    for key in (*_SERVER_META, "uid"):
        meta.pop(key, None)
    annotations = meta.get("annotations") or {}
    annotations.pop(_REVISION, None)
    if "annotations" in meta and not annotations:
        del meta["annotations"]
    return out


def without_defaults(
    server: Any,
    predicted: Any,
    defaults: dict[tuple[str, ...], Any],
    at: tuple[str, ...] = (),
    rule: Rule = ROOT,
) -> Any:
    """``server`` minus each default at one of ``defaults`` where ``predicted`` holds no
    value (walked side by side, with the field rules of each position; keyed list items
    paired by key)."""
    if isinstance(server, dict):
        pred = predicted if isinstance(predicted, dict) else {}
        out = {}
        for key, value in server.items():
            here = (*at, key)
            default = next((d for p, d in defaults.items() if _matches(p, here)), _NO_DEFAULT)
            if (
                key not in pred
                and default is not _NO_DEFAULT
                and (default is ANY or default == value)
            ):
                continue
            out[key] = without_defaults(value, pred.get(key), defaults, here, rule.child(key))
        return out
    if isinstance(server, list) and rule.keys:
        pred_items = predicted if isinstance(predicted, list) else []
        by_key = {json.dumps(item_key(rule, p)): p for p in pred_items if isinstance(p, dict)}
        return [
            # an item is at its list's own position: the list's rule holds for its fields
            without_defaults(
                item, by_key.get(json.dumps(item_key(rule, item))), defaults, (*at, "*"), rule
            )
            for item in server
        ]
    return server


_NO_DEFAULT: Final[Any] = object()


def present(obj: Any, at: Path = (), rule: Rule = ROOT) -> Iterator[Path]:
    """Every SMD path ``obj`` holds a value at: fields, keyed items and their fields."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            here, below = (*at, f"f:{key}"), rule.child(key)
            yield here
            if isinstance(value, list) and below.keys:
                for item in value:
                    k = item_key(below, item)
                    if k is not None:
                        yield (*here, key_element(k))
                        yield from present(item, (*here, key_element(k)), below)
            else:
                yield from present(value, here, below)


def outermost(paths: set[Path]) -> set[Path]:
    return {p for p in paths if not any(p[:n] in paths for n in range(1, len(p)))}


def removed_by_server(
    live: Obj, result: Obj, released: tuple[Path, ...], defaults: dict[tuple[str, ...], Any]
) -> set[Path]:
    """The outermost paths live held and the apply removed, as the result shows. A
    released field the server defaults again counts as removed when the result holds
    its default value."""
    before, now = without_bookkeeping(live), without_bookkeeping(result)
    gone = set(present(before)) - set(present(now))
    for path in released:
        plain = tuple("*" if e.startswith("k:") else e[2:] for e in path)
        default = next((d for p, d in defaults.items() if _matches(p, plain)), _NO_DEFAULT)
        if default is not _NO_DEFAULT and (default is ANY or value_at(now, path) == default):
            gone.add(path)
    return outermost(gone)


def differ(want: Any, got: Any, at: str = "") -> Iterator[str]:
    """Where two objects differ, one line per place: the failure's message."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            yield from differ(want.get(key, "<absent>"), got.get(key, "<absent>"), f"{at}.{key}")
    elif isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            yield from differ(w, g, f"{at}[{i}]")
    elif want != got:
        yield f"{at}: after {json.dumps(want)}, server {json.dumps(got)}"


# --- the property -------------------------------------------------------------------


def dry_run(kube: Kube, kind: str, ns: str, name: str, body: Obj, force: bool) -> Obj:
    return kube.apply(
        path_of(kind, ns, name), body, field_manager="gitsync", force=force, dry_run=True
    )


@settings(
    max_examples=_EXAMPLES,
    derandomize=_PROFILE != "long",
    deadline=None,
    database=None,
    print_blob=True,
    # one namespace for all examples (each has its own object in it), on purpose
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_the_preview_of_an_apply_is_the_servers_merge(
    data: st.DataObject, kube: Kube, crd: str, namespace: str
) -> None:
    case = data.draw(cases(namespace))
    name = case.desired["metadata"]["name"]
    for w in case.history:
        note(write(kube, case.kind, namespace, name, w))
    path = path_of(case.kind, namespace, name)
    try:
        live = kube.get(path)
    except APINotFoundError:
        live = None  # no history, or every write of it refused
    note(f"live: {json.dumps(live, sort_keys=True)}")
    p = Policy(
        correct=case.correct,
        suspended=False,
        force_managers=DEFAULT_FORCE_MANAGERS,
        field_manager="gitsync",
    )
    step = decide(f"{case.kind}/{name}", case.desired, live, p)
    event(f"{case.kind} {step.action}{' forced' if step.force else ''}")
    if step.body is None:
        assert after(step) is live  # nothing sent: nothing changes
        return
    note(f"body (force={step.force}): {json.dumps(step.body, sort_keys=True)}")
    try:
        result = dry_run(kube, case.kind, namespace, name, step.body, step.force)
    except APIConflictError as e:
        pytest.fail(f"the server refuses the body decide sends: {e}")
    except APIInvalidError:
        # the merge is right and its result invalid: the server removes our field of an
        # item another manager keeps (a container left without its image, a MyApp's
        # env left null). A sync fails there alike; nothing to compare a preview with
        event("the merged object is invalid: the server refuses the apply")
        return
    note(f"server: {json.dumps(result, sort_keys=True)}")
    predicted = after(step)
    note(f"after: {json.dumps(predicted, sort_keys=True)}")

    uid = (predicted.get("metadata") or {}).get("uid")
    if live is None:
        # a new object's uid is the server's to assign; the placeholder stands for it
        assert uid == UID_TO_BE_ASSIGNED and result["metadata"].get("uid")
    else:
        assert uid == result["metadata"]["uid"]
    defaults = DEFAULTS[case.kind]
    want = without_bookkeeping(predicted)
    got = without_defaults(without_bookkeeping(result), want, defaults)
    assert want == got, "\n".join(differ(want, got))
    if live is not None:
        removed = removed_by_server(live, result, step.released, defaults)
        assert set(step.released) == removed
        assert len(set(step.released)) == len(step.released)
