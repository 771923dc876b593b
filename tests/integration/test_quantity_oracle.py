"""Quantity canonicalisation against the oracle: what kube-apiserver itself stores.

A seeded sample of quantities in every format family (suffixes, exponents, fractions,
leading zeros and signs, values past int64 and below a nano) goes into ResourceQuotas by
a dry-run apply; the strings the API server hands back are resource.Quantity's own
canonical forms, and gitsync.model.quantity must give the same, byte for byte. Dry-run:
nothing is stored.
"""

from __future__ import annotations

import random

from gitsync.kube.client import Kube, resource_path
from gitsync.model.quantity import resource_quantity

SEED = 20261203
SAMPLE = 600
# resource names a ResourceQuota takes any non-negative quantity for
NAMES = [
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
    "ephemeral-storage",
    "requests.ephemeral-storage",
    "limits.ephemeral-storage",
    "requests.storage",
]
SUFFIXES = ["", "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


def quantity(rnd: random.Random) -> str:
    whole = "0" * rnd.choice([0, 0, 0, 1, 2]) + "".join(
        rnd.choice("0123456789") for _ in range(rnd.choice([1, 1, 2, 3, 4, 7, 12, 19, 22]))
    )
    fraction = rnd.choice(["", "", "."]) and "." + "".join(
        rnd.choice("0123456789") for _ in range(rnd.randint(0, 11))
    )
    if rnd.random() < 0.2:
        suffix = rnd.choice(["e", "E"]) + rnd.choice(["", "+", "-"]) + str(rnd.randint(0, 24))
    else:
        suffix = rnd.choice(SUFFIXES)
    return rnd.choice(["", "", "", "+"]) + whole + fraction + suffix


def test_canonical_forms_are_the_api_servers(kube: Kube, namespace: str) -> None:
    rnd = random.Random(SEED)  # noqa: S311 (a reproducible sample, no secret)
    sample = [quantity(rnd) for _ in range(SAMPLE)]
    path = resource_path("v1", "resourcequotas", namespace)
    differ = []
    for start in range(0, len(sample), len(NAMES)):
        batch = dict(zip(NAMES, sample[start : start + len(NAMES)], strict=False))
        body = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": f"oracle-{start}", "namespace": namespace},
            "spec": {"hard": batch},
        }
        stored = kube.apply(
            f"{path}/oracle-{start}", body, field_manager="gitsync-tests", dry_run=True
        )["spec"]["hard"]
        for name, given in batch.items():
            if resource_quantity(given) != stored[name]:
                differ.append((given, stored[name], resource_quantity(given)))
    assert differ == [], f"(given, API server, gitsync): {differ}"
    print(f"FIGURES quantity oracle: {len(sample)} quantities (seed {SEED}), {len(differ)} differ")
