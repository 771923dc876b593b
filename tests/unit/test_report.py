"""The drift report's detail lines: path, desired and live values, who changed it."""

from __future__ import annotations

from gitsync.cli.report import drift_rows, render_details


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
