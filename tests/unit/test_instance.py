from __future__ import annotations

import pytest

from gitsync.errors import ConfigError
from gitsync.model.api import ADOPT_ANNOTATION, SOURCE_LABEL
from gitsync.model.instance import (
    OPERATOR_ONLY,
    Instance,
    canonical_url,
    check_name,
    default_name,
    handed_over,
    legacy_label,
    made_by_hand,
    not_adopted,
    refusal,
    refusal_of,
    resolve,
)
from gitsync.model.schema import is_dns_label

URL = "https://github.com/example/platform-apps.git"


def test_default_name_is_readable_stable_and_names_the_ref() -> None:
    main = default_name(URL, "apps", "main")
    assert main.startswith("platform-apps-main-")
    assert main == default_name(URL, "apps", "main")
    # the two instances of issue 9: one repository and path, two refs
    assert default_name(URL, "apps", "staging") != main
    assert default_name(URL, "clusters/prod", "main") != main
    assert default_name("https://github.com/other/platform-apps", "apps", "main") != main


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("https://github.com/example/platform-apps", "apps"),
        ("https://GitHub.com/example/platform-apps/", "./apps/"),
        ("https://user:token@github.com/example/platform-apps.git", "apps"),
        (" https://github.com/example/platform-apps ", "/apps"),
    ],
)
def test_spellings_of_one_source_share_a_name(url: str, path: str) -> None:
    assert default_name(url, path, "main") == default_name(URL, "apps", "main")


@pytest.mark.parametrize(
    ("url", "ref"),
    [
        (URL, "main"),
        ("git@github.com:Example/Platform_Apps.git", "release/v1.2"),
        ("/srv/git/repo", "refs/heads/main"),
        ("file:///tmp/srv/repo.git", "0123456789abcdef0123456789abcdef01234567"),
        ("https://host/" + "x" * 200, "y" * 200),
        ("https://host/---", "..."),
        ("https://host/r.git?private_token=s3cr3t#frag", "main"),
    ],
)
def test_default_name_is_a_dns_label_and_carries_no_credentials(url: str, ref: str) -> None:
    name = default_name(url, "apps", ref)
    assert is_dns_label(name), name
    assert "s3cr3t" not in name and "token" not in name
    # it also names the Lease and the ConfigMap, which allow at most 253
    inst = Instance(name)
    assert len(inst.lease_name) <= 253 and len(inst.status_name) <= 253


def test_resolve() -> None:
    named = resolve("prod", URL, "apps", "main")
    assert (named.name, named.label) == ("prod", "prod")
    assert (named.lease_name, named.status_name) == ("gitsync-leader-prod", "gitsync-status-prod")
    assert resolve("", URL, "apps", "main").name == default_name(URL, "apps", "main")
    assert resolve("", "", ".", "main").name == OPERATOR_ONLY
    # the label gitsync wrote before instance names: adopted, not pruned (see sync)
    assert named.legacy_labels == {legacy_label(URL, "apps")}


@pytest.mark.parametrize("bad", ["Prod", "-prod", "prod-", "pr_od", "a" * 64, "", "a.b"])
def test_check_name_refuses_what_cannot_name_a_label_and_a_lease(bad: str) -> None:
    with pytest.raises(ConfigError, match="--instance-name"):
        check_name(bad)
    if bad:
        with pytest.raises(ConfigError):
            resolve(bad, URL, "apps", "main")


def _app(label: str | None) -> dict[str, object]:
    labels = {SOURCE_LABEL: label} if label is not None else {}
    return {"metadata": {"name": "web", "namespace": "shop", "labels": labels}}


def test_owner_of() -> None:
    me = resolve("prod", URL, "apps", "main")
    assert me.owner_of(None) is None
    assert me.owner_of(_app(None)) is None  # made by hand: no instance's (see below)
    assert me.owner_of(_app("")) is None
    assert me.owner_of(_app("prod")) is None
    assert me.owner_of(_app(legacy_label(URL, "apps"))) is None
    assert me.owner_of(_app("staging")) == "staging"
    assert me.owner_of(_app(legacy_label(URL, "other"))) == legacy_label(URL, "other")


