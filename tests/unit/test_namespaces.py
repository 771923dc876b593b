"""The namespace plan shared by sync and diff: which MyApps wait for a namespace, and
which namespaces gitsync creates."""

from __future__ import annotations

from gitsync.engine.changeset import plan
from gitsync.engine.namespace_plan import (
    FLAG,
    NamespacePlan,
    missing_message,
    plan_namespaces,
    to_look_up,
)
from gitsync.model.api import MANAGED_BY_LABEL
from gitsync.model.instance import INSTANCE_LABEL


def myapp(ns: str, name: str) -> dict[str, object]:
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"image": "nginx:1.27"},
    }


DESIRED = ["shop/cart", "shop/web", "blog/ghost", "team/api"]


def test_only_namespaces_of_myapps_not_live_are_looked_up() -> None:
    # a live MyApp proves its namespace exists: steady state looks nothing up
    assert to_look_up(DESIRED, {"team/api"}) == ["blog", "shop"]
    assert to_look_up(DESIRED, set(DESIRED)) == []


def test_missing_namespace_fails_its_myapps_naming_it_and_the_flag() -> None:
    p = plan_namespaces(DESIRED, set(), {"blog", "team"})
    assert p.create == ()
    assert sorted(p.missing) == ["shop/cart", "shop/web"]
    assert '"shop"' in p.missing["shop/cart"] and FLAG in p.missing["shop/cart"]


def test_a_live_myapp_is_not_failed_even_if_its_namespace_was_not_seen() -> None:
    p = plan_namespaces(["shop/cart", "shop/web"], {"shop/cart"}, set())
    assert list(p.missing) == ["shop/web"]


def test_create_namespace_creates_each_missing_one_once_labelled_as_gitsyncs() -> None:
    p = plan_namespaces(DESIRED, set(), {"team"}, create=True, instance="apps")
    assert p.create == ("blog", "shop") and p.missing == {}
    body = p.bodies()[1]
    assert body["kind"] == "Namespace" and body["metadata"]["name"] == "shop"
    assert body["metadata"]["labels"] == {MANAGED_BY_LABEL: "gitsync", INSTANCE_LABEL: "apps"}


def test_create_namespace_respects_allowed_and_denied_namespaces() -> None:
    p = plan_namespaces(
        ["shop/a", "blog/b", "kube-x/c"],
        set(),
        set(),
        create=True,
        allowed=frozenset({"shop", "kube-x"}),
        denied=("kube-*", "blog"),
    )
    # kube-x is allowed by name, which overrides the pattern; blog is not allowed
    assert p.create == ("kube-x", "shop")
    assert list(p.missing) == ["blog/b"]
    p = plan_namespaces(["kube-system/a"], set(), set(), create=True, denied=("kube-*",))
    assert p.create == () and "not allowed" in p.missing["kube-system/a"]


def test_diff_plan_shows_the_namespace_created_or_the_myapps_failed() -> None:
    desired = {"shop/cart": myapp("shop", "cart"), "blog/ghost": myapp("blog", "ghost")}
    failing = plan(desired, {}, {}, namespaces=plan_namespaces(desired, {}, {"blog"}))
    failed = [c for c in failing.changes if c.action == "failed"]
    assert [c.subject for c in failed] == ["MyApp/shop/cart"]
    assert '"shop"' in failed[0].reason and FLAG in failed[0].reason
    # the other MyApp and its Deployment are still planned
    assert failing.count("created") == 2
    creating = plan(desired, {}, {}, namespaces=plan_namespaces(desired, {}, {"blog"}, create=True))
    assert not creating.failed
    assert ("Namespace/shop", "created") in [(c.subject, c.action) for c in creating.changes]
    # two MyApps and their Deployments, and the namespace
    assert creating.count("created") == 5


def test_the_message_of_a_missing_namespace_word_for_word() -> None:
    expected = (
        'namespace "shop" does not exist: create it first, '
        f"or pass {FLAG} to have gitsync create it"
    )
    assert missing_message("shop") == expected
    assert plan_namespaces(["shop/a"], set(), set()).missing == {"shop/a": expected}
    assert missing_message("shop", "why") == expected.replace("exist:", "exist (why):")


def test_a_namespace_not_in_allowed_namespaces_is_not_created_even_if_not_denied() -> None:
    p = plan_namespaces(
        ["shop/a", "blog/b"], set(), set(), create=True, allowed=frozenset({"shop"})
    )
    assert p.create == ("shop",) and list(p.missing) == ["blog/b"]


def test_created_namespaces_carry_an_empty_instance_label_when_none_is_named() -> None:
    labels = {MANAGED_BY_LABEL: "gitsync", INSTANCE_LABEL: ""}
    [body] = plan_namespaces(["shop/a"], set(), set(), create=True).bodies()
    assert body["metadata"]["labels"] == labels
    [body] = NamespacePlan(create=("shop",)).bodies()
    assert body["metadata"]["labels"] == labels
