"""gitsync.model.integers against the oracle: what the real API server accepts at an integer field.

Each value is sent to the API server as it would come out of a YAML manifest (a server-side
dry run, so nothing is stored), as a MyApp (its CRD types ``replicas`` integer) and as a
Deployment (a built-in kind); the answer is compared with ``as_integer``.
"""

from __future__ import annotations

from typing import Any

import pytest

from gitsync.errors import APIError
from gitsync.kube.client import Kube, path_of
from gitsync.model.integers import as_integer
from gitsync.model.render import render
from tests.support import myapp

pytestmark = pytest.mark.integration

NUMBERS: list[Any] = [0, 3, 3.0, 1e2, 3.5, -1.0, float(2**31 - 1), 2**31, True, False, None]
STRINGS: list[Any] = ["3", "03", "+3", "-3", " 3", "3.0", "0x10", "three", ""]


def dry_run(kube: Kube, kind: str, namespace: str, body: dict[str, Any]) -> Any:
    """The ``spec.replicas`` the server would store, or the error it answers."""
    try:
        stored = kube.request("POST", path_of(kind, namespace), params={"dryRun": "All"}, body=body)
    except APIError as e:
        return e
    return stored["spec"].get("replicas")


@pytest.mark.parametrize("value", NUMBERS, ids=repr)
def test_a_number_is_an_integer_exactly_when_the_api_server_takes_it_as_one(
    kube: Kube, crd: str, namespace: str, value: Any
) -> None:
    answer = dry_run(kube, "MyApp", namespace, myapp(namespace, "n", replicas=value))
    expected = as_integer(value)
    if value is None:
        assert answer == 1  # absent: the CRD's default
    elif expected is not None and 0 <= expected <= 2**31 - 1:
        assert answer == expected and type(answer) is int, answer
    else:
        assert isinstance(answer, APIError), answer


@pytest.mark.parametrize("value", STRINGS, ids=repr)
def test_the_api_server_refuses_every_string_even_digits(
    kube: Kube, crd: str, namespace: str, value: Any
) -> None:
    answer = dry_run(kube, "MyApp", namespace, myapp(namespace, "s", replicas=value))
    assert isinstance(answer, APIError) and "must be of type integer" in str(answer), answer
    # and so does gitsync's schema for a manifest (tests/unit/test_yaml_kubectl.py);
    # as_integer reads plain decimal digits as that number, for render and drift only
    assert (as_integer(value) is not None) == (value.isascii() and value.isdigit())


@pytest.mark.parametrize("value", [3, 3.0, "3"], ids=repr)
def test_the_deployment_gets_the_integer_whatever_the_spelling(
    kube: Kube, crd: str, namespace: str, value: Any
) -> None:
    # a built-in kind refuses 3.0 and "3" (json: cannot unmarshal ... into int32)
    raw = render(myapp(namespace, "d", replicas=3))
    raw["spec"]["replicas"] = value
    refused = isinstance(dry_run(kube, "Deployment", namespace, raw), APIError)
    assert refused == (type(value) is not int)
    body = render(myapp(namespace, "d", replicas=value))
    assert dry_run(kube, "Deployment", namespace, body) == 3
