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
import hashlib
import math
from collections.abc import Iterable, Mapping
from typing import Final

#: the default bucket count: enough that a bucket is under 1 % of a fleet and the
#: loads even out at a handful of replicas, few enough to list in a Lease
BUCKETS: Final = 256
#: how far over the even share a member may be loaded (0.25: 25 % over)
EPSILON: Final = 0.25
#: ring points per member: the more, the more even the first choices (fewer buckets
#: passed on for capacity), the longer the ring
POINTS: Final = 128


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
