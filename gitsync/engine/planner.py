"""The planner: what a sync writes, decided in one place for ``gitsync sync`` and
``gitsync diff`` (diff == sync).

Pure: it reads desired and live objects (managedFields included) and decides per
object; :mod:`gitsync.reconcile.converge` carries a decision out, :mod:`gitsync.engine.changeset`
prints it. A difference between desired and live is one of three things, told
apart by who owns the live value in managedFields:

- owned by gitsync: the desired state moved (a Git commit, a MyApp edit) and is
  applied, whatever the drift policy;
- owned by a one-off tool (``kubectl*``, ``before-first-apply``): drift; with
  policy ``correct`` it is taken back with ``force``, with ``report`` left;
- owned by another controller (an HPA, another operator): a conflict, always
  reported and never fought over: the field is left out of our apply body, so
  gitsync gives up its claim instead of flapping with the other owner.

``suspend`` holds everything back: nothing is created or applied, and what
differs is shown as held, not as a write.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from gitsync.engine import drift as driftlib
from gitsync.engine.fieldrules import ROOT, Rule
from gitsync.engine.managedfields import Path, fields_of, item_key, owner_sets
from gitsync.model import rollout
from gitsync.model.api import (
    APPLIED_ANNOTATION,
    DEFAULT_FORCE_MANAGERS,
    FIELD_MANAGER,
    KIND,
    DriftPolicy,
    Obj,
    subject,
)
from gitsync.model.compact import SHARED
from gitsync.model.order import Wait
from gitsync.model.render import inputs, render
from gitsync.model.rollout import RollbackPolicy

Decision = Literal["created", "configured", "unchanged"]
#: what holds Git's changes back from an object, when something does
Hold = Literal["", "suspend", "rollback", "dependency", "window"]
#: the uid a MyApp not created yet will have: enough to render its Deployment for a preview
UID_TO_BE_ASSIGNED: Final = "<to be assigned>"


@dataclass(frozen=True)
class Policy:
    correct: bool
    suspended: bool
    force_managers: tuple[str, ...]
    field_manager: str


@dataclass(frozen=True)
class Settings:
    """What a pass applies by: the daemon's and the CLI's flags."""

    default_policy: DriftPolicy = "correct"
    force_managers: tuple[str, ...] = DEFAULT_FORCE_MANAGERS
    field_manager: str = FIELD_MANAGER
    #: for MyApps without spec.rollback (--rollback)
    rollback: RollbackPolicy = "off"


def policy_for(myapp: Obj, s: Settings, *, suspendable: bool = True) -> Policy:
    """The policy of a MyApp's spec (``driftPolicy``, ``suspend``) under ``s``.

    ``suspendable`` False: suspend stops the Deployment, not the comparison of the
    MyApp itself with Git."""
    spec = myapp.get("spec") or {}
    return Policy(
        correct=(spec.get("driftPolicy") or s.default_policy) == "correct",
        suspended=suspendable and bool(spec.get("suspend")),
        force_managers=s.force_managers,
        field_manager=s.field_manager,
    )


@dataclass(frozen=True)
class Step:
    """The decision for one object, as a value: whether to write and what.

    ``body`` is the apply body (None: nothing is sent). ``written`` are the paths
    where the desired state moved, ``corrected`` the drift taken back with force,
    ``drift`` the drift and conflicts that stay (what ``status.drift`` reports),
    ``held`` what suspend holds back, ``released`` the fields only gitsync set that
    the body no longer sets (the apply removes them). ``moved``: the body carries
    another stamp than live, so the write changes the object for certain (an
    annotation's value, which the server neither canonicalises nor prunes) and no
    dry-run need confirm it.
    """

    subject: str
    action: Decision
    live: Obj | None
    desired: Obj
    body: Obj | None = None
    force: bool = False
    written: tuple[driftlib.DriftItem, ...] = ()
    corrected: tuple[driftlib.DriftItem, ...] = ()
    drift: tuple[driftlib.DriftItem, ...] = ()
    held: tuple[driftlib.DriftItem, ...] = ()
    released: tuple[Path, ...] = ()
    reason: str = ""
    hold: Hold = ""
    moved: bool = False


def decide(label: str, desired: Obj, live: Obj | None, p: Policy, *, source: object = None) -> Step:
    """What converging ``live`` to ``desired`` under ``p`` writes.

    ``label`` names the object in drift items (``Deployment/web``). A "configured"
    step whose desired state did not move (drift) is still to be confirmed by an SSA
    dry-run before it is written (see :mod:`gitsync.reconcile.converge`): the server
    may store exactly what is live. ``source``: what ``desired`` is made from, held
    unchanged elsewhere (see :func:`stamp_of`)."""
    meta = desired.get("metadata") or {}
    who = subject(str(desired.get("kind")), meta.get("namespace", ""), meta.get("name", ""))
    if live is None:
        if p.suspended:
            return Step(
                who, "unchanged", None, desired, reason="suspended: not created", hold="suspend"
            )
        return Step(who, "created", None, desired, body=stamped(desired))
    # the fast path: live holds every value desired sets, and carries the stamp of
    # this very desired state (a field Git dropped is still live and invisible to a
    # projection on desired: only the stamp tells that the desired state moved)
    stamp = stamp_of(who, desired, source)
    if driftlib.fast_equal(desired, live) and _stamp(live) == stamp:
        return Step(who, "unchanged", live, desired)
    body = _with_stamp(desired, stamp)
    items = driftlib.attribute(
        driftlib.drift_items(label, body, live),
        live.get("metadata", {}).get("managedFields") or [],
        self_manager=p.field_manager,
        force_managers=p.force_managers,
    )
    if not items:
        return Step(who, "unchanged", live, desired)
    moved = _stamp(live) != _stamp(body)
    ours, foreign = split(items, p, moved=moved)
    if p.suspended:
        return Step(
            who,
            "unchanged",
            live,
            desired,
            drift=tuple(foreign),
            held=tuple(ours),
            reason="suspended",
            hold="suspend",
        )
    takeback = [i for i in foreign if not i.conflict] if p.correct else []
    leave = [i for i in foreign if i not in takeback]
    if not (ours or takeback):
        return Step(who, "unchanged", live, desired, drift=tuple(leave))
    body = without(body, [i.smd_path for i in leave])
    return Step(
        who,
        "configured",
        live,
        desired,
        body=body,
        force=bool(takeback),
        written=tuple(ours),
        corrected=tuple(takeback),
        drift=tuple(leave),
        released=released(live, body, p.field_manager),
        moved=moved,
    )


def stamped(desired: Obj) -> Obj:
    """``desired`` with the hash of itself in an annotation. Live carrying the same
    hash means the desired state has not moved since it was applied, so every
    difference is drift, even one no manager owns (a field removed by hand leaves
    its nearest owned parent, ours, as the only owner in managedFields)."""
    return _with_stamp(desired, _digest(_text(desired)))


def stamp_of(who: str, desired: Obj, source: object = None) -> str:
    """The stamp of ``desired``, remembered per object while desired stays equal:
    every object is checked on every resync, and ``==`` on an equal body costs
    ~0.5 µs where hashing it costs ~25 µs. A memo, so thread-safe enough: a race
    costs one hash more.

    ``source``: what ``desired`` is made from, held unchanged by its owner: equal
    sources make equal desired states (a MyApp's :func:`~gitsync.model.render.inputs`
    for its Deployment; the ledger's body of a MyApp, ``desired`` itself). The memo
    holds the one given last, which costs nothing (its owner holds it too), and compares
    it by ``==``: one identity check per part it shares with the source held. Without
    one, the memo holds a copy of ``desired`` (the caller's body may change later),
    compacted: it shares its nodes with the live object's in the caches, but its top
    two levels are its own, about 0.7 KiB an object."""
    known = desired if source is None else source
    hit = _STAMPS.get(who)
    if hit is not None and hit[0] == known:
        if source is not None:
            # the source given last is held: a copy (remembered without one) can go, and
            # so can an older version's parts
            _STAMPS[who] = (source, hit[1])
        return hit[1]
    text = _text(desired)
    digest = _digest(text)
    if len(_STAMPS) >= _STAMPS_MAX:
        _STAMPS.clear()  # objects long gone would otherwise stay forever
    _STAMPS[who] = (SHARED.compact(desired) if source is None else source, digest)
    return digest


_STAMPS: dict[str, tuple[object, str]] = {}
_STAMPS_MAX: Final = 100_000


def forget_stamps(namespace: str, name: str) -> None:
    """The MyApp ``namespace/name`` and its Deployment are gone: their stamps are not
    remembered (else a fleet whose MyApps come and go would keep each one that went,
    with its desired state, until the memo is full)."""
    for kind in (KIND, "Deployment"):
        _STAMPS.pop(subject(kind, namespace, name), None)


def _text(desired: Obj) -> str:
    return json.dumps(desired, sort_keys=True)


def _digest(text: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    # prefixed: a bare digest such as 123e4567... reads as a number to YAML parsers
    return f"sha256:{digest}"


def _with_stamp(desired: Obj, digest: str) -> Obj:
    meta = desired.get("metadata", {})
    annotations = {**(meta.get("annotations") or {}), APPLIED_ANNOTATION: digest}
    return {**desired, "metadata": {**meta, "annotations": annotations}}


def pending(desired: Obj, live: Obj | None) -> bool:
    """Whether ``desired`` is a change not applied yet to ``live``: live is absent, or
    carries the stamp of another desired state. Equal stamps with values apart are
    drift, which no wait holds back."""
    if live is None:
        return True
    meta = desired.get("metadata") or {}
    who = subject(str(desired.get("kind")), meta.get("namespace", ""), meta.get("name", ""))
    return _stamp(live) != stamp_of(who, desired)


def _stamp(obj: Obj) -> str | None:
    return (obj.get("metadata", {}).get("annotations") or {}).get(APPLIED_ANNOTATION)


def split(
    items: list[driftlib.DriftItem], p: Policy, *, moved: bool
) -> tuple[list[driftlib.DriftItem], list[driftlib.DriftItem]]:
    """(the desired state moved: apply) and (drift: by policy)."""
    if moved:
        ours = [i for i in items if i.manager in (None, p.field_manager)]
        return ours, [i for i in items if i not in ours]
    # nothing moved on our side: a difference under our name was made by someone
    # we cannot name (a removal); it is drift like any other, never a conflict
    unknown = [
        dataclasses.replace(i, manager=None, operation=None, conflict=False)
        if i.manager == p.field_manager
        else i
        for i in items
    ]
    return [], unknown


def without(obj: Obj, paths: list[Path]) -> Obj:
    """``obj`` minus the fields at these structured-merge-diff paths."""
    if not paths:
        return obj
    out = copy.deepcopy(obj)
    for path in paths:
        _remove(out, path)
    return out


def _remove(node: object, path: Path) -> None:
    for i, element in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, dict) and element.startswith("f:"):
            name = element[2:]
            if name not in node:
                return
            if last:
                del node[name]
                return
            node = node[name]
        elif isinstance(node, list) and element.startswith("k:"):
            match = next((it for it in node if _matches(it, element)), None)
            if match is None:
                return
            if last:
                node.remove(match)
                return
            node = match
        else:
            return


def _matches(item: object, element: str) -> bool:
    if not isinstance(item, dict):
        return False
    key = json.loads(element[2:])
    return all(item.get(k) == v for k, v in key.items())


# --- a MyApp and its Deployment --------------------------------------------------


def plan_app(
    git: Obj,
    live_app: Obj | None,
    live_dep: Obj | None,
    s: Settings,
    wait: Wait | None = None,
    *,
    frozen: bool = False,
    record: rollout.Record | None = None,
) -> tuple[Step, Step]:
    """The steps of one Git MyApp and of the Deployment the operator renders from it.

    The MyApp is held to Git under the policy Git gives it (an edit of the live
    driftPolicy is itself drift, not a way around it). The Deployment is rendered
    from the MyApp as it will be after its step, under that MyApp's policy: the
    same order and inputs as a sync pass. ``wait``: what a change of the MyApp waits
    for (a dependency, a window), if anything: then nothing of a change (Git's, or
    the healthy spec a rollback holds to) is applied, and the live MyApp serves; drift
    is corrected all the same, unless ``frozen`` (a closed window under
    --windows-block-corrections): then it is reported. ``record``: gitsync's record of
    the MyApp's rollouts (a rollback in force holds Git's spec back)."""
    name = git["metadata"]["name"]
    label = f"{KIND}/{name}"
    # a rollback in force holds Git's spec back (gitsync.model.rollout): the MyApp is held
    # to the healthy spec instead, and what Git would change is shown as held
    held = rollout.hold_of(record, git.get("spec"), s.rollback)
    body = git if held is None else rollout.with_spec(git, held.spec)
    if wait is not None and pending(body, live_app):
        app = _waiting(label, git, live_app, wait)
    else:
        p = _frozen(policy_for(body, s, suspendable=False), frozen)
        # Git's body is the caller's to keep, unchanged; a held spec's is made anew
        app = decide(label, body, live_app, p, source=git if held is None else None)
    if held is not None and app.action == "unchanged" and not app.hold:
        kept = tuple(driftlib.drift_items(label, git, body))
        why = held.rollback.summary()
        app = dataclasses.replace(app, held=kept, reason=why, hold="rollback")
    if app.hold in ("dependency", "window") and live_app is None:
        # not created: neither is its Deployment
        return app, dataclasses.replace(app, subject=f"Deployment/{app.subject.split('/', 1)[1]}")
    future = after(app)
    p = _frozen(policy_for(future, s), frozen)
    # rendered from the live MyApp as it is (no write to it): its stamp is known by what
    # render reads of it
    source = inputs(future) if future is live_app else None
    dep = decide(f"Deployment/{name}", render(future), live_dep, p, source=source)
    return app, dep


def _frozen(p: Policy, frozen: bool) -> Policy:
    return dataclasses.replace(p, correct=False) if frozen else p


def _waiting(label: str, git: Obj, live: Obj | None, waits: Wait) -> Step:
    """The step of a MyApp whose change from Git waits: nothing written, what Git would
    change shown as held."""
    meta = git.get("metadata") or {}
    who = subject(KIND, meta.get("namespace", ""), meta.get("name", ""))
    if live is None:
        return Step(who, "unchanged", None, git, reason=waits.message, hold=waits.hold)
    kept = tuple(driftlib.drift_items(label, git, live))
    return Step(who, "unchanged", live, git, held=kept, reason=waits.message, hold=waits.hold)


def serving(git: Obj, record: rollout.Record | None, default: RollbackPolicy) -> Obj:
    """The MyApp body a reconcile holds the live one to: Git's, or Git's with the healthy
    spec while a rollback (``record``, gitsync's) holds Git's spec back
    (:func:`gitsync.model.rollout.hold_of`; ``default``: the policy where Git gives none)."""
    held = rollout.hold_of(record, git.get("spec"), default)
    return git if held is None else rollout.with_spec(git, held.spec)


def after(step: Step) -> Obj:
    """The object as the API server will hold it once ``step`` is carried out.

    Applying merges the body into live and drops what only we set and no longer
    send: the server-side apply rules, enough to render a Deployment from."""
    if step.live is None:
        body = step.body if step.body is not None else step.desired
        meta = {**body["metadata"], "uid": UID_TO_BE_ASSIGNED}
        return {**body, "metadata": meta}
    if step.body is None:
        return step.live
    merged = _merge(step.live, step.body, ROOT)
    return without(merged, list(step.released))


def released(live: Obj, body: Obj, field_manager: str) -> tuple[Path, ...]:
    """The paths the apply of ``body`` removes from ``live``, outermost only (a removed
    list item stands for its fields), sorted.

    Server-side apply's prune: a path goes when ``field_manager``'s last apply set it,
    or set something below it (a field on the way there: ``spec.env`` for an env item),
    and no manager owns it or anything below it once this body is applied. So when the
    last of our env items goes, ``env`` itself goes, not only the item: the server
    leaves no empty ``env: []`` or ``requests: {}`` behind (seen on the real server)."""
    mine: set[Path] = set()
    others: set[Path] = set()
    for owner, leaves in owner_sets(live.get("metadata", {}).get("managedFields") or []):
        if owner.manager == field_manager and owner.operation == "Apply":
            if not owner.subresource:  # the status gitsync writes is no part of this body
                mine |= leaves
        else:
            others |= leaves  # an HPA's Update of /scale holds spec.replicas too
    owned = _with_fields_above(others | fields_of(body))
    gone = {p for p in _with_fields_above(mine) - owned if _holds(live, p) and not _kept_empty(p)}
    return tuple(sorted(p for p in gone if not any(p[:n] in gone for n in range(1, len(p)))))


def _kept_empty(path: Path) -> bool:
    """Whether ``path`` is a field the server holds even when empty (a Deployment
    container's ``resources``: a struct, not a pointer, in the Go type), so that an
    apply that empties it leaves ``{}``, not nothing."""
    rule = ROOT
    for element in path:
        if element.startswith("f:"):
            rule = rule.child(element[2:])
        # (an item of a keyed list is at its list's own position)
    return rule.kept_empty


def _with_fields_above(paths: set[Path]) -> set[Path]:
    """``paths`` and every field above one of them (not the list items on the way:
    structured-merge-diff makes only named fields members of the set it prunes by)."""
    out = set(paths)
    for path in paths:
        out.update(path[:n] for n in range(1, len(path)) if path[n - 1].startswith("f:"))
    return out


def _holds(obj: Obj, path: Path) -> bool:
    """Whether ``obj`` has something at ``path`` (a null counts: it is a value there)."""
    node: Any = obj
    for element in path:
        if isinstance(node, dict) and element.startswith("f:") and element[2:] in node:
            node = node[element[2:]]
        elif isinstance(node, list) and element.startswith("k:"):
            node = next((it for it in node if _matches(it, element)), _MISSING)
            if node is _MISSING:
                return False
        else:
            return False
    return True


_MISSING: Final[Any] = object()


def _merge(live: Any, body: Any, at: Rule) -> Any:
    if isinstance(live, dict) and isinstance(body, dict):
        out = dict(live)
        for k, v in body.items():
            out[k] = _merge(live[k], v, at.child(k)) if k in live else v
        return out
    if isinstance(live, list) and isinstance(body, list) and at.keys:
        return _merge_keyed(at, live, body)
    return body


def _merge_keyed(at: Rule, live: list[Any], body: list[Any]) -> list[Any]:
    """A keyed list as server-side apply merges it (structured-merge-diff's
    ``visitListItems``): the order is the server's, not ours. Items only live holds
    keep their place; items the body sends go in the body's order, each shared one
    where live has it, each new one after the live items before it. The order is
    what a rendered Deployment's env follows, so a preview that put another manager's
    items after ours would predict a write the sync never sends."""
    lkeys = [_list_key(at, it) for it in live]
    rkeys = [_list_key(at, it) for it in body]
    lhs = dict(zip(lkeys, live, strict=True))
    rhs = dict(zip(rkeys, body, strict=True))
    # the shared keys in the body's order: the next one is where live's turn stops
    shared = iter([k for k in rkeys if k in lhs])
    next_shared = next(shared, None)
    out: list[Any] = []
    li = ri = 0
    while li < len(live) or ri < len(body):
        if li < len(live):
            lk = lkeys[li]
            if ri < len(body) and lk == rkeys[ri]:
                out.append(_merge(lhs[lk], rhs[lk], at))
                li, ri = li + 1, ri + 1
                next_shared = next(shared, None)
                continue
            if lk not in rhs:
                out.append(live[li])  # another manager's item keeps its place
                li += 1
                continue
            if next_shared != lk:
                li += 1  # shared, but its turn comes with the body's order
                continue
        # the body's next item: a new one before the shared item live waits at, or,
        # once live is done, any (a shared one whose place in live was passed)
        rk = rkeys[ri]
        out.append(_merge(lhs.get(rk), rhs[rk], at))
        ri += 1
    return out


def _list_key(at: Rule, item: Any) -> str:
    return json.dumps(item_key(at, item), sort_keys=True)


def value_at(obj: Obj, path: Path) -> Any:
    """The value at a structured-merge-diff path (``f:`` fields, ``k:`` items), or None."""
    node: Any = obj
    for element in path:
        if isinstance(node, dict) and element.startswith("f:"):
            node = node.get(element[2:])
        elif isinstance(node, list) and element.startswith("k:"):
            node = next((it for it in node if _matches(it, element)), None)
        else:
            return None
    return node


def put(obj: Obj, path: Path, value: Any) -> None:
    """Set the value at a structured-merge-diff path, making what is missing on the way."""
    node: Any = obj
    for i, element in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, dict) and element.startswith("f:"):
            if last:
                node[element[2:]] = value
                return
            nxt = path[i + 1]
            node = node.setdefault(element[2:], [] if nxt.startswith("k:") else {})
        elif isinstance(node, list) and element.startswith("k:"):
            item = next((it for it in node if _matches(it, element)), None)
            if item is None:
                item = dict(json.loads(element[2:]))
                node.append(item)
            if last:
                node[node.index(item)] = value
                return
            node = item
        else:
            return
