from __future__ import annotations

import logging

import pytest

from gitsync.cli.logs import TextFormatter
from gitsync.cli.report import drift_rows, render_table
from gitsync.engine.managedfields import human_path
from gitsync.errors import MAX_BODY, APIError, ManifestError, plain_or_quote, quote


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("web", "'web'"),
        ("a\nb", r"'a\nb'"),
        ("a\r\x1b[2Jb", r"'a\r\x1b[2Jb'"),
        ("it's", '"it\'s"'),
        ("x\u2028y\u202ez\x85", r"'x\u2028y\u202ez\x85'"),
        (3, "'3'"),
    ],
)
def test_quote_escapes_what_could_forge_or_hide_a_line(value: object, expected: str) -> None:
    assert quote(value) == expected


def test_quote_cuts_long_values_and_says_so() -> None:
    quoted = quote("a" * 10_000)
    assert quoted == "'" + "a" * 200 + "'… (10000 characters)"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("apps/web.yaml", "apps/web.yaml"),
        ("spec.env", "spec.env"),
        ("a b.yaml", "'a b.yaml'"),
        ("x.yaml:3: error: forged", "'x.yaml:3: error: forged'"),
        ("evil\n.yaml", r"'evil\n.yaml'"),
        ("", "''"),
    ],
)
def test_plain_names_stay_bare_others_are_quoted(value: str, expected: str) -> None:
    assert plain_or_quote(value) == expected


def test_manifest_error_location() -> None:
    err = ManifestError("a.yaml", "bad", document=1, line=3, column=7, field="spec.port")
    assert str(err) == "a.yaml:3:7 (document 1): spec.port: bad"
    assert str(ManifestError("a\nb.yaml", "bad", line=2)) == r"'a\nb.yaml':2: bad"
    assert str(ManifestError("", "and 3 more errors")) == "and 3 more errors"


def test_api_error_bodies_are_one_line_and_cut() -> None:
    err = APIError("MyApp/ns/a", "denied\nerror: forged\x1b[2J" + "x" * 1000)
    assert "\n" not in str(err) and "\x1b" not in str(err)
    assert err.message.startswith(r"denied\nerror: forged\x1b[2J")
    # cut at MAX_BODY characters of the body, then escaped
    body = "denied\nerror: forged\x1b[2J"
    assert err.message.endswith("x" * (MAX_BODY - len(body)) + "…")


# --- what the cluster and Git put into every other output stays on one line ----------


def test_text_logs_escape_what_could_forge_a_line() -> None:
    record = logging.makeLogRecord(
        {"msg": "applied %s", "args": ("web\nERROR forged",), "levelname": "INFO"}
    )
    record.key = "shop/web\r\x1b[2J"
    line = TextFormatter().format(record)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line, line
    assert "web\\nERROR forged" in line and "key=shop/web\\r\\x1b[2J" in line


def test_drift_table_rows_stay_one_line_each() -> None:
    app = {
        "metadata": {"namespace": "shop", "name": "web"},
        "status": {
            "drift": [
                {
                    "object": "Deployment/web",
                    "path": "spec.env[name=A\nshop  evil  True]",
                    "manager": "tool\u202e",
                    "time": "2026-01-01T00:00:00Z",
                }
            ]
        },
    }
    table = render_table(drift_rows([app]))
    assert len(table.splitlines()) == 2, table
    assert "A\\nshop" in table and "tool\\u202e" in table


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (("f:spec", "f:env", 'k:{"name":"A\\nB"}', "f:value"), "spec.env[name='A\\nB'].value"),
        (("f:spec", "f:env", 'k:{"name":"PLAIN_1"}'), "spec.env[name=PLAIN_1]"),
        (
            ("f:metadata", "f:labels", "f:app.kubernetes.io/name"),
            "metadata.labels[app.kubernetes.io/name]",
        ),
        (("f:metadata", "f:labels", "f:a b"), "metadata.labels['a b']"),
    ],
)
def test_human_paths_quote_names_that_are_not_plain(path: tuple[str, ...], text: str) -> None:
    assert human_path(path) == text
