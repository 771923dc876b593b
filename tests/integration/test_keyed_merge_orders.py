"""The order server-side apply gives a keyed list, read from the API server itself.

``tests/unit/keyed_merge_orders.txt`` holds, for every live ``spec.env`` of a MyApp with
up to four of the items ``a b c x`` (written by another manager, so the apply releases
nothing) and every applied ``spec.env`` with up to four of ``a b c n`` (gitsync's apply
body), the list the server holds after the apply: 65 by 65 cases, where three items can
be shared and one on each side is its own (four items are needed to tell some wrong
orders from the server's). The unit test
``tests/unit/test_keyed_merge.py`` holds the planner's merge to that table with no
cluster; this test holds the table to the server, so a Kubernetes whose merge orders
items otherwise fails here first. The property in ``test_merge_oracle.py`` covers random
histories; this table covers every small order exhaustively.

To write the table anew against the cluster KUBECONFIG names:
``python -m tests.integration.test_keyed_merge_orders > tests/unit/keyed_merge_orders.txt``
"""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path
from typing import Final

from gitsync.errors import APINotFoundError
from gitsync.kube.client import Kube, resource_path
from gitsync.model.api import Obj
from tests.support import write_from_server

TABLE: Final = Path(__file__).resolve().parents[1] / "unit" / "keyed_merge_orders.txt"
API: Final = "apps.example.com/v1"
#: the value each side writes: an item the result holds with the body's value is the
#: body's (merged or new), and is written in capitals in the table
LIVE, BODY = "live", "body"

HEADER: Final = """\
# The list the API server holds after gitsync's server-side apply of a keyed list
# (a MyApp's spec.env, keyed by name), for a live list written by another manager.
# Columns: live items, applied items, the server's result ("-" for none). An item
# in capitals holds the applied value, in lower case the live one.
# Written by tests/integration/test_keyed_merge_orders.py against the real API server,
# which checks it in `make test`; do not edit by hand.
"""


LIVE_ITEMS, BODY_ITEMS = "abcx", "abcn"


def sides(letters: str) -> list[str]:
    """Every list of distinct items of ``letters`` (all of them at most), in every order."""
    return ["".join(p) for k in range(5) for p in itertools.permutations(letters, k)]


def env(items: str, value: str) -> list[Obj]:
    return [{"name": k, "value": value} for k in items]


def written(result: list[Obj]) -> str:
    """A result list in the table's letters: capitals for the body's values."""
    return "".join(e["name"].upper() if e.get("value") == BODY else e["name"] for e in result)


def row(live: str, body: str, result: str) -> str:
    return " ".join(s or "-" for s in (live, body, result))


def server_rows(kube: Kube, namespace: str) -> list[str]:
    """Each case's row as the server merges it: one MyApp per live list (created by an
    Update under another manager), each body sent to it as a dry-run apply."""
    myapps = resource_path(API, "myapps", namespace)
    rows = []
    for i, live in enumerate(sides(LIVE_ITEMS)):
        name = f"orders-{i}"
        spec: Obj = {"image": "registry.example/app:1"}
        if live:
            spec["env"] = env(live, LIVE)
        meta = {"name": name, "namespace": namespace}
        kube.create(
            myapps,
            {"apiVersion": API, "kind": "MyApp", "metadata": meta, "spec": spec},
            field_manager="kubectl-edit",
        )
        for body in sides(BODY_ITEMS):
            applied = {"apiVersion": API, "kind": "MyApp", "metadata": meta}
            applied["spec"] = {"env": env(body, BODY)}
            got = kube.apply(
                f"{myapps}/{name}", applied, field_manager="gitsync", force=True, dry_run=True
            )
            rows.append(row(live, body, written(got["spec"].get("env") or [])))
        with contextlib.suppress(APINotFoundError):
            kube.delete(f"{myapps}/{name}")
    return rows


def table(rows: list[str]) -> str:
    return HEADER + "".join(f"{r}\n" for r in rows)


def test_the_table_of_keyed_list_orders_is_the_servers(
    kube: Kube, crd: str, namespace: str
) -> None:
    rows = server_rows(kube, namespace)
    assert len(rows) == 65 * 65
    want = TABLE.read_text().splitlines()
    differ = sorted(set(rows) - set(want))
    assert not differ, f"the server merges otherwise than {TABLE.name} says: {differ[:10]}"
    assert table(rows) == TABLE.read_text()


if __name__ == "__main__":
    write_from_server(lambda kube, ns: table(server_rows(kube, ns)), "keyed-merge-orders")
