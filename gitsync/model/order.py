"""``spec.dependsOn``: which MyApps wait for which, and why. Pure.

A MyApp lists the MyApps it depends on (``{name, namespace}``, the namespace its own
when left out). A change from Git to it (its desired state moved since it was applied,
or it is not created yet) waits until every dependency is ``Available`` at its *own*
current desired spec: applied, its status written for its current generation, its
rollout done, no rollback in force and no wait of its own. So "db before app" holds
for the first sync and for every commit that changes both. A MyApp Git has not
changed never waits: drift is corrected whatever its dependencies do.

What cannot be ordered is refused at load, the rest applies: a MyApp that depends on
itself, on a MyApp that exists nowhere (neither in Git nor in the cluster), or on
itself through others (every MyApp of the cycle is named).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from gitsync.model import rollout
from gitsync.model.api import KIND, Obj

#: the condition (and its Event) of a MyApp held back, named after what holds it
WAITING: Final = "Waiting"
DEPENDENCY_NOT_READY: Final = "DependencyNotReady"
SYNC_WINDOW: Final = "SyncWindow"

Reason = Literal["DependencyNotReady", "SyncWindow"]
#: what holds a MyApp's change from Git back (the planner's ``Hold`` of the same name)
WaitHold = Literal["dependency", "window"]


@dataclass(frozen=True)
class Wait:
    """Why a change from Git to a MyApp is not applied yet: ``message`` says what it
    waits for, in words (``waiting for MyApp/shop/db (Progressing)``)."""

    reason: Reason
    message: str
    #: what it waits for (a dependency's key, a window's name): a new one is news (an
    #: Event), a new phase of the same one only status
    on: str = ""

    @property
    def hold(self) -> WaitHold:
        return "dependency" if self.reason == DEPENDENCY_NOT_READY else "window"


def refs_of(spec: Obj | None, namespace: str) -> tuple[str, ...]:
    """The keys (``namespace/name``) of the MyApps ``spec`` depends on, in its order,
    each once."""
    found: dict[str, None] = {}
    for dep in (spec or {}).get("dependsOn") or []:
        if isinstance(dep, dict) and isinstance(dep.get("name"), str) and dep["name"]:
            ns = dep.get("namespace")
            found[f"{ns if isinstance(ns, str) and ns else namespace}/{dep['name']}"] = None
    return tuple(found)


def dependencies(app: Obj) -> tuple[str, ...]:
    """:func:`refs_of` a MyApp object (its namespace fills the ones left out)."""
    return refs_of(app.get("spec"), str((app.get("metadata") or {}).get("namespace") or ""))


def problems(graph: Mapping[str, tuple[str, ...]], exists: Callable[[str], bool]) -> dict[str, str]:
    """What makes each MyApp of ``graph`` (key -> the keys it depends on) impossible to
    order, by key: a self-reference, a dependency ``exists`` denies, a cycle. A MyApp
    that only depends on such a one is not refused: it waits, and says for what."""
    out: dict[str, str] = {}
    for key, deps in graph.items():
        if key in deps:
            out[key] = f"{KIND}/{key} depends on itself"
            continue
        gone = [d for d in deps if d not in graph and not exists(d)]
        if gone:
            names = ", ".join(f"{KIND}/{d}" for d in gone)
            verb = "exists" if len(gone) == 1 else "exist"
            out[key] = f"{names} {verb} neither in Git nor in the cluster"
    for cycle in cycles(graph):
        text = " → ".join(f"{KIND}/{k}" for k in (*cycle.path, cycle.path[0]))
        if cycle.others:
            text += f" (and through {', '.join(f'{KIND}/{k}' for k in cycle.others)})"
        for key in (*cycle.path, *cycle.others):
            out.setdefault(key, f"a cycle: {text}")
    return out


@dataclass(frozen=True)
class Cycle:
    """MyApps that depend on each other (a strongly connected component): the shortest
    cycle through the smallest key, in the order of its edges, and the other members."""

    path: tuple[str, ...]
    others: tuple[str, ...] = ()


def cycles(graph: Mapping[str, tuple[str, ...]]) -> Iterator[Cycle]:
    """Each set of more than one MyApp that depend on each other, once. Iterative
    (Tarjan's algorithm with its own stack): a chain of thousands must not reach
    Python's recursion limit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            deps = [d for d in graph.get(node, ()) if d in graph]
            if i < len(deps):
                work.append((node, i + 1))
                nxt = deps[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    path = _along(graph, component)
                    yield Cycle(path, tuple(sorted(component - set(path))))


def _along(graph: Mapping[str, tuple[str, ...]], component: set[str]) -> tuple[str, ...]:
    """A cycle through the smallest key of ``component``, following its edges (a
    path back to the start exists: it is strongly connected)."""
    start = min(component)
    # breadth first from start's successors back to start: the shortest cycle
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt: list[str] = []
        for node in frontier:
            for dep in graph.get(node, ()):
                if dep not in component or dep in parent:
                    continue
                parent[dep] = node
                if dep == start:
                    path = [start]
                    at = node
                    while at != start:
                        path.append(at)
                        at = parent[at]
                    return (start, *reversed(path[1:]))
                nxt.append(dep)
        frontier = nxt
    return tuple(sorted(component))  # (unreachable for a strongly connected component)


def not_ready(
    live: Obj | None,
    held: rollout.Rollback | None,
    pending: bool,
    waiting: Wait | None,
    phase: str,
) -> str:
    """Why dependency ``live`` is not ``Available`` at its own current desired spec, in
    a few words, or "" when it is.

    ``held`` is the rollback (gitsync's record) that holds back the spec Git declares
    for it, if any (never one its status reports: a status is no input to a decision),
    ``pending`` whether Git's change to it is not applied yet,
    ``waiting`` what it waits for itself (its own dependency or window), ``phase`` its
    Deployment's (:func:`gitsync.model.myapp_status.phase_of`, the deployment
    controller's word now: not the phase its status last recorded, which a one-shot
    ``gitsync sync`` writes once, moments after the rollout began). Its status must have
    been written for its current generation: its Deployment is then rendered from its
    current spec."""
    if waiting is not None:
        return itself(waiting)
    if live is None:
        return "not created yet"
    if (live.get("metadata") or {}).get("deletionTimestamp"):
        return "being deleted"
    status: Obj = live.get("status") or {}
    if held is not None:
        return held.summary()
    if pending:
        return "its change from Git not applied yet"
    generation = (live.get("metadata") or {}).get("generation")
    if not isinstance(generation, int) or status.get("observedGeneration") != generation:
        return "its current spec not rendered yet"
    return "" if phase == "Available" else phase


def itself(wait: Wait) -> str:
    """A dependency's own wait as its dependents' messages say it: what holds it, not
    why that holds in turn (its own status says). A message that embedded the
    dependency's whole message copied every link below it in a chain: it grew with the
    chain (past the condition's 32,768 characters at about 210 links) and each step of
    the chain's release changed, so rewrote, the status of every link above it. Named
    one link down, a message changes only when its own dependency's state does."""
    if wait.hold == "dependency":
        return f"itself waiting for {KIND}/{wait.on}"
    return f"itself {wait.message}"


def waiting_for(dep: str, why: str) -> Wait:
    return Wait(DEPENDENCY_NOT_READY, f"waiting for {KIND}/{dep} ({why})", dep)


def topological(graph: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The keys of ``graph``, each after the keys it depends on (edges to keys outside
    it ignored); what a cycle leaves is appended in key order."""
    deps = {k: [d for d in v if d in graph and d != k] for k, v in graph.items()}
    dependents: dict[str, list[str]] = {k: [] for k in graph}
    for key, ds in deps.items():
        for d in ds:
            dependents[d].append(key)
    left = {k: len(ds) for k, ds in deps.items()}
    ready = sorted(k for k, n in left.items() if n == 0)
    out: list[str] = []
    while ready:
        key = ready.pop(0)
        out.append(key)
        for child in sorted(dependents[key]):
            left[child] -= 1
            if left[child] == 0:
                ready.append(child)
    placed = set(out)
    return out + sorted(k for k in graph if k not in placed)


def waves(graph: Mapping[str, tuple[str, ...]]) -> list[list[str]]:
    """The keys of ``graph`` in waves, each key in the wave after the last of the keys
    it depends on (edges to keys outside it ignored): what one wave holds may be applied
    at once, once the waves before it are. Within a wave, in ``graph``'s order; what a
    cycle leaves is a last wave of its own."""
    deps = {k: [d for d in v if d in graph and d != k] for k, v in graph.items()}
    if not any(deps.values()):
        return [list(graph)] if graph else []
    dependents: dict[str, list[str]] = {k: [] for k in graph}
    for key, ds in deps.items():
        for d in ds:
            dependents[d].append(key)
    left = {k: len(ds) for k, ds in deps.items()}
    depth = {k: 0 for k, n in left.items() if n == 0}
    ready = deque(depth)
    while ready:
        key = ready.popleft()
        for child in dependents[key]:
            depth[child] = max(depth.get(child, 0), depth[key] + 1)
            left[child] -= 1
            if left[child] == 0:
                ready.append(child)
    last = 1 + max((depth[k] for k in graph if left[k] == 0), default=-1)
    out: list[list[str]] = [[] for _ in range(last + 1)]
    for key in graph:
        out[depth[key] if left[key] == 0 else last].append(key)
    return [wave for wave in out if wave]


def plan_waits(
    bodies: Mapping[str, Obj],
    live: Mapping[str, Obj],
    pending: Callable[[str], bool],
    phase: Callable[[str], str],
    other: Callable[[str], Wait | None] = lambda _key: None,
    hold: Callable[[str], rollout.Rollback | None] = lambda _key: None,
) -> dict[str, Wait]:
    """What the change of each MyApp of a pass waits for, as a sync pass decides it one
    MyApp at a time (``gitsync diff``'s prediction): ``bodies`` are Git's MyApps by key,
    ``live`` the cluster's, ``pending(key)`` whether Git's change to one is not applied
    yet, ``phase(key)`` its Deployment's phase, ``other(key)`` what else holds it (a
    window), looked at first, ``hold(key)`` the rollback that holds Git's spec back."""
    graph = {k: dependencies(b) for k, b in bodies.items()}
    out: dict[str, Wait] = {}
    for key in topological(graph):
        if not pending(key):
            continue
        if (held := other(key)) is not None:
            out[key] = held
            continue
        for dep in graph[key]:
            own = out.get(dep)
            body = bodies.get(dep)
            why = not_ready(
                live.get(dep),
                None if body is None else hold(dep),
                body is not None and pending(dep),
                own,
                phase(dep),
            )
            if why:
                out[key] = waiting_for(dep, why)
                break
    return out


def described(status: Obj | None) -> str:
    """What Git's change to a MyApp waits for, as its status says (its Waiting
    condition), for the drift report and the page; "" when it waits for nothing."""
    for c in (status or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == WAITING and c.get("status") == "True":
            return str(c.get("message") or c.get("reason") or "waiting")
    return ""


def held(status: Obj | None) -> str:
    """Everything its status says holds a MyApp back from Git: a rollback in force, a
    wait; "" when nothing does."""
    return "; ".join(t for t in (rollout.described(status), described(status)) if t)
