"""Request bodies as the API server reads them: JSON that is also the same YAML."""

from __future__ import annotations

import json

import pytest
import yaml

from gitsync.kube.client import encode_body


@pytest.mark.parametrize(
    ("text", "wire"),
    [
        pytest.param("plain", '"plain"', id="ascii"),
        pytest.param("é€名", '"é€名"', id="non-ascii-raw"),
        pytest.param("😀", '"😀"', id="astral-raw-not-surrogate-escapes"),
        pytest.param("a\x7f\x80\x85\x9f", '"a\\u007f\\u0080\\u0085\\u009f"', id="del-and-c1"),
        pytest.param("\u2028\u2029\ufeff", '"\\u2028\\u2029\\ufeff"', id="yaml-breaks-and-bom"),
        pytest.param("\x01\n\t", '"\\u0001\\n\\t"', id="c0-as-json-escapes-them"),
    ],
)
def test_encode_body(text: str, wire: str) -> None:
    data = encode_body({"v": text})
    assert data == ('{"v":' + wire + "}").encode()
    assert json.loads(data) == {"v": text}
    # the server parses apply bodies as YAML: the same value must come out
    assert yaml.safe_load(data.decode()) == {"v": text}
