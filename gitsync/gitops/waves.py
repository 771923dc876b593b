"""A pass's MyApps applied in the order of ``spec.dependsOn``: in waves, each MyApp after
the MyApps of the pass it depends on.

Applied all at once, a dependent was judged while its dependency was still being
created, and held as "not created yet" by the very pass that created it. In waves, a
dependent is judged once its dependencies are applied. The daemon goes on at once: a
dependency's watch events wake its dependents when it becomes Available. A one-shot
``gitsync sync`` has no later wake-up, so it waits (bounded) for the dependencies it
applied to become Available before applying what depends on them, as ``flux`` waits for
a Kustomization's dependencies: what it leaves held is then what it could not release.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from gitsync.engine.changeset import Change
from gitsync.model import order as orderlib
from gitsync.model.api import Obj
from gitsync.reconcile.gate import Gate

#: how often a one-shot pass looks at the caches again while its dependencies roll out
#: (a cache read per waiting MyApp, no request)
_POLL_SECONDS: Final = 0.2


class Waves:
    """``await_seconds``: how long in all a pass waits for the dependencies it applied
    to become Available (0: not at all, the daemon's workers take it from there)."""

    def __init__(self, gate: Gate, cancel: threading.Event, await_seconds: float) -> None:
        self.gate = gate
        self.cancel = cancel
        self.await_seconds = await_seconds
        self.clock: Callable[[], float] = time.monotonic

    def apply(
        self,
        pool: ThreadPoolExecutor,
        bodies: Mapping[str, Obj],
        apply: Callable[[str], Change | None],
    ) -> dict[str, Change | None]:
        """``apply`` each key of ``bodies`` (Git's MyApps by key), wave after wave; the
        outcome of each (None: not applied, the pass was stopped)."""
        graph = {key: orderlib.dependencies(body) for key, body in bodies.items()}
        deadline = self.clock() + self.await_seconds
        done: dict[str, Change | None] = {}
        for wave in orderlib.waves(graph):
            if self.await_seconds > 0 and done:  # (the first wave has nothing to wait for)
                self._await(wave, bodies, done, deadline)
            done.update(zip(wave, pool.map(apply, wave), strict=True))
        return done

    def _await(
        self,
        wave: Iterable[str],
        bodies: Mapping[str, Obj],
        done: Mapping[str, Change | None],
        deadline: float,
    ) -> None:
        """Until each MyApp of ``wave`` waits for no dependency this pass may still see
        released, the deadline passes or the pass is stopped."""
        waiting = list(wave)
        while waiting and not self.cancel.is_set():
            waiting = [key for key in waiting if self._releasable(key, bodies[key], done)]
            if not waiting or self.clock() >= deadline:
                return
            self.cancel.wait(min(_POLL_SECONDS, max(0.0, deadline - self.clock())))

    def _releasable(self, key: str, body: Obj, done: Mapping[str, Change | None]) -> bool:
        """Git's change to ``body`` waits for a dependency this pass applied, and that
        neither failed nor is held itself: its rollout may still end within the pass.
        One that failed, waits itself, or was not applied by the pass is not waited
        for: the MyApp is applied at once, and held with the reason (as is one a window
        holds); one Git did not change never waits."""
        wait = self.gate.judge(body, self.gate.myapps.get(key)).wait
        if wait is None or wait.hold != "dependency":
            return False
        change = done.get(wait.on)
        return change is not None and change.action != "failed" and not change.hold
