"""The preview's merge of a keyed list, held to the order the API server gives it.

``keyed_merge_orders.txt`` is the server's answer for every small case (65 live lists by
65 applied lists of a MyApp's ``spec.env``, up to four items each), recorded and kept true by
``tests/integration/test_keyed_merge_orders.py``. Here :func:`gitsync.engine.planner.after`
must give the same list, order and values, for each of them without a cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from gitsync.engine.planner import Step, after
from gitsync.model.api import Obj

TABLE: Final = Path(__file__).resolve().parent / "keyed_merge_orders.txt"
API: Final = "apps.example.com/v1"


def rows() -> list[tuple[str, str, str]]:
    out = []
    for line in TABLE.read_text().splitlines():
        if line and not line.startswith("#"):
            live, body, result = (s.replace("-", "") for s in line.split(" "))
            out.append((live, body, result))
    return out


def myapp(env: list[Obj] | None) -> Obj:
    spec: Obj = {"image": "registry.example/app:1"}
    if env is not None:
        spec["env"] = env
    return {"apiVersion": API, "kind": "MyApp", "metadata": {"name": "a"}, "spec": spec}


def preview(live: str, body: str) -> str:
    """``after`` of gitsync's apply of ``body`` onto ``live`` (written by another
    manager: the apply releases nothing), in the table's letters."""
    live_env = [{"name": k, "value": "live"} for k in live] if live else None
    applied = myapp([{"name": k, "value": "body"} for k in body])
    step = Step("MyApp/a", "configured", myapp(live_env), applied, body=applied)
    result = after(step)["spec"].get("env") or []
    return "".join(e["name"].upper() if e["value"] == "body" else e["name"] for e in result)


def test_the_table_covers_every_small_order() -> None:
    table = rows()
    assert len(table) == 65 * 65
    assert len({(live, body) for live, body, _ in table}) == len(table)
    # cases that pin the merge's order: shared items reordered around another
    # manager's, new items among shared ones, and two that take four items: a shared
    # item live holds early goes where the body puts it, not where live had it
    for row in ("xa ab xAB", "xa bn xaBN", "abcx bac BxAC", "abx cnba CNBxA"):
        assert tuple(row.split(" ")) in table


def test_the_preview_merges_a_keyed_list_as_the_server_does() -> None:
    wrong = [
        f"live {live or '-'} + applied {body or '-'}: server {want or '-'}, preview {got or '-'}"
        for live, body, want in rows()
        if (got := preview(live, body)) != want
    ]
    assert not wrong, f"{len(wrong)} of {len(rows())} differ:\n" + "\n".join(wrong[:20])
