from __future__ import annotations

import logging

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gitsync.cli.logs import TextFormatter
from gitsync.cli.report import drift_rows, render_table
from gitsync.engine.managedfields import human_path, key_json
from gitsync.errors import (
    MAX_BODY,
    APIError,
    ManifestError,
    one_line,
    plain_or_quote,
    printable,
    quote,
)
from gitsync.kube.client import encode_body


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


# what must come through every escape table unchanged: printable text, non-ASCII letters
# and marks, emoji; only quotes and backslashes (which each table spells its own way)
# and the characters each table exists for are left out
UNESCAPED = st.text(
    alphabet=st.characters(
        categories=("L", "M", "N", "P", "S"),
        include_characters=" ",  # the one space Python counts printable
        exclude_characters="'\"\\&<>",
    ),
    max_size=60,
)
WORDS = ["café", "日本語", "Ωμέγα", "اختبار", "ß ñ ø å", "😀", "🚀🐍", "naïve-✓", "a b~c"]


@given(UNESCAPED)
@example("")
@pytest.mark.parametrize("word", WORDS)
def test_printable_text_comes_through_every_escape_unchanged(word: str, text: str) -> None:
    for value in (text, word, word + text):
        assert value.isprintable()
        assert printable(value) == value
        assert one_line(value) == value
        assert quote(value) == f"'{value}'"
        # as the API server writes a list key into fieldsV1, and as an apply body goes out
        assert key_json(value) == f'"{value}"'
        assert encode_body({"v": value}) == f'{{"v":"{value}"}}'.encode()
