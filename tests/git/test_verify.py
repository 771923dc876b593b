"""--verify-commits on the Git source: real keys (gpg, ssh-keygen), real signed and unsigned
commits and tags, served by git daemon on loopback. No cluster."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from gitsync.errors import ConfigError, VerificationError
from gitsync.source.checkout import GitSource, open_source
from gitsync.source.keyring import TrustedKeys, Verifier, verifier_of
from tests.gitserver import Upstream
from tests.signing import GpgSigner, Signer, commit, keys_dir, tag


def source(url: str, cache: Path, keys: Path, ref: str = "main", mode: str = "commit") -> GitSource:
    verifier = Verifier(TrustedKeys(keys, 30), "tag" if mode == "tag" else "commit")
    return GitSource(url, ref, cache, allow_insecure=True, verifier=verifier)


def refused(s: GitSource) -> VerificationError:
    with pytest.raises(VerificationError) as e:
        s.fetch()
    return e.value


def test_signed_applies_unsigned_and_force_push_refused_previous_tree_stays(
    git_daemon: str, upstream: Upstream, cache_dir: Path, signers: dict[str, Signer], tmp_path: Path
) -> None:
    alice = signers["alice"]
    s = source(git_daemon, cache_dir, keys_dir(tmp_path, alice))
    good = commit(upstream, {"apps/a.yaml": "a: 1\n"}, alice)
    rev = s.fetch()
    assert rev.sha == good
    assert alice.key in rev.verified and "signed by trusted OpenPGP key" in rev.verified

    # an unsigned commit force-pushed over the signed one (a rewritten history)
    upstream.wgit("checkout", "--quiet", "--orphan", "evil")
    upstream.wgit("rm", "-r", "--quiet", "--force", "--ignore-unmatch", ".")
    bad = commit(upstream, {"apps/a.yaml": "a: evil\n", "apps/b.yaml": "b: 1\n"}, None)
    e = refused(s)
    assert (e.reason, e.sha) == ("unsigned", bad)
    assert str(e) == f"commit {bad} of main not applied: unsigned: the commit carries no signature"
    # the tree read is still the signed commit's: nothing of the refused one checked out
    assert (rev.dir / "apps" / "a.yaml").read_text() == "a: 1\n"
    assert not (rev.dir / "apps" / "b.yaml").exists()
    fetches = s.fetches
    assert refused(s).sha == bad and s.fetches == fetches  # refused again, not fetched again

    # recovery: a signed commit lands
    fixed = commit(upstream, {"apps/b.yaml": None, "apps/a.yaml": "a: 2\n"}, alice)
    assert s.fetch().sha == fixed
    assert (rev.dir / "apps" / "a.yaml").read_text() == "a: 2\n"
    # gpg ran in gitsync's keyring and left nothing running there (no agent, no dirmngr)
    assert s._verifier is not None
    assert processes_using(s._verifier.keys.current().dir) == []


def processes_using(directory: Path) -> list[str]:
    """Command lines of running processes that name ``directory`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = Path(f"/proc/{entry}/environ").read_bytes().decode(errors="replace")
        except OSError:
            continue  # not a process, or gone meanwhile
        if str(directory) in cmdline or str(directory) in environ:
            found.append(f"{entry} {cmdline}")
    return found


@pytest.mark.parametrize(
    ("signer", "reason", "detail"),
    [
        ("mallory", "untrusted-key", "which is not a trusted key"),
        ("old", "expired-key", "which has expired"),
        ("eve", "untrusted-key", "which is not a trusted key"),
    ],
)
def test_untrusted_and_expired_keys_are_refused_naming_the_key(
    git_daemon: str,
    upstream: Upstream,
    cache_dir: Path,
    signers: dict[str, Signer],
    tmp_path: Path,
    signer: str,
    reason: str,
    detail: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # trusted: alice and bob, and the expired key (trusted, but past its expiry)
    keys = keys_dir(tmp_path, signers["alice"], signers["bob"], signers["old"])
    # gitsync's own environment names a keyring that trusts mallory (hers): never used
    mallory = signers["mallory"]
    assert isinstance(mallory, GpgSigner)
    monkeypatch.setenv("GNUPGHOME", str(mallory.home))
    sha = commit(upstream, {"a.yaml": "a: 1\n"}, signers[signer])
    e = refused(source(git_daemon, cache_dir, keys))
    assert (e.reason, e.sha) == (reason, sha)
    assert e.key == signers[signer].ident
    assert signers[signer].ident in str(e) and detail in str(e)


def test_ssh_signed_commit_is_accepted_with_the_allowed_signers(
    git_daemon: str, upstream: Upstream, cache_dir: Path, signers: dict[str, Signer], tmp_path: Path
) -> None:
    bob = signers["bob"]
    sha = commit(upstream, {"a.yaml": "a: 1\n"}, bob)
    rev = source(git_daemon, cache_dir, keys_dir(tmp_path, bob, signers["alice"])).fetch()
    assert rev.sha == sha
    assert f"SSH key {bob.ident} (bob@example.com)" in rev.verified


def test_a_tampered_signature_is_a_bad_signature(
    git_daemon: str, upstream: Upstream, cache_dir: Path, signers: dict[str, Signer], tmp_path: Path
) -> None:
    keys = keys_dir(tmp_path, signers["alice"], signers["bob"])
    for name in ("alice", "bob"):
        signed = commit(upstream, {"a.yaml": f"a: {name}\n"}, signers[name], message="good")
        # the same signature over another message: a forged commit
        raw = upstream.wgit("cat-file", "commit", signed) + "\n"
        forged_file = tmp_path / f"forged-{name}"
        forged_file.write_text(raw.replace("\n\ngood\n", "\n\nevil\n"))
        forged = upstream.wgit("hash-object", "-t", "commit", "-w", str(forged_file))
        upstream.wgit("push", "--quiet", "--force", "origin", f"{forged}:refs/heads/main")
        e = refused(source(git_daemon, tmp_path / f"cache-{name}", keys))
        assert (e.reason, e.sha) == ("bad-signature", forged)
        # OpenPGP names the key id (the signature does not carry the whole fingerprint)
        assert signers[name].ident[-16:] in str(e) and "does not match the content" in str(e)


def test_tag_policy_needs_a_signed_annotated_tag(
    git_daemon: str, upstream: Upstream, cache_dir: Path, signers: dict[str, Signer], tmp_path: Path
) -> None:
    alice = signers["alice"]
    keys = keys_dir(tmp_path, alice)
    sha = commit(upstream, {"a.yaml": "a: 1\n"}, None)  # the commit itself unsigned
    signed_tag = tag(upstream, "v1", alice)
    rev = source(git_daemon, cache_dir, keys, ref="v1", mode="tag").fetch()
    assert rev.sha == sha
    assert f"tag {signed_tag} of v1 is signed by trusted OpenPGP key {alice.key}" in rev.verified
    # commit policy on the same ref: the unsigned commit is refused
    assert refused(source(git_daemon, tmp_path / "c2", keys, ref="v1")).reason == "unsigned"

    unsigned_tag = tag(upstream, "v2", None)
    e = refused(source(git_daemon, tmp_path / "c3", keys, ref="v2", mode="tag"))
    assert (e.reason, e.sha) == ("unsigned", unsigned_tag)
    upstream.wgit("tag", "v3")  # lightweight: cannot carry a signature
    upstream.wgit("push", "--quiet", "origin", "refs/tags/v3")
    assert (
        refused(source(git_daemon, tmp_path / "c4", keys, ref="v3", mode="tag")).reason
        == "unsigned"
    )
    e = refused(source(git_daemon, tmp_path / "c5", keys, ref="main", mode="tag"))
    assert "main is not a tag" in str(e)


def test_the_keyring_is_private_rebuilt_on_rotation_and_removed(
    signers: dict[str, Signer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the user's GNUPGHOME is never used, nor changed
    user_home = tmp_path / "user-gnupg"
    user_home.mkdir(mode=0o700)
    monkeypatch.setenv("GNUPGHOME", str(user_home))
    keys = keys_dir(tmp_path, signers["alice"], signers["bob"])
    trusted = TrustedKeys(keys, 30)
    ring = trusted.current()
    assert ring.fingerprints == {signers["alice"].key}
    assert [k.fingerprint for k in ring.ssh] == [signers["bob"].ident]
    assert (
        stat.S_IMODE(os.stat(ring.dir).st_mode) == 0o700 and ring.dir.owner() == user_home.owner()
    )
    assert not user_home.is_relative_to(ring.dir) and list(user_home.iterdir()) == []
    assert trusted.current() is ring  # unchanged files: the same keyring

    # rotation as the kubelet does it: ..data points at a new directory
    stamp = keys / "..2026_02_02_00_00_00.000000002"
    stamp.mkdir()
    (stamp / signers["mallory"].public.name).write_bytes(signers["mallory"].public.read_bytes())
    (keys / "..data").unlink()
    (keys / "..data").symlink_to(stamp.name)
    for name in ("alice.asc", "ssh-bob.pub"):
        (keys / name).unlink()
    (keys / signers["mallory"].public.name).symlink_to(f"..data/{signers['mallory'].public.name}")
    rotated = trusted.current()
    assert rotated.fingerprints == {signers["mallory"].key} and rotated.ssh == ()
    assert not ring.dir.exists()  # the old one is gone
    trusted.close()
    assert not rotated.dir.exists()


def test_bad_trusted_keys_are_configuration_errors(
    tmp_path: Path, signers: dict[str, Signer]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="no OpenPGP or SSH public key found"):
        TrustedKeys(empty).current()
    junk = tmp_path / "junk.pub"
    junk.write_text("# a comment\nnot a key\n")
    with pytest.raises(ConfigError, match=r"junk.pub:2: neither an SSH public key"):
        TrustedKeys(junk).current()
    private = Path(signers["bob"].key)
    with pytest.raises(ConfigError, match="holds a private key"):
        TrustedKeys(private).current()
    with pytest.raises(ConfigError, match="without --verify-commits"):
        verifier_of({"trusted_keys": junk})
    with pytest.raises(ConfigError, match="needs --trusted-keys"):
        verifier_of({"verify_commits": True})
    assert verifier_of({}) is None
    verifier = verifier_of({"verify": "tag", "trusted_keys": signers["alice"].public})
    assert verifier is not None and verifier.mode == "tag"
    with pytest.raises(ConfigError, match="needs a Git URL"):
        open_source(str(tmp_path), "main", tmp_path / "cache", verifier=verifier)


def test_a_key_file_with_an_openpgp_key_and_an_allowed_signers_line_trusts_both(
    git_daemon: str, upstream: Upstream, cache_dir: Path, signers: dict[str, Signer], tmp_path: Path
) -> None:
    alice, bob = signers["alice"], signers["bob"]
    both = tmp_path / "trusted"
    ssh_line = "bob@example.com " + bob.public.read_text().split(" bob@")[0]
    both.write_text(alice.public.read_text() + ssh_line + "\n")
    ring = TrustedKeys(both, 30).current()
    assert ring.fingerprints == {alice.key}
    assert [k.fingerprint for k in ring.ssh] == [bob.ident]
    s = source(git_daemon, cache_dir, both)
    by_bob = commit(upstream, {"apps/a.yaml": "a: 1\n"}, bob)
    rev = s.fetch()
    assert rev.sha == by_bob and f"signed by trusted SSH key {bob.ident}" in rev.verified
    by_alice = commit(upstream, {"apps/a.yaml": "a: 2\n"}, alice)
    assert s.fetch().sha == by_alice
    # a line outside the armor that is no key: refused, naming the file and line
    both.write_text(alice.public.read_text() + "not a key\n")
    lines = len(alice.public.read_text().splitlines()) + 1
    with pytest.raises(ConfigError, match=rf"trusted: trusted:{lines}: neither an SSH public key"):
        TrustedKeys(both).current()


def test_a_signed_tag_pushed_under_another_name_is_refused(
    git_daemon: str, upstream: Upstream, cache_dir: Path, signers: dict[str, Signer], tmp_path: Path
) -> None:
    alice = signers["alice"]
    keys = keys_dir(tmp_path, alice)
    commit(upstream, {"a.yaml": "a: 1\n"}, None)
    prod = tag(upstream, "prod", alice)
    s = source(git_daemon, cache_dir, keys, ref="prod", mode="tag")
    assert s.fetch().verified.startswith(f"tag {prod} of prod is signed by trusted")
    # an old release, signed as "v0.9", pushed as refs/tags/prod by someone with no key
    old = commit(upstream, {"a.yaml": "a: vulnerable\n"}, None)
    v09 = tag(upstream, "v0.9", alice)
    upstream.wgit("push", "--quiet", "--force", "origin", f"{v09}:refs/tags/prod")
    e = refused(s)
    assert (e.reason, e.sha) == ("tag-mismatch", v09)
    assert f"tag {v09} of prod not applied: tag-mismatch: the signed tag is named 'v0.9'" in str(e)
    assert f"not 'prod' (signed by OpenPGP key {alice.key}" in str(e)
    assert s._current is not None and s._current.sha != old
    assert (s.dir / "a.yaml").read_text() == "a: 1\n"


def test_a_signed_commit_that_does_not_descend_from_the_last_applied_is_refused(
    git_daemon: str, upstream: Upstream, cache_dir: Path, signers: dict[str, Signer], tmp_path: Path
) -> None:
    alice = signers["alice"]
    keys = keys_dir(tmp_path, alice)
    s = source(git_daemon, cache_dir, keys)
    old = commit(upstream, {"a.yaml": "a: vulnerable\n"}, alice)
    assert s.fetch().sha == old
    new = commit(upstream, {"a.yaml": "a: fixed\n"}, alice)
    assert s.fetch(after=old).sha == new  # a fast-forward: one commit deeper
    for _ in range(30):  # further than the first deepening
        latest = commit(upstream, {"a.yaml": "a: fixed\n"}, alice)
    assert s.fetch(after=new).sha == latest

    # a rollback by someone with no key: main force-pushed to the old signed commit
    upstream.wgit("push", "--quiet", "--force", "origin", f"{old}:refs/heads/main")
    # without a last applied commit (a first sync) there is nothing to check against
    assert source(git_daemon, tmp_path / "first", keys).fetch().sha == old
    with pytest.raises(VerificationError) as err:
        s.fetch(after=latest)
    assert (err.value.reason, err.value.sha) == ("not-a-descendant", old)
    assert str(err.value) == (
        f"commit {old} of main not applied: not-a-descendant: it does not descend from commit"
        f" {latest}, the last applied (a rewind or a jump sideways); to apply it, see"
        " --allow-non-fast-forward"
    )
    assert (s.dir / "a.yaml").read_text() == "a: fixed\n"  # the tree stays
    # refused again on the next poll without deepening the history again
    s._descends = lambda *args: pytest.fail("deepened again")  # type: ignore[method-assign]
    with pytest.raises(VerificationError, match="not-a-descendant"):
        s.fetch(after=latest)
    del s._descends

    # a signed commit of an unmerged branch, forked before the fix
    upstream.wgit("checkout", "--quiet", "-b", "feature", old)
    side = commit(upstream, {"a.yaml": "a: sideways\n"}, alice)
    with pytest.raises(VerificationError) as err:
        s.fetch(after=latest)
    assert (err.value.reason, err.value.sha) == ("not-a-descendant", side)
    # a fresh cache, which holds neither: the history is fetched deeper until it ends
    with pytest.raises(VerificationError) as err:
        source(git_daemon, tmp_path / "fresh", keys).fetch(after=latest)
    assert err.value.reason == "not-a-descendant"
    # and finds the last applied one where it is an ancestor
    assert source(git_daemon, tmp_path / "fresh2", keys).fetch(after=old).sha == side

    # the ways to accept it: once, by its sha; or always, by the flag (both said)
    assert "accepted once" in s.fetch(after=latest, accept=side).verified
    allowing = source(git_daemon, tmp_path / "c3", keys)
    assert allowing._verifier is not None
    allowing._verifier.allow_non_fast_forward = True
    rev = allowing.fetch(after=latest)
    assert rev.sha == side and "accepted by --allow-non-fast-forward" in rev.verified


@pytest.mark.parametrize(
    ("options", "dated", "reason", "detail"),
    [
        # retired in 2020; the commit claims 2019, which ssh-keygen alone would accept
        ('valid-before="20200101"', "2019-06-01T00:00:00Z", "expired-key",
         "which is valid only before 20200101 (valid-before)"),
        ('valid-after="20990101Z"', "", "not-yet-valid",
         "which is valid only after 20990101Z (valid-after)"),
        ('namespaces="file"', "", "namespace-mismatch",
         "is trusted only for namespaces 'file'"),
    ],
)  # fmt: skip
def test_an_ssh_key_window_is_checked_at_the_time_of_verification(
    git_daemon: str,
    upstream: Upstream,
    cache_dir: Path,
    signers: dict[str, Signer],
    tmp_path: Path,
    options: str,
    dated: str,
    reason: str,
    detail: str,
) -> None:
    bob = signers["bob"]
    keys = tmp_path / "allowed_signers"
    keytype, blob = bob.public.read_text().split()[:2]
    keys.write_text(f"bob@example.com {options} {keytype} {blob}\n")
    if dated:
        upstream.env |= {"GIT_COMMITTER_DATE": dated, "GIT_AUTHOR_DATE": dated}
    sha = commit(upstream, {"a.yaml": "a: 1\n"}, bob)
    e = refused(source(git_daemon, cache_dir, keys))
    assert (e.reason, e.sha, e.key) == (reason, sha, bob.ident)
    assert str(e).startswith(f"commit {sha} of main not applied: {reason}: ") and detail in str(e)


def test_an_ssh_signature_for_another_namespace_is_a_namespace_mismatch(
    git_daemon: str, upstream: Upstream, cache_dir: Path, signers: dict[str, Signer], tmp_path: Path
) -> None:
    bob = signers["bob"]
    sha = commit(upstream, {"a.yaml": "a: 1\n"}, bob)
    # the same commit, its signature made again by bob's key for namespace "file"
    raw = upstream.wgit("cat-file", "commit", sha)
    header, _, body = raw.partition("\n\n")
    kept = [line for line in header.split("\n") if not line.startswith(("gpgsig", " "))]
    payload = "\n".join(kept) + "\n\n" + body + "\n"
    signed = subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-n", "file", "-f", bob.key],
                            input=payload, capture_output=True, text=True, check=True,
                            timeout=30).stdout  # fmt: skip
    sig = "gpgsig " + "\n ".join(signed.strip().split("\n"))
    forged = "\n".join(kept) + "\n" + sig + "\n\n" + body + "\n"
    new = subprocess.run(["git", "-C", str(upstream.work), "hash-object", "-t", "commit", "-w",
                          "--stdin"], input=forged, env=upstream.env, capture_output=True,
                         text=True, check=True, timeout=30).stdout.strip()  # fmt: skip
    upstream.wgit("push", "--quiet", "--force", "origin", f"{new}:refs/heads/main")
    e = refused(source(git_daemon, cache_dir, keys_dir(tmp_path, bob)))
    assert (e.reason, e.sha) == ("namespace-mismatch", new)
    assert f"the signature by SSH key {bob.ident} is for namespace 'file', not 'git'" in str(e)


def test_a_signed_commit_of_a_branch_never_merged_at_the_ref_needs_a_tip_key(
    git_daemon: str, upstream: Upstream, cache_dir: Path, signers: dict[str, Signer], tmp_path: Path
) -> None:
    """alice signs her work on branches; bob's is the key that signs what lands on main
    (a release or merge key). A commit alice signed on a branch never merged, whose parent
    is the applied commit, descends from it: descent alone lets it through."""
    alice, bob = signers["alice"], signers["bob"]
    both = keys_dir(tmp_path / "history", alice, bob)

    # without --tip-keys (as documented): any trusted key's commit that descends passes
    good = commit(upstream, {"a.yaml": "a: 1\n"}, bob)
    plain = source(git_daemon, cache_dir, both)
    assert plain.fetch().sha == good
    upstream.wgit("checkout", "--quiet", "-b", "experiment", good)
    x = commit(upstream, {"a.yaml": "a: experiment\n"}, alice)  # and main pushed to it
    assert plain.fetch(after=good).sha == x

    # with --tip-keys bob: refused at the ref, naming the key and the flag; tree stays
    upstream.wgit("push", "--quiet", "--force", "origin", f"{good}:refs/heads/main")
    verifier = verifier_of(
        {"verify_commits": True, "trusted_keys": both, "tip_keys": keys_dir(tmp_path / "tip", bob)}
    )
    assert verifier is not None
    s = GitSource(git_daemon, "main", tmp_path / "c2", allow_insecure=True, verifier=verifier)
    assert s.fetch().sha == good
    upstream.wgit("push", "--quiet", "--force", "origin", f"{x}:refs/heads/main")
    with pytest.raises(VerificationError) as err:
        s.fetch(after=good)
    assert (err.value.reason, err.value.sha, err.value.key) == ("untrusted-key", x, alice.key)
    assert str(err.value) == (
        f"commit {x} of main not applied: untrusted-key: signed by OpenPGP key {alice.key},"
        " which is not a key that may sign the tip of 'main' (--tip-keys)"
    )
    assert (s.dir / "a.yaml").read_text() == "a: 1\n"
    # a pin may name it all the same: a trusted key signed it, and a pin is set on purpose
    assert s.fetch_commit(x).sha == x
    # what the merge key signs on top of the applied commit is applied
    merged = commit(upstream, {"a.yaml": "a: 2\n"}, bob)
    rev = s.fetch(after=good)
    assert rev.sha == merged and f"signed by trusted SSH key {bob.ident}" in rev.verified
    assert (s.dir / "a.yaml").read_text() == "a: 2\n"

    with pytest.raises(ConfigError, match="--tip-keys is given without --verify-commits"):
        verifier_of({"tip_keys": both})