def test_made_by_hand_and_handed_over() -> None:
    assert not made_by_hand(None)
    assert made_by_hand(_app(None)) and made_by_hand(_app(""))
    assert made_by_hand({"metadata": {"name": "web", "labels": None}})
    assert not made_by_hand(_app("prod")) and not made_by_hand(_app(legacy_label(URL, "apps")))
    annotated = {**_app(None), "metadata": {"annotations": {ADOPT_ANNOTATION: "true"}}}
    assert handed_over(annotated)
    for value in ("false", "yes", "prod", ""):
        assert not handed_over({"metadata": {"annotations": {ADOPT_ANNOTATION: value}}})
    assert not handed_over(_app(None)) and not handed_over(None)


def test_legacy_label_keeps_its_normalisation() -> None:
    base = legacy_label("https://github.com/example/apps", "apps")
    assert len(base) == 16 and all(c in "0123456789abcdef" for c in base)
    same = [
        ("https://github.com/example/apps.git", "apps"),
        ("https://GitHub.com/example/apps/", "./apps/"),
        ("https://user:token@github.com/example/apps", "apps"),
        (" https://github.com/example/apps ", "/apps"),
    ]
    for url, path in same:
        assert legacy_label(url, path) == base, (url, path)
    different = [
        ("https://github.com/example/apps", "."),
        ("https://github.com/example/other", "apps"),
        ("https://github.com/Example/apps", "apps"),  # paths are case-sensitive on hosts
        ("ssh://git@github.com/example/apps", "apps"),
    ]
    for url, path in different:
        assert legacy_label(url, path) != base, (url, path)
    assert legacy_label("/srv/repo", "") == legacy_label("/srv/repo/", ".")


@pytest.mark.parametrize(
    ("url", "ref"),
    [
        ("https://github.com:443/example/platform-apps", "main"),
        ("http://github.com/example/platform-apps", "main"),
        ("git@github.com:example/platform-apps.git", "main"),
        ("github.com:example/platform-apps", "main"),
        ("ssh://git@github.com/example/platform-apps.git", "main"),
        ("ssh://git@GitHub.com:22/example/platform-apps", "main"),
        ("git+ssh://git@github.com/example/platform-apps", "main"),
        ("git://github.com/example/platform-apps", "main"),
        (URL, "refs/heads/main"),
        ("git@github.com:example/platform-apps", " refs/heads/main "),
    ],
)
def test_every_transport_and_spelling_of_the_ref_names_one_instance(url: str, ref: str) -> None:
    assert default_name(url, "apps", ref) == default_name(URL, "apps", "main")


def test_what_normalising_keeps_apart() -> None:
    main = default_name(URL, "apps", "main")
    # another port may be another server; a path is case-sensitive; a tag is not a branch
    assert default_name("ssh://git@github.com:2222/example/platform-apps", "apps", "main") != main
    assert default_name("https://github.com:8443/example/platform-apps", "apps", "main") != main
    assert default_name("https://github.com/Example/platform-apps", "apps", "main") != main
    assert default_name(URL, "apps", "refs/tags/main") != main
    assert default_name("file:///srv/example/platform-apps", "apps", "main") != main


def test_a_local_repository_is_named_by_its_path() -> None:
    assert default_name("/srv/git/apps", ".", "main") == default_name(
        "file:///srv/git/apps.git/", ".", "main"
    )
    assert default_name("file://localhost/srv/git/apps", ".", "main") == default_name(
        "file:///srv/git/apps", ".", "main"
    )


def test_the_usual_spellings_keep_the_names_they_had() -> None:
    # names written on MyApps, Leases and ConfigMaps by earlier versions: an https URL or
    # a file:// URL with a branch name must not become a new instance on upgrade
    assert default_name(URL, "apps", "main") == "platform-apps-main-ce3cf63358"
    assert default_name(URL.removesuffix(".git"), ".", "main") == "platform-apps-main-6bc7832bb4"
    assert default_name("file:///srv/git/apps", ".", "main") == "apps-main-695201921c"


