"""Which replica of an instance serves which MyApps: virtual buckets, assigned to the
live members by consistent hashing with bounded loads.

A MyApp belongs to one of ``buckets`` virtual buckets, by a stable hash of its
``namespace/name`` (SHA-256: the same in every process and every release, unlike
Python's salted ``hash``). The bucket count is fixed per instance, so a MyApp never
changes bucket; only buckets change hands.

The buckets go to the members (the names of the live member Leases) by consistent
hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam, 2018): each member
stands at ``points`` places on a ring of 2^64; each bucket, taken in the order of its
own place on the ring, goes to the first member clockwise from it that holds fewer
than the capacity, ``ceil((1 + epsilon) * buckets / members)``. So no member serves
more than its share and a quarter (by default), and when a member joins or leaves,
most buckets stay where they were: the ones the newcomer's points take, or the ones
the leaver held, plus the few a full member passes on. Every replica computes the
same assignment from the same member names, with no coordination but the Leases.

Pure: the Leases are read and written in :mod:`gitsync.kube.leader`'s layer.
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

#: the default bucket count: enough that a bucket is under 1 % of a fleet and the
#: loads even out at a handful of replicas, few enough to list in a Lease
BUCKETS: Final = 256
#: how far over the even share a member may be loaded (0.25: 25 % over)
EPSILON: Final = 0.25
#: ring points per member: the more, the more even the first choices (fewer buckets
#: passed on for capacity), the longer the ring
POINTS: Final = 128
_RANGE: Final = re.compile(r"([0-9]+)(?:-([0-9]+))?", re.ASCII)


def _position(text: str) -> int:
    """A place on the ring: the first 8 bytes of SHA-256."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def bucket_of(namespace: str, name: str, buckets: int = BUCKETS) -> int:
    """The bucket of the MyApp ``namespace/name``."""
    if buckets < 1:
        raise ValueError(f"the bucket count must be at least 1, not {buckets}")
    return _position(f"{namespace}/{name}") % buckets


def capacity(buckets: int, members: int, epsilon: float = EPSILON) -> int:
    """The most buckets one member may hold: the even share, ``epsilon`` over, rounded
    up (so that the members together can always hold every bucket)."""
    return math.ceil((1 + epsilon) * buckets / members)


def assign(
    members: Iterable[str],
    buckets: int = BUCKETS,
    *,
    epsilon: float = EPSILON,
    points: int = POINTS,
) -> dict[int, str]:
    """Each bucket's member; empty without members. The same members (in any order,
    repeated or not) give the same assignment."""
    if buckets < 1:
        raise ValueError(f"the bucket count must be at least 1, not {buckets}")
    if epsilon < 0 or points < 1:
        raise ValueError(f"epsilon must be 0 or more and points 1 or more: {epsilon}, {points}")
    names = sorted(set(members))
    if not names:
        return {}
    ring = sorted((_position(f"{m}#{i}"), m) for m in names for i in range(points))
    places = [p for p, _ in ring]
    limit = capacity(buckets, len(names), epsilon)
    load = dict.fromkeys(names, 0)
    out: dict[int, str] = {}
    for where, bucket in sorted((_position(f"bucket-{b}"), b) for b in range(buckets)):
        i = bisect.bisect_left(places, where)
        # clockwise to the first member with room; there is one: limit * members >= buckets
        while load[member := ring[i % len(ring)][1]] >= limit:
            i += 1
        load[member] += 1
        out[bucket] = member
    return out


def held_by(assignment: Mapping[int, str], member: str) -> frozenset[int]:
    """The buckets ``member`` serves."""
    return frozenset(b for b, m in assignment.items() if m == member)


def moved(before: Mapping[int, str], after: Mapping[int, str]) -> frozenset[int]:
    """The buckets whose member changes from ``before`` to ``after``."""
    return frozenset(b for b in before.keys() | after.keys() if before.get(b) != after.get(b))


# --- handing buckets over: claims in the member Leases --------------------------------
#
# A member serves a bucket only while its own Lease says it holds it, and takes a bucket
# in two steps, each a write of its Lease read back by the others: first it *claims* the
# bucket (only when no live member holds or claims it), then, once it has read every
# member Lease after its claim was written and found no other claim or holder, it holds
# it and serves it. Two members cannot both hold a bucket: each reads after writing its
# claim, so the later of the two claims is seen by the later reader; when two claims
# meet, the member whose name sorts first keeps its own and the other withdraws. A
# member gives a bucket up by stopping, then writing its Lease without it; a Lease not
# renewed for its duration counts for nothing (its holder stopped writing before that).


@dataclass(frozen=True)
class Claims:
    """What one member's Lease says of buckets: held (served) and claimed (to take)."""

    held: frozenset[int] = frozenset()
    claimed: frozenset[int] = frozenset()


def step_claims(
    me: str, target: frozenset[int], mine: Claims, others: Mapping[str, Claims]
) -> Claims:
    """``me``'s next claims, from the buckets the assignment gives it (``target``), its
    claims as last written, and the live ``others``' claims as read *after* that write.
    Held buckets outside the target are given up; a claim the others do not contest
    becomes a holding (so the caller serves it at once: its Lease still shows the claim
    until the next write, which keeps the others off it)."""
    taken = frozenset().union(*(c.held for c in others.values()))
    contest: dict[int, list[str]] = {}
    for name, c in others.items():
        for b in c.claimed:
            contest.setdefault(b, []).append(name)
    held = set(mine.held & target)
    claimed: set[int] = set()
    for b in target - mine.held:
        if b in taken:
            continue  # its holder gives it up first
        rivals = contest.get(b, [])
        if b in mine.claimed:
            if not rivals:
                held.add(b)
            elif all(me < r for r in rivals):
                claimed.add(b)  # first in name order: the others withdraw
        elif not rivals:
            claimed.add(b)
    return Claims(frozenset(held), frozenset(claimed))


def format_buckets(buckets: Iterable[int]) -> str:
    """``0-3,7,9-10``: a set of buckets as ranges, short enough for an annotation."""
    runs: list[list[int]] = []
    for b in sorted(set(buckets)):
        if runs and runs[-1][1] == b - 1:
            runs[-1][1] = b
        else:
            runs.append([b, b])
    return ",".join(str(a) if a == z else f"{a}-{z}" for a, z in runs)


def parse_buckets(text: str, buckets: int) -> frozenset[int]:
    """The buckets :func:`format_buckets` wrote; ValueError names what is wrong."""
    out: set[int] = set()
    for part in filter(None, text.replace(" ", "").split(",")):
        if not (m := _RANGE.fullmatch(part)):
            raise ValueError(f"not a bucket or a range of buckets: {part!r}")
        a = int(m[1])
        z = int(m[2]) if m[2] else a
        if not a <= z < buckets:
            raise ValueError(f"{part!r} is not within the buckets 0-{buckets - 1}")
        out.update(range(a, z + 1))
    return frozenset(out)


def unserved_words(since: Mapping[int, float]) -> str:
    """What a record says of buckets nobody serves, by when (seconds since the epoch)
    each was first seen unserved: "no replica serves buckets 0-9 (since
    2026-12-08T10:00:00Z), 12 (since …)"; "" for none."""
    by_time: dict[str, list[int]] = {}
    for b, t in since.items():
        at = dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        by_time.setdefault(at, []).append(b)
    runs = [f"{format_buckets(bs)} (since {at})" for at, bs in sorted(by_time.items())]
    return f"no replica serves buckets {', '.join(runs)}" if runs else ""
