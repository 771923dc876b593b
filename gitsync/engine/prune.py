"""Prune planning (design §5): which tracked MyApps to delete, or why not to delete any.

Pure. Deleting a MyApp deletes its Deployment too (garbage collection through
ownerReferences), so every guard here errs on the side of deleting nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class PrunePlan:
    #: keys (``namespace/name``) of MyApps to delete, sorted
    delete: tuple[str, ...]
    #: why nothing is deleted; None when the plan may be carried out
    skipped: str | None = None


def guarded_plan(
    desired: Collection[str],
    tracked: Collection[str],
    *,
    enabled: bool = True,
    source_ok: bool = True,
    manifests_ok: bool = True,
    allow_empty: bool = False,
    max_fraction: float = 0.5,
    applied: Collection[str] = (),
) -> PrunePlan:
    """The deletion of ``tracked`` MyApps (those carrying this instance's source label)
    that are not in ``desired``, as the guards allow it: the keys, or none and why
    (:func:`gitsync.engine.changeset.plan_prune` turns it into the pass's changes).
    ``applied``: the MyApps of ``desired`` the pass applies (all but those it refuses or
    has no namespace for), which carry the label once it is done."""
    if not enabled:
        return _skip("prune is disabled (--no-prune)")
    if not source_ok:
        # with no checkout we do not know what Git wants; absence proves nothing
        return _skip("the Git fetch failed")
    if not manifests_ok:
        # a file that failed to parse would look like every MyApp in it was deleted
        return _skip("some manifests failed to load or validate")
    gone = sorted(set(tracked) - set(desired))
    if not gone:
        return PrunePlan(delete=())
    if not desired and not allow_empty:
        # an empty desired set is far more often a wrong --path or ref than an intent
        return _skip(f"Git has no MyApps; refusing to delete all {len(gone)} (--allow-empty)")
    # counted against what the pass leaves tracked, the MyApps it applies with those it
    # deletes: the next pass counts them so, and must come to the same answer (counted
    # before they were applied, a pass adding one and removing one of two refused the
    # prune, and the next pass, counting three, carried it out)
    counted = len(set(tracked) | set(applied))
    if too_many(len(gone), counted, max_fraction):
        # a mass deletion is more likely a mistake (a moved directory, a second
        # instance on the same repository) than a plan
        return _skip(
            f"{len(gone)} of {counted} tracked MyApps would be deleted,"
            f" {max_fraction:.0%} or more (--prune-max-fraction)"
        )
    return PrunePlan(delete=tuple(gone))


def too_many(gone: int, tracked: int, max_fraction: float) -> bool:
    """Whether deleting ``gone`` of ``tracked`` MyApps reaches ``max_fraction``: a prune
    must stay below it (so the default 0.5 refuses exactly half); 1 or more turns the
    guard off. Exact arithmetic on the fraction as written: in floats 0.57 * 100 is
    56.99999999999999, which would refuse 57 of 100 as more than 57 %."""
    if max_fraction >= 1:
        return False
    return Fraction(gone, max(tracked, 1)) >= Fraction(str(max_fraction))


def _skip(reason: str) -> PrunePlan:
    return PrunePlan(delete=(), skipped=reason)
