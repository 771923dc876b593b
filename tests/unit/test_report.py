"""The drift report's detail lines: path, desired and live values, who changed it."""

from __future__ import annotations

from gitsync.cli.report import drift_rows, render_details, render_table
from gitsync.model.shards import bucket_of


def app(drift: list[dict[str, object]]) -> dict[str, object]:
    return {"metadata": {"namespace": "shop", "name": "cart"}, "status": {"drift": drift}}


def test_each_drifted_path_is_a_line_with_its_values_and_who_changed_it() -> None:
    rows = drift_rows(
        [
            app(
                [
                    {
                        "object": "Deployment/cart",
                        "path": "spec.replicas",
                        "desired": 3,
                        "live": 5,
                        "manager": "kubectl-scale",
                        "operation": "Update",
                    },
                    {"object": "MyApp/cart", "path": "spec.image", "desired": "a:1", "live": None},
                ]
            )
        ]
    )
    assert render_details(rows).splitlines() == [
        "drifted shop/cart Deployment/cart spec.replicas: desired 3, live 5"
        " (changed by kubectl-scale, Update)",
        'drifted shop/cart MyApp/cart spec.image: desired "a:1", live <none> (changed by unknown)',
    ]


def test_no_drift_no_lines_and_a_hostile_value_stays_on_its_line() -> None:
    assert render_details(drift_rows([app([])])) == ""
    rows = drift_rows([app([{"object": "D/x", "path": "p\nq", "manager": "m\u202e", "live": 1}])])
    assert len(render_details(rows).splitlines()) == 1


def test_a_myapp_held_by_a_rollback_is_a_line_saying_from_what_to_what_and_why() -> None:
    record: dict[str, str] = {
        "from": "main@sha1:bad",
        "to": "main@sha1:good",
        "reason": "ReplicaSet cart-1 has timed out progressing.",
        "heldDigest": "sha256:x",
    }
    held = {**app([]), "status": {"rollback": record}}
    [row] = drift_rows([held])
    assert row["held"] and not row["drifted"]
    assert render_details([row]).splitlines() == [
        "held shop/cart: rolled back from main@sha1:bad to main@sha1:good"
        " (ReplicaSet cart-1 has timed out progressing.)"
    ]
    # a record without the held digest is no rollback in force
    del record["heldDigest"]
    assert drift_rows([held])[0]["held"] == ""


def test_a_myapp_whose_change_waits_is_a_line_saying_for_what() -> None:
    waiting = {"type": "Waiting", "status": "True", "reason": "DependencyNotReady"}
    why = "waiting for MyApp/shop/db (Progressing)"
    row = {**app([]), "status": {"conditions": [{**waiting, "message": why}]}}
    assert render_details(drift_rows([row])).splitlines() == [f"held shop/cart: {why}"]
    # no longer waiting: no line
    done = {**app([]), "status": {"conditions": [{**waiting, "status": "False", "message": "x"}]}}
    assert drift_rows([done])[0]["held"] == ""
    # rolled back, and a later change waiting: both said
    record = {"from": "main@sha1:bad", "to": "main@sha1:good", "reason": "r", "heldDigest": "d"}
    both = {**app([]), "status": {"rollback": record, "conditions": [{**waiting, "message": why}]}}
    assert drift_rows([both])[0]["held"] == (
        f"rolled back from main@sha1:bad to main@sha1:good (r); {why}"
    )


def test_with_sharding_each_row_names_its_replica_and_the_table_has_the_column() -> None:
    cart = bucket_of("shop", "cart")
    web = {"metadata": {"namespace": "shop", "name": "web"}, "status": {}}
    rows = drift_rows([app([]), web], {cart: "pod-a"})
    assert [r["replica"] for r in rows] == ["pod-a", ""]  # web's bucket: nobody yet
    lines = render_table(rows).splitlines()
    assert lines[0].split()[-1] == "REPLICA"
    assert lines[1].split()[-1] == "pod-a" and lines[2].split()[-1] == "<none>"
    # without sharding: no column, no key
    plain = drift_rows([app([])])
    assert "replica" not in plain[0]
    assert "REPLICA" not in render_table(plain)


SCALED: dict[str, object] = {
    "object": "Deployment/cart",
    "path": "spec.replicas",
    "manager": "kubectl",
}
EDITED: dict[str, object] = {**SCALED, "path": "spec.template", "time": "2026-12-05T09:00:00Z"}


def drifted_app(
    drift: list[dict[str, object]], seen: str = "2026-12-05T10:00:00Z"
) -> dict[str, object]:
    return {
        "metadata": {"namespace": "shop", "name": "cart"},
        "spec": {"image": "web:1.2"},
        "status": {
            "drift": drift,
            "source": {"revision": "main@sha1:" + "ab" * 20},
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Drifted", "status": "True", "lastTransitionTime": seen},
            ],
        },
    }


def test_since_is_the_servers_time_else_when_gitsync_first_saw_it_marked() -> None:
    # a kubectl scale: the server records no time for /scale
    (row,) = drift_rows([drifted_app([SCALED])])
    assert (row["since"], row["sinceSeen"]) == ("2026-12-05T10:00:00Z", True)
    assert "2026-12-05T10:00:00Z (seen)" in render_table([row])
    # a field with a time: the earliest time the server recorded, not gitsync's
    (row,) = drift_rows([drifted_app([SCALED, EDITED])])
    assert (row["since"], row["sinceSeen"]) == ("2026-12-05T09:00:00Z", False)
    assert "(seen)" not in render_table([row])
    # no drift: no since, whatever the condition says
    (row,) = drift_rows([drifted_app([])])
    assert (row["since"], row["sinceSeen"]) == ("", False)


def test_wide_adds_ready_revision_and_image_after_the_same_columns() -> None:
    rows = drift_rows([drifted_app([EDITED])])
    narrow, wide = render_table(rows).splitlines(), render_table(rows, wide=True).splitlines()
    assert wide[0].split()[-3:] == ["READY", "REVISION", "IMAGE"]
    assert wide[0].startswith(narrow[0])
    assert wide[1].split()[-3:] == ["True", "main@abababa", "web:1.2"]
