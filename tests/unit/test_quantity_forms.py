"""Quantities canonicalised as the API server stores them, without a cluster.

``quantity_forms.txt`` is the server's own answer (a ResourceQuota's hard limits, by
dry-run) for the parser's edges and a seeded random sample, recorded and kept true by
``tests/integration/test_quantity_oracle.py``; :func:`resource_quantity` must give the
same string for each, or refuse what the server refuses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from gitsync.model.quantity import resource_quantity

TABLE: Final = Path(__file__).resolve().parent / "quantity_forms.txt"


def forms() -> list[tuple[str, str]]:
    lines = (line for line in TABLE.read_text().splitlines() if not line.startswith("#"))
    return [(given, stored) for given, stored in (line.split(" ") for line in lines)]


def test_the_table_holds_the_edges_and_the_sample() -> None:
    table = dict(forms())
    assert len(table) > 600
    assert table["0.5Ki"] == "512" and table["1.5n"] == "1m" and table["1e3"] == "1e3"


def test_every_form_is_the_one_the_server_stores() -> None:
    wrong = []
    for given, stored in forms():
        if stored == "!":
            with pytest.raises(ValueError):
                resource_quantity(given)
        elif (got := resource_quantity(given)) != stored:
            wrong.append(f"{given}: server {stored}, gitsync {got}")
    assert not wrong, "\n".join(wrong[:20])
