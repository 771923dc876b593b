"""Quantity canonicalisation against the oracle: what kube-apiserver itself stores.

A seeded sample of quantities in every format family (suffixes, exponents, fractions,
leading zeros and signs, values past int64 and below a nano) goes into ResourceQuotas by
a dry-run apply; the strings the API server hands back are resource.Quantity's own
canonical forms, and gitsync.model.quantity must give the same, byte for byte. Dry-run:
nothing is stored.
"""

from __future__ import annotations

import contextlib
import random
from pathlib import Path

from gitsync.errors import APIInvalidError
from gitsync.kube.client import Kube, resource_path
from gitsync.model.quantity import resource_quantity
from tests.support import write_from_server

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


#: the edges of the parser a random sample seldom hits: int64's digits on either side
#: of the fast path's bound, exponents and suffixes that push it over, binary values
#: under 1 and around 1024, zeros in every form, values below a nano
EDGES: list[str] = [
    "0",
    "00",
    "+0",
    "0.0",
    "0m",
    "0Ki",
    "0e3",
    "0.000",
    "1",
    "1023",
    "1024",
    "1025",
    "1536",
    "2048",
    "1048576",
    "1048577",
    "0.5",
    "0.1",
    "0.001",
    "0.0001",
    "0.0005",
    "0.0015",
    "1.0001",
    "1.0005",
    "1n",
    "0.5n",
    "1.5n",
    "0.000000001",
    "0.0000000001",
    "0.0000000015",
    "1u",
    "1.5u",
    "1m",
    "1.5m",
    "100m",
    "999m",
    "1000m",
    "1001m",
    "1k",
    "1.5k",
    "1000k",
    "1M",
    "1.5G",
    "1T",
    "1P",
    "1E",
    "8E",
    "9E",
    "1Ki",
    "0.5Ki",
    "0.1Ki",
    "1.5Ki",
    "1023Ki",
    "1024Ki",
    "1536Ki",
    "0.5Mi",
    "0.1Mi",
    "1.5Gi",
    "1Ti",
    "1Pi",
    "1Ei",
    "7Ei",
    "8Ei",
    "1e0",
    "1e3",
    "1E3",
    "1e-3",
    "1E-3",
    "1e-9",
    "1e-10",
    "1e+6",
    "1e18",
    "1e19",
    "123456789012345",
    "1234567890123456",
    "12345678901234567",
    "123456789012345678",
    "999999999999999999",
    "9223372036854775807",
    "9223372036854775808",
    "9223372036854775807k",
    "92233720368547758070",
    "1234567890123456789012",
    "12345678901234.5",
    "123456789012345.6",
    "0.123456789012345",
    "1.23456789012345678901234567890",
    "123456789012345e3",
    "12345678901234e-3",
    "1234567890123456m",
    "123456789012345678n",
    "1.5e-9",
    "25e-10",
    "0.5e-9",
]


def server_forms(kube: Kube, namespace: str, given: list[str]) -> dict[str, str | None]:
    """What the API server stores for each quantity, by dry-run applies of
    ResourceQuotas (ten a quota); None for a quantity it refuses."""
    path = resource_path("v1", "resourcequotas", namespace)
    out: dict[str, str | None] = {}

    def apply(batch: dict[str, str], name: str) -> dict[str, str]:
        body = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"hard": batch},
        }
        hard = kube.apply(f"{path}/{name}", body, field_manager="gitsync-tests", dry_run=True)
        return dict(hard["spec"]["hard"])

    for start in range(0, len(given), len(NAMES)):
        batch = dict(zip(NAMES, given[start : start + len(NAMES)], strict=False))
        try:
            stored = apply(batch, f"oracle-{start}")
        except APIInvalidError:
            stored = {}  # one refused refuses the quota: ask one by one
            for resource, value in batch.items():
                with contextlib.suppress(APIInvalidError):
                    stored |= apply({resource: value}, f"oracle-{start}")
        for resource, value in batch.items():
            out[value] = stored.get(resource)
    return out


def sample() -> list[str]:
    rnd = random.Random(SEED)  # noqa: S311 (a reproducible sample, no secret)
    return [quantity(rnd) for _ in range(SAMPLE)]


def test_canonical_forms_are_the_api_servers(kube: Kube, namespace: str) -> None:
    given = sample()
    stored = server_forms(kube, namespace, given)
    differ = [
        (q, stored[q], resource_quantity(q)) for q in given if resource_quantity(q) != stored[q]
    ]
    assert differ == [], f"(given, API server, gitsync): {differ}"
    print(f"FIGURES quantity oracle: {len(given)} quantities (seed {SEED}), {len(differ)} differ")


HEADER = """\
# What the API server stores for a quantity (a ResourceQuota's hard limit, written by a
# dry-run apply): the given form, then the stored one, or "!" where the server refuses
# it. The edges of the parser, then a seeded random sample.
# Written by tests/integration/test_quantity_oracle.py against the real API server,
# which checks it in `make test`; do not edit by hand.
"""
TABLE = Path(__file__).resolve().parents[1] / "unit" / "quantity_forms.txt"


def table(forms: dict[str, str | None]) -> str:
    return HEADER + "".join(f"{q} {forms[q] or '!'}\n" for q in forms)


def test_the_table_of_stored_forms_is_the_servers(kube: Kube, namespace: str) -> None:
    forms = server_forms(kube, namespace, [*EDGES, *sample()])
    assert table(forms) == TABLE.read_text()


if __name__ == "__main__":
    write_from_server(
        lambda kube, ns: table(server_forms(kube, ns, [*EDGES, *sample()])), "quantity-forms"
    )
