"""The Git source's side of a pin: fetching one commit by its sha (signed, with
--verify-commits, but not held to descend from the last applied one), and resolving
what ``gitsync rollback --to`` names. Real git, served by git daemon on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitsync.errors import ConfigError, SourceError, VerificationError
from gitsync.source.checkout import GitSource
from gitsync.source.keyring import TrustedKeys, Verifier
from tests.gitserver import Upstream
from tests.signing import Signer, commit, keys_dir


def test_a_pinned_commit_is_checked_out_and_the_ref_is_fetched_again_after(
    git_daemon: str, upstream: Upstream, cache_dir: Path
) -> None:
    old = upstream.commit({"apps/a.yaml": "a: 1\n"})
    new = upstream.commit({"apps/a.yaml": "a: 2\n", "apps/b.yaml": "b: 1\n"})
    s = GitSource(git_daemon, "main", cache_dir, allow_insecure=True)
    assert s.fetch().sha == new
    rev = s.fetch_commit(old.upper())
    assert (rev.sha, rev.pinned) == (old, True)
    assert (rev.dir / "apps" / "a.yaml").read_text() == "a: 1\n"
    assert not (rev.dir / "apps" / "b.yaml").exists()
    fetches = s.fetches
    assert s.fetch_commit(old) is rev and s.fetches == fetches  # checked out already
    head = s.fetch()  # the pin's checkout is not taken for the ref's
    assert (head.sha, head.pinned) == (new, False)
    assert (head.dir / "apps" / "a.yaml").read_text() == "a: 2\n"


def test_a_commit_the_repository_does_not_have_is_an_error_naming_it(
    git_daemon: str, upstream: Upstream, cache_dir: Path
) -> None:
    upstream.commit({"apps/a.yaml": "a: 1\n"})
    s = GitSource(git_daemon, "main", cache_dir, allow_insecure=True)
    missing = "0123456789abcdef" * 2 + "01234567"
    with pytest.raises(SourceError, match=f"commit {missing} not found in git://"):
        s.fetch_commit(missing)


def test_rollback_to_names_a_full_sha_a_tag_or_a_branch(
    git_daemon: str, upstream: Upstream, cache_dir: Path
) -> None:
    first = upstream.commit({"apps/a.yaml": "a: 1\n"})
    upstream.tag("v1", annotated=True)
    head = upstream.commit({"apps/a.yaml": "a: 2\n"})
    s = GitSource(git_daemon, "main", cache_dir, allow_insecure=True)
    assert s.resolve("v1") == first  # an annotated tag, peeled to its commit
    assert s.resolve("main") == head
    assert s.resolve(first.upper()) == first
    with pytest.raises(ConfigError, match="short sha: give the full 40 hex digits"):
        s.resolve(first[:7])
    with pytest.raises(ConfigError, match="not a valid commit, tag or branch"):
        s.resolve("--upload-pack=evil")
    with pytest.raises(SourceError, match="ref 'v9' not found"):
        s.resolve("v9")


def test_with_verify_commits_a_pin_must_be_signed_but_may_go_back(
    git_daemon: str, upstream: Upstream, cache_dir: Path, signers: dict[str, Signer], tmp_path: Path
) -> None:
    alice = signers["alice"]
    for mode in ("commit", "tag"):
        keys = TrustedKeys(keys_dir(tmp_path / mode, alice), 30)
        verifier = Verifier(keys, "tag" if mode == "tag" else "commit")
        s = GitSource(git_daemon, "main", cache_dir / mode, allow_insecure=True, verifier=verifier)
        signed = commit(upstream, {"apps/a.yaml": f"a: {mode}\n"}, alice)
        unsigned = commit(upstream, {"apps/a.yaml": "a: unsigned\n"}, None)
        commit(upstream, {"apps/a.yaml": "a: later\n"}, alice)
        # an older signed commit, behind the head: accepted (a pin has no descent rule)
        rev = s.fetch_commit(signed)
        assert rev.sha == signed and "signed by trusted OpenPGP key" in rev.verified
        # (in tag mode too: a pin names a commit, the commit must be signed)
        with pytest.raises(VerificationError) as e:
            s.fetch_commit(unsigned)
        assert (e.value.reason, e.value.sha) == ("unsigned", unsigned)
        assert (rev.dir / "apps" / "a.yaml").read_text() == f"a: {mode}\n"  # tree stays


def test_a_pinned_commit_between_the_applied_one_and_the_head_hides_no_descent(
    git_daemon: str, upstream: Upstream, cache_dir: Path, signers: dict[str, Signer], tmp_path: Path
) -> None:
    """The pinned commit is fetched shallow (a history boundary in the cache): the head's
    descent from the commit applied before it must still be seen through it."""
    alice = signers["alice"]
    s = GitSource(
        git_daemon, "main", cache_dir, allow_insecure=True,
        verifier=Verifier(TrustedKeys(keys_dir(tmp_path, alice), 30), "commit"),
    )  # fmt: skip
    applied = commit(upstream, {"apps/a.yaml": "a: 1\n"}, alice)
    assert s.fetch().sha == applied
    between = [commit(upstream, {"apps/a.yaml": f"a: {i}\n"}, alice) for i in range(2, 5)]
    head = commit(upstream, {"apps/a.yaml": "a: 5\n"}, alice)
    assert s.fetch_commit(between[1]).sha == between[1]
    assert s.fetch(after=applied).sha == head
