"""The pin record (gitsync.model.pin): its text in the status ConfigMap, which revision
a pass reads, which MyApp comes from which pin, and what a pin holds back."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gitsync.cli.app import main
from gitsync.errors import ConfigError
from gitsync.model import pin as pinlib
from gitsync.model.pin import Pin, Pins

A = "a" * 40
B = "b" * 40
C = "c" * 40


def test_a_pin_round_trips_through_its_configmap_key_and_value() -> None:
    for pin in (
        Pin(A, "alice", "2026-12-04T17:00:00Z", "bad release"),
        Pin(B, "system:admin", "2026-12-04T17:00:00Z", "", "shop/web"),
        Pin(C, "bob", "t", "dots in the name", "shop/web.v2"),
    ):
        assert pinlib.parse(pin.key, pin.value()) == pin
        assert pinlib.pins_of({pin.key: pin.value()}).all() == [pin]


@pytest.mark.parametrize(
    ("app", "key"),
    [("", "pin"), ("shop/web", "pin.shop.web"), ("shop/web.v2", "pin.shop.web.v2")],
)
def test_data_keys_name_the_instance_or_one_myapp(app: str, key: str) -> None:
    assert pinlib.data_key(app) == key
    assert pinlib.app_of_key(key) == app


@pytest.mark.parametrize(
    "key", ["revision", "pinned", "pin.", "pin.shop", "pin..web", "pins", "pinx.shop.web",
            "last.shop.web"]
)  # fmt: skip
def test_keys_that_are_no_pins_are_not_read_as_pins(key: str) -> None:
    assert pinlib.app_of_key(key) is None
    assert not pinlib.pins_of({key: Pin(A, "a", "t").value()})


def test_the_value_is_json_with_its_keys_in_order_and_a_missing_reason_is_none() -> None:
    assert Pin(A, "alice", "t", "why").value() == (
        f'{{"at": "t", "by": "alice", "reason": "why", "revision": "{A}"}}'
    )
    record = json.dumps({"revision": A, "by": "alice", "at": "t"})
    assert pinlib.parse("pin", record) == Pin(A, "alice", "t", "")
    with pytest.raises(ConfigError, match="'revision' is not the key of a pin"):
        pinlib.parse("revision", record)


def test_describe_is_cut_at_twice_a_reason() -> None:
    text = Pin(A, "alice", "t", "r" * 3 * pinlib.MAX_TEXT).describe()
    assert len(text) == 2 * pinlib.MAX_TEXT + 1 and text.endswith("…")


def test_describe_says_revision_who_when_and_why_on_one_line() -> None:
    pin = Pin(A, "alice", "2026-12-04T17:00:00Z", "bad\nrelease")
    assert pin.describe() == f"pinned to {A} by alice at 2026-12-04T17:00:00Z: bad\\nrelease"
    assert Pin(A, "", "t").describe() == f"pinned to {A} by unknown at t"


@pytest.mark.parametrize(
    "value",
    [
        "not json",
        "[]",
        json.dumps({"revision": "abc", "by": "a", "at": "t"}),  # not a full sha
        json.dumps({"revision": A, "by": 3, "at": "t"}),
        json.dumps({"by": "a", "at": "t"}),
    ],
)
def test_an_unreadable_record_is_invalid_never_unpinned(value: str) -> None:
    pins = pinlib.pins_of({"pin": value, "pin.shop.web": value, "revision": "x"})
    assert pins.instance is None
    assert set(pins.invalid) == {"pin", "pin.shop.web"}
    assert pins  # an unreadable pin still counts as pinned: a pass must not go to the head
    with pytest.raises(ConfigError):
        pinlib.parse("pin", value)


def test_a_revision_is_a_full_sha_in_lower_case() -> None:
    assert pinlib.check_revision(A.upper()) == A
    for bad in ("abc1234", A + "0", "g" * 40, ""):
        with pytest.raises(ConfigError, match="full commit sha"):
            pinlib.check_revision(bad)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("MyApp/shop/web", "shop/web"),
        ("myapps/shop/web", "shop/web"),
        ("shop/web.v2", "shop/web.v2"),
    ],
)
def test_a_myapp_is_named_as_kubectl_names_it(text: str, key: str) -> None:
    assert pinlib.app_key(text) == key


@pytest.mark.parametrize(
    "text", ["web", "MyApp/web", "Deployment/shop/web", "MyApp/Shop/web", "a/b/c/d", "shop/Web_1"]
)
def test_anything_else_is_no_myapp(text: str) -> None:
    with pytest.raises(ConfigError, match="MyApp/NAMESPACE/NAME"):
        pinlib.app_key(text)


def test_lines_show_the_instance_first_then_each_myapp() -> None:
    pins = pinlib.pins_of(
        {
            "pin.shop.web": Pin(B, "bob", "t2", "", "shop/web").value(),
            "pin": Pin(A, "alice", "t1", "incident 42").value(),
            "pin.shop.api": "{",
        }
    )
    assert pins.lines() == [
        f"instance pinned to {A} by alice at t1: incident 42",
        f"MyApp/shop/web pinned to {B} by bob at t2",
        "unreadable pin pin.shop.api: pin pin.shop.api: not JSON (Expecting property name"
        " enclosed in double quotes)",
    ]


def test_a_pass_reads_the_instance_pin_else_the_head() -> None:
    assert pinlib.base_revision(Pins()) == ""
    assert pinlib.base_revision(Pins(instance=Pin(A, "a", "t"))) == A
    apps = {
        "shop/web": Pin(B, "b", "t", "", "shop/web"),
        "shop/api": Pin(A, "b", "t", "", "shop/api"),
    }
    # a MyApp pinned where the instance is needs no second read
    assert pinlib.app_revisions(Pins(Pin(A, "a", "t"), apps)) == {B}
    assert pinlib.app_revisions(Pins(None, apps)) == {A, B}


HEAD = {"shop/web": "web@head", "shop/api": "api@head", "shop/new": "new@head"}
AT_B = {"shop/web": "web@B", "shop/api": "api@B"}


def test_a_myapp_pin_takes_that_myapp_alone_from_its_revision() -> None:
    pin = Pin(B, "bob", "t", "", "shop/web")
    chosen = pinlib.select(HEAD, {B: AT_B}, Pins(None, {"shop/web": pin}))
    assert chosen.apps == {"shop/web": "web@B", "shop/api": "api@head", "shop/new": "new@head"}
    assert chosen.pinned == {"shop/web": pin}
    assert chosen.missing == {}


def test_a_pinned_myapp_absent_at_its_revision_is_missing_and_named() -> None:
    pin = Pin(B, "bob", "t", "", "shop/new")
    chosen = pinlib.select(HEAD, {B: AT_B}, Pins(None, {"shop/new": pin}))
    assert "shop/new" not in chosen.apps  # neither applied from the head...
    assert chosen.missing["shop/new"].startswith("MyApp/shop/new is pinned to")  # ...nor lost
    assert f"revision {B} does not declare it" in chosen.missing["shop/new"]


def test_an_instance_pin_reads_every_myapp_from_its_revision_and_a_myapp_pin_wins() -> None:
    instance = Pin(B, "alice", "t", "")
    web = Pin(C, "bob", "t", "", "shop/web")
    at_b = {"shop/web": "web@B", "shop/api": "api@B"}
    chosen = pinlib.select(at_b, {C: {"shop/web": "web@C"}}, Pins(instance, {"shop/web": web}))
    assert chosen.apps == {"shop/web": "web@C", "shop/api": "api@B"}
    assert chosen.pinned == {"shop/web": web, "shop/api": instance}
    # a MyApp pinned to the instance's own revision is read from the base
    same = Pin(B, "bob", "t", "", "shop/api")
    chosen = pinlib.select(at_b, {}, Pins(instance, {"shop/api": same}))
    assert chosen.apps["shop/api"] == "api@B"
    assert chosen.pinned["shop/api"] == same


def test_held_is_what_the_head_would_change_under_a_pin() -> None:
    instance = Pin(B, "alice", "t", "")
    at_b = {"shop/web": "web@B", "shop/api": "api@head", "shop/old": "old@B"}
    held = pinlib.held(HEAD, at_b, Pins(instance))
    # changed at the head, created at the head, pruned at the head; api is the same
    assert held == {"shop/web": instance, "shop/new": instance, "shop/old": instance}
    web = Pin(B, "bob", "t", "", "shop/web")
    only = pinlib.held(HEAD, {**HEAD, "shop/web": "web@B"}, Pins(None, {"shop/web": web}))
    assert only == {"shop/web": web}
    assert pinlib.held(HEAD, HEAD, Pins()) == {}


def test_the_commands_refuse_what_names_no_myapp_or_no_instance_before_connecting() -> None:
    runner = CliRunner()
    bad = runner.invoke(main, ["rollback", "Deployment/shop/web", "--to", A, "--repo", "x"])
    assert bad.exit_code == 2 and "MyApp/NAMESPACE/NAME" in bad.output
    unnamed = runner.invoke(main, ["resume"])
    assert unnamed.exit_code == 2
    assert "name the instance: --instance-name, or --repo" in unnamed.output
    missing = runner.invoke(main, ["rollback", "--repo", "x"])
    assert missing.exit_code == 2 and "--to" in missing.output


def test_a_key_longer_than_a_configmap_key_may_be_is_refused_naming_the_myapp() -> None:
    fits = "n" * (253 - len("pin.shop."))
    assert len(pinlib.data_key(f"shop/{fits}")) == 253
    with pytest.raises(ConfigError, match="too long to pin"):
        pinlib.data_key(f"shop/{fits}x")


def test_a_reason_or_a_name_is_kept_on_one_line_and_cut() -> None:
    assert pinlib.clip("  a\nb  ") == "a\\nb"
    assert pinlib.clip("x" * pinlib.MAX_TEXT) == "x" * pinlib.MAX_TEXT
    assert pinlib.clip("x" * (pinlib.MAX_TEXT + 1)) == "x" * pinlib.MAX_TEXT + "…"