@pytest.mark.parametrize(
    ("url", "ref", "before"),
    [
        # what earlier versions named these spellings
        ("git@github.com:example/platform-apps.git", "main", "platform-apps-main-3ac5e964f3"),
        ("/srv/git/apps", "main", "apps-main-5c62373ae0"),
        (URL, "refs/heads/main", "platform-apps-refs-heads-main-062729a4db"),
    ],
)
def test_a_renamed_instance_adopts_the_myapps_of_its_old_name(
    url: str, ref: str, before: str
) -> None:
    path = "apps" if "platform" in url else "."
    me = resolve("", url, path, ref)
    assert me.name != before
    assert before in me.legacy_labels
    assert me.owner_of(_app(before)) is None  # adopted, and relabelled by the apply
    # another source's old name is still another instance's
    other = resolve("", url, "other", ref)
    assert other.owner_of(_app(before)) == before


def test_an_unchanged_name_carries_no_old_name() -> None:
    me = resolve("", URL, "apps", "main")
    assert me.legacy_labels == {legacy_label(URL, "apps")}


ME = resolve("", URL, "apps", "main")


def _labelled(value: str | None, adopt_annotation: str | None = None) -> dict[str, object]:
    meta: dict[str, object] = {"labels": {SOURCE_LABEL: value} if value is not None else {}}
    if adopt_annotation is not None:
        meta["annotations"] = {ADOPT_ANNOTATION: adopt_annotation}
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("live", "adopt", "reason"),
    [
        (None, False, None),  # not there: created
        (_labelled(ME.name), False, None),  # ours
        (_labelled(legacy_label(URL, "apps")), False, None),  # ours, by its old label
        (_labelled("other-instance"), False, "OwnedByAnotherInstance"),
        (_labelled("other-instance"), True, "OwnedByAnotherInstance"),  # --adopt: hand-made only
        (_labelled(None), False, "NotAdopted"),
        (_labelled(""), False, "NotAdopted"),
        (_labelled(None), True, None),
        (_labelled(None, "true"), False, None),
        (_labelled(None, "yes"), False, "NotAdopted"),
    ],
)
def test_refusal_of(live: dict[str, object] | None, adopt: bool, reason: str | None) -> None:
    refused = refusal_of(ME, "MyApp/shop/web", live, adopt)
    assert (refused.reason if refused is not None else None) == reason
    if refused is not None:
        assert refused.message.startswith("MyApp/shop/web ")
        if reason == "OwnedByAnotherInstance":
            assert refused.message == refusal("MyApp/shop/web", "other-instance", ME.name)
            assert "'other-instance'" in refused.message and repr(ME.name) in refused.message
        else:
            assert refused.message == not_adopted("MyApp/shop/web")
            assert "made by hand" in refused.message and ADOPT_ANNOTATION in refused.message


def test_adopting_adds_other_names_but_never_its_own() -> None:
    adopted = ME.adopting({ME.name, "old-name"})
    assert adopted.name == ME.name
    assert adopted.legacy_labels == ME.legacy_labels | {"old-name"}
    assert adopted.owner_of(_labelled("old-name")) is None
    assert ME.owner_of(_labelled("old-name")) == "old-name"


def test_a_long_repository_name_is_cut_to_a_63_character_label() -> None:
    name = default_name("https://git.example.com/" + "a" * 80, ".", "main")
    assert len(name) == 63 and name.startswith("a" * 52 + "-")
    assert is_dns_label(name)


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        # a transport git has no default port for: as gitsync spelled it before
        ("ftp://Host/Repo.git/", "ftp://host/Repo"),
        # a port that is no number names no host and port: left as it was spelled
        ("https://Host:abc/x/", "https://host:abc/x"),
        # a relative directory: only its slashes and .git are tidied
        ("apps//repo.git/", "apps/repo"),
    ],
)
def test_canonical_url_of_what_is_no_known_transport(url: str, canonical: str) -> None:
    assert canonical_url(url) == canonical
