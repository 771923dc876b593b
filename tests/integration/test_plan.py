"""diff == sync, on the real control plane: for each scenario, the writes ``gitsync diff
-o json`` announces are exactly the writes the next ``gitsync sync`` makes, and diff
itself writes nothing (it runs as a user who may only read, so any write, a dry-run
too, would be refused).

What a sync wrote is read from the API server, object by object, not from gitsync's
report: an object created, a MyApp deleted, or gitsync's own Apply entry in
managedFields moved (the server stamps that entry with a new time only when an apply
of that manager changed the object). The server's request counters would say the
same, but they have no namespace label, so on a shared control plane another
client's requests would be counted too.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gitsync.engine.planner import UID_TO_BE_ASSIGNED, Step, after, released
from gitsync.kube.client import Kube, resource_path
from gitsync.model.api import Obj
from testenv.cluster import BROKEN_TAG
from tests.integration.test_cli import common, gitsync
from tests.integration.test_drift import kubectl
from tests.support import app_yaml

WRITES = ("created", "configured", "pruned")


@dataclass(frozen=True)
class Ctx:
    repo: Path
    ns: str
    kubeconfig: str
    kubectl_bin: str
    #: may only read MyApps and Deployments: a diff that wrote would be refused
    reader: str

    def write(self, name: str, **spec: Any) -> None:
        (self.repo / "apps" / f"{name}.yaml").write_text(app_yaml(self.ns, name, **spec))

    def remove(self, name: str) -> None:
        (self.repo / "apps" / f"{name}.yaml").unlink()

    def kubectl(self, *args: str) -> None:
        kubectl(self.kubectl_bin, self.kubeconfig, "-n", self.ns, *args)

    def sync(self) -> str:
        proc = gitsync(
            self.kubeconfig,
            "sync",
            *common(self.repo, self.ns),
            *("--status-namespace", self.ns, "--dependency-timeout", "3"),
        )
        # a change still waiting for a dependency (a stuck one) is a sync not done: 1
        lines = proc.stdout.splitlines()
        waiting = any(line.startswith("held ") and ": waiting for " in line for line in lines)
        assert proc.returncode == (1 if waiting else 0), proc.stdout + proc.stderr
        return proc.stdout

    def diff(self) -> tuple[int, Any]:
        proc = gitsync(self.reader, "diff", *common(self.repo, self.ns), "-o", "json")
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        return proc.returncode, json.loads(proc.stdout)


def scale_by_hpa(c: Ctx) -> None:
    # what an HorizontalPodAutoscaler does: an Update of the scale subresource by
    # kube-controller-manager, which then owns spec.replicas
    c.kubectl(
        "patch",
        "deployment/web",
        "--subresource=scale",
        "--type=merge",
        "-p",
        '{"spec":{"replicas":2}}',
        "--field-manager=kube-controller-manager",
    )


def put_env_first(c: Ctx) -> None:
    # a JSON patch by another manager (kubectl-patch): its item goes first in the list
    item = '[{"op":"add","path":"/spec/env/0","value":{"name":"B","value":"b"}}]'
    c.kubectl("patch", "myapp/web", "--type=json", "-p", item)


@dataclass(frozen=True)
class Scenario:
    #: Git states synced one after the other before the change under test
    setup: tuple[Callable[[Ctx], None], ...]
    change: Callable[[Ctx], None]
    #: (kind/name, action) of every write the next sync makes
    writes: frozenset[tuple[str, str]]
    #: (kind/name, action) of what diff shows as drifted, conflict, or held by suspend
    findings: frozenset[tuple[str, str]] = field(default_factory=frozenset)


def _web(**spec: Any) -> Callable[[Ctx], None]:
    return lambda c: c.write("web", **spec)


def _three(c: Ctx) -> None:
    # three, so that removing one stays under the prune guard (half or more is refused)
    for name in ("web", "api", "worker"):
        c.write(name)


def _seq(*steps: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
    def run(c: Ctx) -> None:
        for step in steps:
            step(c)

    return run


def _db(image: str = "nginx:1.27") -> Callable[[Ctx], None]:
    return lambda c: c.write("db", image=image)


def _rolled_out(name: str) -> Callable[[Ctx], None]:
    # a one-shot sync leaves the rollout to the deployment controller
    return lambda c: c.kubectl("rollout", "status", f"deployment/{name}", "--timeout=90s")


#: Pods of this image run and never become Ready (testenv/kwok/pod-never-ready.yaml)
STUCK = f"nginx:{BROKEN_TAG}"
ON_DB = "[{name: db}]"

SCENARIOS = {
    "nothing-changed": Scenario((_web(),), lambda c: None, frozenset()),
    "hpa-owns-replicas": Scenario(
        (_web(),),
        scale_by_hpa,
        frozenset(),
        frozenset({("Deployment/web", "conflict")}),
    ),
    "hpa-owns-replicas-and-image-bump": Scenario(
        (_web(),),
        _seq(scale_by_hpa, _web(image="nginx:1.28")),
        frozenset({("MyApp/web", "configured"), ("Deployment/web", "configured")}),
        frozenset({("Deployment/web", "conflict")}),
    ),
    "kubectl-scale-under-report": Scenario(
        (_web(driftPolicy="report"),),
        lambda c: c.kubectl("scale", "deployment/web", "--replicas=3"),
        frozenset(),
        frozenset({("Deployment/web", "drifted")}),
    ),
    "kubectl-scale-under-correct": Scenario(
        (_web(driftPolicy="correct"),),
        lambda c: c.kubectl("scale", "deployment/web", "--replicas=3"),
        frozenset({("Deployment/web", "configured")}),
    ),
    "myapp-edited-under-report": Scenario(
        # the MyApp keeps the edit; the Deployment follows the live MyApp
        (_web(driftPolicy="report"),),
        lambda c: c.kubectl("patch", "myapp/web", "--type=merge", "-p", '{"spec":{"replicas":2}}'),
        frozenset({("Deployment/web", "configured")}),
        frozenset({("MyApp/web", "drifted")}),
    ),
    "suspended-changed-in-git": Scenario(
        (_web(), _web(suspend="true")),
        _web(suspend="true", image="nginx:1.28"),
        frozenset({("MyApp/web", "configured")}),
        frozenset({("Deployment/web", "held")}),
    ),
    "image-bump": Scenario(
        (_web(),),
        _web(image="nginx:1.28"),
        frozenset({("MyApp/web", "configured"), ("Deployment/web", "configured")}),
    ),
    "field-removed-from-git": Scenario(
        # live still holds every value Git sets: only the stamp says Git moved
        (_web(port=8080),),
        _web(),
        frozenset({("MyApp/web", "configured"), ("Deployment/web", "configured")}),
    ),
    "requests-emptied-in-git": Scenario(
        # the server cannot apply requests: {} over the requests it held (a 422 on
        # every pass): gitsync leaves the empty map out, and the apply removes it
        (_web(resources="{requests: {memory: 512Mi}}"),),
        _web(resources="{requests: {}, limits: {memory: 1Gi}}"),
        frozenset({("MyApp/web", "configured"), ("Deployment/web", "configured")}),
    ),
    "resources-emptied-in-git": Scenario(
        (_web(resources="{requests: {memory: 512Mi}}"),),
        _web(resources="{}"),
        frozenset({("MyApp/web", "configured"), ("Deployment/web", "configured")}),
    ),
    "env-emptied-in-git": Scenario(
        # the server applies env: [] (and stores no env); left out all the same
        (_web(env="[{name: A, value: a}]"),),
        _web(env="[]"),
        frozenset({("MyApp/web", "configured"), ("Deployment/web", "configured")}),
    ),
    "foreign-env-item-first-then-policy-changed": Scenario(
        # another manager put its env item before gitsync's; the Deployment follows
        # that order, and a change of the policy alone leaves it as it is
        (_web(env="[{name: A, value: a}]"), put_env_first),
        _web(env="[{name: A, value: a}]", driftPolicy="report"),
        frozenset({("MyApp/web", "configured")}),
    ),
    "foreign-env-item-first-then-suspended": Scenario(
        (_web(env="[{name: A, value: a}]"), put_env_first),
        _web(env="[{name: A, value: a}]", suspend="true"),
        frozenset({("MyApp/web", "configured")}),
    ),
    "foreign-env-item-first-then-empty-resources": Scenario(
        # resources: {} sets nothing: no write at all
        (_web(env="[{name: A, value: a}]"), put_env_first),
        _web(env="[{name: A, value: a}]", resources="{}"),
        frozenset(),
    ),
    "dependency-changed-with-its-dependent": Scenario(
        # one commit changes both: the dependent's change waits for db's rollout
        (_seq(_db(), _web()),),
        _seq(_db(STUCK), _web(image="nginx:1.28", dependsOn=ON_DB)),
        frozenset({("MyApp/db", "configured"), ("Deployment/db", "configured")}),
        frozenset({("MyApp/web", "held")}),
    ),
    "new-myapp-on-a-new-dependency": Scenario(
        (_web(),),
        _seq(_db(STUCK), lambda c: c.write("api", dependsOn=ON_DB)),
        frozenset({("MyApp/db", "created"), ("Deployment/db", "created")}),
        frozenset({("MyApp/api", "held"), ("Deployment/api", "held")}),
    ),
    "unchanged-dependent-of-a-stuck-dependency": Scenario(
        # web's drift is corrected while db is stuck: Git did not change web
        (_seq(_db(), _web()), _seq(_rolled_out("db"), _web(dependsOn=ON_DB))),
        _seq(_db(STUCK), lambda c: c.kubectl("scale", "deployment/web", "--replicas=3")),
        frozenset(
            {
                ("MyApp/db", "configured"),
                ("Deployment/db", "configured"),
                ("Deployment/web", "configured"),
            }
        ),
    ),
    "new-myapp": Scenario(
        (_web(),),
        lambda c: c.write("api"),
        frozenset({("MyApp/api", "created"), ("Deployment/api", "created")}),
    ),
    "myapp-removed-from-git": Scenario(
        (_three,),
        lambda c: c.remove("api"),
        frozenset({("MyApp/api", "pruned")}),
    ),
    "one-added-one-removed-of-two": Scenario(
        # the guard counts the MyApp the sync creates: 1 of 3 goes, below half, in this
        # sync (not refused as 1 of 2 now and carried out by the next one)
        (_seq(_web(), lambda c: c.write("api")),),
        _seq(lambda c: c.write("worker"), lambda c: c.remove("api")),
        frozenset(
            {("MyApp/worker", "created"), ("Deployment/worker", "created"), ("MyApp/api", "pruned")}
        ),
    ),
}


def server_state(kube: Kube, ns: str) -> dict[str, tuple[Any, ...]]:
    """Per object (``Kind/name``): whether it is being deleted, and gitsync's Apply
    entries in managedFields (time and field set, per subresource)."""
    out: dict[str, tuple[Any, ...]] = {}
    for kind, path in (
        ("MyApp", resource_path("apps.example.com/v1", "myapps", ns)),
        ("Deployment", resource_path("apps/v1", "deployments", ns)),
    ):
        for obj in kube.list(path).get("items", []):
            meta = obj["metadata"]
            mine = sorted(
                (e.get("subresource", ""), e.get("time"), json.dumps(e.get("fieldsV1")))
                for e in meta.get("managedFields") or []
                if e.get("manager") == "gitsync"
            )
            out[f"{kind}/{meta['name']}"] = (bool(meta.get("deletionTimestamp")), mine)
    return out


def main_entry(state: tuple[Any, ...]) -> list[Any]:
    return [e for e in state[1] if e[0] == ""]


def writes_made(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]]) -> set[Any]:
    out: set[tuple[str, str]] = set()
    for who in set(before) | set(after):
        was, now = before.get(who), after.get(who)
        if was is None and now is not None:
            out.add((who, "created"))
        elif was is not None and (now is None or now[0]):
            # a Deployment goes with its MyApp, by the garbage collector: not sync's write
            if who.startswith("MyApp/"):
                out.add((who, "pruned"))
        elif was is not None and now is not None and main_entry(was) != main_entry(now):
            out.add((who, "configured"))
    return out


_STEP = re.compile(r"\.?(?P<name>[A-Za-z0-9_-]+)|\[(?P<bracket>[^\]]*)\]")


def held_at(obj: Any, path: str) -> Any:
    """The value the API server holds at a path as diff prints it (``metadata.annotations
    [gitsync.example.com/applied]``, ``spec.template.spec.containers[name=app].image``),
    or None where it holds nothing."""
    node = obj
    pos = 0
    while pos < len(path):
        m = _STEP.match(path, pos)
        assert m is not None and m.end() > pos, f"cannot read path {path!r} at {pos}"
        pos = m.end()
        step = m["name"] if m["name"] is not None else m["bracket"]
        if isinstance(node, list):
            # a keyed list item: [name=app] or [containerPort=8080,protocol=TCP]
            want = dict(pair.split("=", 1) for pair in step.split(","))
            node = next(
                (it for it in node if all(str(it.get(k)) == v for k, v in want.items())), None
            )
        elif isinstance(node, dict):
            node = node.get(step)
        else:
            return None
        if node is None:
            return None
    return node


def check_content(kube: Kube, ns: str, doc: Any) -> None:
    """Each object diff announces as created or configured holds, after the sync, the
    value diff gave for each field it changes (None: no longer there)."""
    for o in doc["objects"]:
        if o["action"] not in ("created", "configured"):
            continue
        kind, _, name = short(o["object"], ns).partition("/")
        plural = "myapps" if kind == "MyApp" else "deployments"
        version = "apps.example.com/v1" if kind == "MyApp" else "apps/v1"
        live = kube.get(resource_path(version, plural, ns, name))
        assert o["changes"], o  # a write says what it writes
        # diff cannot know the uid of a MyApp not created yet: it gives a placeholder
        app = kube.get(resource_path("apps.example.com/v1", "myapps", ns, name))
        uid = app["metadata"]["uid"]
        for change in o["changes"]:
            held = held_at(live, change["path"])
            assert holds(held, change["git"], uid), (o["object"], change, held)


def holds(held: Any, want: Any, uid: str) -> bool:
    """``held`` carries ``want``: equal, or for a whole map or list (a created object's
    changes), every value diff gave, beside the defaults the server adds."""
    if isinstance(want, dict):
        return isinstance(held, dict) and all(holds(held.get(k), v, uid) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(held, list)
            and len(held) == len(want)
            and all(holds(h, w, uid) for h, w in zip(held, want, strict=True))
        )
    if want == UID_TO_BE_ASSIGNED:
        return bool(held == uid)
    return bool(held == want)


def short(subject: str, ns: str) -> str:
    kind, _, name = subject.split("/")
    assert _ == ns, subject
    return f"{kind}/{name}"


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_diff_announces_exactly_what_the_next_sync_writes(
    name: str,
    kube: Kube,
    kubeconfig: str,
    reader_kubeconfig: str,
    kubectl_bin: str,
    crd: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    scenario = SCENARIOS[name]
    (tmp_path / "apps").mkdir()
    c = Ctx(tmp_path, namespace, kubeconfig, kubectl_bin, reader_kubeconfig)
    for state in scenario.setup:
        state(c)
        c.sync()
    scenario.change(c)

    before_diff = server_state(kube, namespace)
    code, doc = c.diff()
    assert server_state(kube, namespace) == before_diff, "gitsync diff wrote to the API server"
    announced = {
        (short(o["object"], namespace), o["action"])
        for o in doc["objects"]
        if o["action"] in WRITES
    }
    findings = {(short(o["object"], namespace), o["action"]) for o in doc.get("drift", [])}
    findings |= {(short(o["object"], namespace), "held") for o in doc.get("held", [])}

    # gitsync's entries carry a time in seconds: let one pass, so that a write by
    # this sync cannot carry the same stamp as the setup's
    time.sleep(1.1)
    c.sync()
    made = writes_made(before_diff, server_state(kube, namespace))
    # not only which objects: what diff said each write holds is what the server holds
    check_content(kube, namespace, doc)

    assert announced == made == scenario.writes
    # a held change is a difference between Git and the cluster, as a write is
    held = any(action == "held" for _, action in scenario.findings)
    assert code == (1 if scenario.writes or held else 0), doc
    assert findings == scenario.findings, doc
    # converged: a second diff has nothing left to write (what is held stays held)
    again, doc = c.diff()
    assert again == (1 if held else 0), doc
    assert not [o for o in doc["objects"] if o["action"] in WRITES], doc


def test_diff_text_shows_a_conflict_as_such_and_exits_0(
    kube: Kube,
    kubeconfig: str,
    reader_kubeconfig: str,
    kubectl_bin: str,
    crd: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    (tmp_path / "apps").mkdir()
    c = Ctx(tmp_path, namespace, kubeconfig, kubectl_bin, reader_kubeconfig)
    c.write("web")
    c.sync()
    scale_by_hpa(c)
    proc = gitsync(reader_kubeconfig, "diff", *common(tmp_path, namespace), "--no-color")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--- live/" not in proc.stdout  # nothing is shown as a write
    lines = proc.stdout.splitlines()
    assert f"conflict Deployment/{namespace}/web spec.replicas: live 2, git 1" in lines
    assert lines[-1] == "local: 0 created, 0 configured, 2 unchanged, 0 pruned; 1 conflict"
    # the reader really cannot write: what proves diff's zero writes is not vacuous
    c.write("web", image="nginx:1.28")
    refused = gitsync(reader_kubeconfig, "sync", *common(tmp_path, namespace))
    assert refused.returncode == 1 and "forbidden" in (refused.stdout + refused.stderr).lower()


def test_a_deployment_that_is_not_the_myapps_fails_in_diff_as_in_sync(
    kube: Kube,
    kubeconfig: str,
    reader_kubeconfig: str,
    kubectl_bin: str,
    crd: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    """Someone else's Deployment where the MyApp's would go (not labelled as gitsync's,
    so absent from diff's LIST): sync refuses to take it over, and diff says so too."""
    (tmp_path / "apps").mkdir()
    c = Ctx(tmp_path, namespace, kubeconfig, kubectl_bin, reader_kubeconfig)
    theirs = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "theirs"}},
            "template": {
                "metadata": {"labels": {"app": "theirs"}},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    }
    kube.create(resource_path("apps/v1", "deployments", namespace), theirs)
    c.write("web")
    proc = gitsync(reader_kubeconfig, "diff", *common(tmp_path, namespace), "-o", "json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert [(o["object"], o["action"]) for o in doc["objects"]] == [
        (f"MyApp/{namespace}/web", "created")
    ]
    failed = [(o["object"], o["action"]) for o in doc["failed"]]
    assert failed == [(f"Deployment/{namespace}/web", "failed")], doc
    synced = gitsync(
        kubeconfig, "sync", *common(tmp_path, namespace), "--status-namespace", namespace
    )
    assert synced.returncode == 1 and "does not take it over" in synced.stdout + synced.stderr
    live = kube.get(resource_path("apps/v1", "deployments", namespace, "web"))
    # untouched by gitsync (its status is the deployment controller's to write)
    assert "ownerReferences" not in live["metadata"]
    entries = live["metadata"]["managedFields"]
    assert not [e for e in entries if (e["manager"], e["operation"]) == ("gitsync", "Apply")]
    assert live["spec"]["template"]["spec"]["containers"][0]["name"] == "main"


