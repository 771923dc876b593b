"""Releasing a Deployment from its MyApp: the patch drops the MyApp's ownerReference
alone, keeps every other owner, and is guarded by the resourceVersion it was read at."""

from __future__ import annotations

from gitsync.model.api import Obj
from gitsync.model.release import label_selector, myapp_owned, release_patch

MYAPP = {
    "apiVersion": "apps.example.com/v1",
    "kind": "MyApp",
    "name": "web",
    "uid": "u-1",
    "controller": True,
    "blockOwnerDeletion": True,
}
OTHER = {"apiVersion": "example.org/v1", "kind": "Team", "name": "shop", "uid": "u-2"}


def deployment(*refs: Obj) -> Obj:
    meta: Obj = {"namespace": "shop", "name": "web", "resourceVersion": "42"}
    if refs:
        meta["ownerReferences"] = list(refs)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta}


def test_a_deployment_owned_by_its_myapp_alone_loses_the_reference_whole() -> None:
    assert release_patch(deployment(MYAPP)) == {
        "metadata": {"resourceVersion": "42", "ownerReferences": None}
    }


def test_other_owners_are_kept_in_their_order() -> None:
    third = {**OTHER, "name": "platform", "uid": "u-3"}
    patch = release_patch(deployment(OTHER, MYAPP, third))
    assert patch is not None
    assert patch["metadata"]["ownerReferences"] == [OTHER, third]


def test_nothing_to_release_without_a_myapp_owner() -> None:
    assert release_patch(deployment()) is None
    assert release_patch(deployment(OTHER)) is None


def test_a_myapp_of_any_version_of_the_group_is_a_myapp_and_nothing_else_is() -> None:
    assert myapp_owned(MYAPP) and myapp_owned({**MYAPP, "apiVersion": "apps.example.com/v2"})
    assert not myapp_owned({**MYAPP, "apiVersion": "apps.example.org/v1"})
    assert not myapp_owned({**MYAPP, "apiVersion": "apps.example.com.evil/v1"})
    assert not myapp_owned({**MYAPP, "kind": "Deployment"})
    assert not myapp_owned({})


def test_a_label_selector_is_said_as_a_list_query() -> None:
    assert label_selector({"matchLabels": {"b": "2", "a": "1"}}) == "a=1,b=2"
    expressions = [
        {"key": "tier", "operator": "In", "values": ["web", "api"]},
        {"key": "env", "operator": "NotIn", "values": ["dev"]},
        {"key": "app", "operator": "Exists"},
        {"key": "canary", "operator": "DoesNotExist"},
    ]
    assert (
        label_selector({"matchLabels": {"x": "y"}, "matchExpressions": expressions})
        == "x=y,tier in (web,api),env notin (dev),app,!canary"
    )


def test_a_selector_that_cannot_be_said_is_none_never_everything() -> None:
    # an empty query would list every Pod of the namespace
    assert label_selector({}) is None
    assert label_selector({"matchLabels": {}, "matchExpressions": []}) is None
    odd = {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "k", "operator": "Gt"}]}
    assert label_selector(odd) is None
    keyless = {"matchLabels": {"a": "1"}, "matchExpressions": [{"operator": "Exists"}]}
    assert label_selector(keyless) is None
