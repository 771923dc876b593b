"""A pass's MyApps in the order of dependsOn (gitops.waves), with a gate whose verdicts
the test sets: who is applied after whom, and how long a one-shot pass waits."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from gitsync.engine.changeset import Change
from gitsync.gitops.waves import Waves
from gitsync.model import order
from gitsync.model.api import Obj
from gitsync.reconcile.gate import Gate, Verdict


def app(name: str, *deps: str) -> Obj:
    return {
        "metadata": {"namespace": "s", "name": name},
        "spec": {"dependsOn": [{"name": d} for d in deps]},
    }


class FakeGate:
    """Each key waits for its first dependency until that one is marked ready."""

    def __init__(self, rollout: int = 0) -> None:
        self.ready: set[str] = set()
        #: the gate's cache: a dict's get is all Waves reads of it
        self.myapps: dict[str, Obj] = {}
        self.judged = 0
        #: verdicts a dependency the pass applied stays Progressing for
        self.rollout = rollout
        self.looked: dict[str, int] = {}

    def judge(self, body: Obj, _live: Obj | None) -> Verdict:
        self.judged += 1
        for dep in order.dependencies(body):
            self.looked[dep] = self.looked.get(dep, 0) + 1
            if dep not in self.ready or self.looked[dep] <= self.rollout:
                return Verdict(order.waiting_for(dep, "Progressing"))
        return Verdict()


BODIES = {"s/c": app("c", "b"), "s/b": app("b", "a"), "s/a": app("a"), "s/x": app("x")}


def run(
    gate: FakeGate, seconds: float, outcome: dict[str, Change] | None = None
) -> tuple[list[str], dict[str, Change | None]]:
    applied: list[str] = []
    lock = threading.Lock()

    def apply(key: str) -> Change:
        with lock:
            applied.append(key)
        # what the pass applied becomes Available at once, unless it failed
        change = (outcome or {}).get(key) or Change(f"MyApp/{key}", "created")
        if change.action != "failed":
            gate.ready.add(key)
        return change

    waves = Waves(cast(Gate, gate), threading.Event(), seconds)
    with ThreadPoolExecutor(4) as pool:
        done = waves.apply(pool, BODIES, apply)
    return applied, done


def test_each_myapp_is_applied_after_the_ones_it_depends_on() -> None:
    gate = FakeGate()
    applied, done = run(gate, 0)
    assert applied.index("s/a") < applied.index("s/b") < applied.index("s/c")
    assert set(done) == set(BODIES)
    # the daemon's pass does not wait: no verdict asked before applying
    assert gate.judged == 0


def test_a_one_shot_pass_waits_for_a_dependency_it_applied_until_it_is_ready() -> None:
    gate = FakeGate(rollout=3)
    applied, done = run(gate, 30)
    assert applied.index("s/a") < applied.index("s/b") < applied.index("s/c")
    assert all(c is not None and c.action == "created" for c in done.values())
    # looked at until each rollout was done, then no more
    assert gate.looked == {"s/a": 4, "s/b": 4}


def test_a_failed_dependency_is_not_waited_for() -> None:
    gate = FakeGate()
    failed = {"s/a": Change("MyApp/s/a", "failed", reason="refused")}
    applied, _ = run(gate, 30, failed)
    # b applied (to be held by the reconcile, with the reason) without waiting: judged
    # once, as c (a wait would look again every 0.2 s until the deadline)
    assert applied.index("s/b") < applied.index("s/c")
    assert gate.judged == 2