# (gitsync's env before, the order another manager left live, gitsync's next env): the
# cases of tests/unit/test_plan.py's KEYED_MERGES; X and Y are the other manager's items
ENV_ORDERS = [
    pytest.param("A", "BA", "A", id="another manager's item first"),
    pytest.param("A", "AB", "A", id="another manager's item last"),
    pytest.param("A", "BA", "AC", id="new item, another manager's first"),
    pytest.param("AB", "AB", "CA", id="new item first, one of ours released"),
    pytest.param("AB", "AB", "BA", id="our items in our new order"),
    pytest.param("AB", "AXB", "BA", id="reordered around another manager's item"),
    pytest.param("A", "XAY", "A", id="other items on both sides"),
    pytest.param("AB", "XBYA", "CAB", id="interleaved"),
]


@pytest.mark.parametrize(("ours", "live_order", "body_order"), ENV_ORDERS)
def test_the_env_order_after_an_apply_is_the_servers(
    ours: str, live_order: str, body_order: str, kube: Kube, crd: str, namespace: str
) -> None:
    """The planner's preview of an apply (``after``) puts a keyed list's items where
    the API server's server-side apply puts them: the Deployment rendered from the
    preview has the server's env order, so diff does not announce a write the sync
    never makes."""
    path = resource_path("apps.example.com/v1", "myapps", namespace, "web")

    def myapp(env: str, **spec: Any) -> Obj:
        items = [{"name": n, "value": n.lower()} for n in env]
        spec = {"image": "nginx:1.27", **({"env": items} if items else {}), **spec}
        meta = {"name": "web", "namespace": namespace}
        return {
            "apiVersion": "apps.example.com/v1",
            "kind": "MyApp",
            "metadata": meta,
            "spec": spec,
        }

    kube.apply(path, myapp(ours), field_manager="gitsync")
    # another manager's Update leaves the list in the order it sends: it owns what it
    # added, and gitsync keeps what it had
    patch = {"spec": {"env": myapp(live_order)["spec"]["env"]}}
    kube.request(
        "PATCH",
        path,
        body=patch,
        content_type="application/merge-patch+json",
        params={"fieldManager": "other"},
    )
    live = kube.get(path)
    assert [e["name"] for e in live["spec"]["env"]] == list(live_order)
    body = myapp(body_order, driftPolicy="report")
    step = Step(
        f"MyApp/{namespace}/web",
        "configured",
        live,
        body,
        body=body,
        released=released(live, body, "gitsync"),
    )
    predicted = [e["name"] for e in after(step)["spec"].get("env", [])]
    applied = kube.apply(path, body, field_manager="gitsync")
    assert predicted == [e["name"] for e in applied["spec"].get("env", [])]
