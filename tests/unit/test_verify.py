"""The pure part of signature verification: gpg's status lines, ssh-keygen's output, the
signature in a commit or tag, and the trusted keys' files. Samples are what gpg 2.2 and
OpenSSH 9 print through ``git verify-commit --raw``."""

from __future__ import annotations

import base64
import hashlib
import struct

import pytest

from gitsync.source.verify import (
    Verdict,
    format_of,
    judge,
    message,
    parse_gpg_status,
    parse_ssh_line,
    primary_fingerprints,
    signature_of,
    ssh_key_of,
)

ALICE = "4CBBB1D54B869FCD648432443126B74AA43C6F5D"
SUBKEY = "0123456789ABCDEF0123456789ABCDEF01234567"
TRUSTED = frozenset({ALICE})

GOOD = f"""[GNUPG:] NEWSIG
[GNUPG:] KEY_CONSIDERED {ALICE} 0
[GNUPG:] SIG_ID 7Qe7Itx8yUeLQwrOES+UiuXvkb4 2026-12-03 1796280678
[GNUPG:] GOODSIG 3126B74AA43C6F5D Alice <alice@example.com>
[GNUPG:] VALIDSIG {ALICE} 2026-12-03 1796280678 0 4 0 22 8 00 {ALICE}
"""
# signed by a subkey: VALIDSIG's first field is the subkey, its last the primary key
BY_SUBKEY = GOOD.replace(f"VALIDSIG {ALICE}", f"VALIDSIG {SUBKEY}")
OLD = "85CB770E8B93A1A4136B842D45F2639933F16B60"
EXPIRED = f"""[GNUPG:] NEWSIG
[GNUPG:] KEYEXPIRED 1577923200
[GNUPG:] EXPKEYSIG 45F2639933F16B60 Old <old@example.com>
[GNUPG:] VALIDSIG {OLD} 2020-01-01 1577836860 0 4 0 22 8 00 {OLD}
"""
NO_KEY = """[GNUPG:] NEWSIG
[GNUPG:] ERRSIG 005754E773023BC4 22 8 00 1796280696 9 160FC8033B35FD3E355E4629005754E773023BC4
[GNUPG:] NO_PUBKEY 005754E773023BC4
"""
BAD = f"""[GNUPG:] NEWSIG
[GNUPG:] KEY_CONSIDERED {ALICE} 0
[GNUPG:] BADSIG 3126B74AA43C6F5D Alice <alice@example.com>
"""
REVOKED = GOOD.replace("GOODSIG", "REVKEYSIG")
EXPIRED_SIG = GOOD.replace("GOODSIG", "EXPSIG")
UNKNOWN_ALGO = "[GNUPG:] NEWSIG\n[GNUPG:] ERRSIG 005754E773023BC4 99 8 00 1796280696 4 -\n"


@pytest.mark.parametrize(
    ("status", "ok", "reason", "key"),
    [
        (GOOD, True, None, ALICE),
        (BY_SUBKEY, True, None, ALICE),
        (EXPIRED, False, "expired-key", OLD),
        (NO_KEY, False, "untrusted-key", "160FC8033B35FD3E355E4629005754E773023BC4"),
        (BAD, False, "bad-signature", "3126B74AA43C6F5D"),
        (REVOKED, False, "revoked-key", ALICE),
        (EXPIRED_SIG, False, "expired-signature", ALICE),
        (UNKNOWN_ALGO, False, "unverifiable", "005754E773023BC4"),
        ("", False, "unverifiable", ""),
        (GOOD + GOOD, False, "unverifiable", ALICE),  # two signatures
        # GOODSIG without VALIDSIG: never trusted on the key id alone
        (GOOD.split("[GNUPG:] VALIDSIG")[0], False, "unverifiable", "3126B74AA43C6F5D"),
    ],
)
def test_gpg_status(status: str, ok: bool, reason: str | None, key: str) -> None:
    verdict = parse_gpg_status(status, TRUSTED)
    assert (verdict.ok, verdict.reason, verdict.key) == (ok, reason, key)
    assert verdict.format == "openpgp"
    if not ok:
        assert verdict.detail


def test_a_good_signature_by_a_key_outside_the_trusted_set_is_untrusted() -> None:
    verdict = parse_gpg_status(GOOD, frozenset({SUBKEY}))
    assert (verdict.ok, verdict.reason, verdict.key) == (False, "untrusted-key", ALICE)


def test_ssh_output() -> None:
    good = 'Good "git" signature for bob@example.com with ED25519 key SHA256:aRXDs698jIxY\n'
    assert parse_ssh_output_ok(good) == Verdict(
        True, None, "ssh", "SHA256:aRXDs698jIxY", "bob@example.com"
    )
    unknown = 'Good "git" signature with ED25519 key SHA256:o2YjqG0X\nNo principal matched.\n'
    v = judge(SSH_SIG, "commit", 1, unknown, TRUSTED)
    assert (v.ok, v.reason, v.key) == (False, "untrusted-key", "SHA256:o2YjqG0X")
    bad = "Could not verify signature.\nSignature verification failed: incorrect signature\n"
    v = judge(SSH_SIG, "commit", 1, bad, TRUSTED)
    # the key is read from the signature blob: a refused signature still names it
    assert (v.ok, v.reason, v.key) == (False, "bad-signature", SSH_FP)


def parse_ssh_output_ok(text: str) -> Verdict:
    return judge(SSH_SIG, "commit", 0, text, TRUSTED)


def test_git_and_the_reading_of_its_output_must_both_say_good() -> None:
    v = judge(PGP_SIG, "commit", 1, GOOD + "error: something\n", TRUSTED)
    assert (v.ok, v.reason) == (False, "unverifiable")
    assert "git verify-commit failed: error: something" in v.detail
    assert judge(PGP_SIG, "commit", 0, GOOD, TRUSTED).ok


def _sshsig(key_blob: bytes) -> str:
    def string(b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + b

    blob = b"SSHSIG" + struct.pack(">I", 1) + string(key_blob) + string(b"git") + b"rest"
    body = base64.b64encode(blob).decode()
    lines = [body[i : i + 70] for i in range(0, len(body), 70)]
    return "-----BEGIN SSH SIGNATURE-----\n" + "\n".join(lines) + "\n-----END SSH SIGNATURE-----\n"


KEY_BLOB = struct.pack(">I", 11) + b"ssh-ed25519" + struct.pack(">I", 32) + bytes(range(32))
SSH_FP = "SHA256:" + base64.b64encode(hashlib.sha256(KEY_BLOB).digest()).decode().rstrip("=")
SSH_SIG = _sshsig(KEY_BLOB)
PGP_SIG = "-----BEGIN PGP SIGNATURE-----\n\niHUEABYKAB0WIQ\n-----END PGP SIGNATURE-----\n"


def _commit(signature: str | None, header: str = "gpgsig") -> str:
    head = "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n"
    head += "author A <a@x> 1 +0000\ncommitter A <a@x> 1 +0000\n"
    if signature:
        first, *rest = signature.rstrip("\n").split("\n")
        head += f"{header} {first}\n" + "".join(f" {line}\n" for line in rest)
    return head + "\nthe message\n-----BEGIN PGP SIGNATURE-----\nin the message: not a signature\n"


def test_the_signature_of_a_commit_is_its_gpgsig_header_only() -> None:
    assert signature_of(_commit(None), "commit") is None
    assert signature_of(_commit(PGP_SIG), "commit") == PGP_SIG
    assert signature_of(_commit(SSH_SIG, "gpgsig-sha256"), "commit") == SSH_SIG
    assert format_of(PGP_SIG) == "openpgp" and format_of(SSH_SIG) == "ssh"
    assert ssh_key_of(SSH_SIG) == SSH_FP
    assert ssh_key_of("-----BEGIN SSH SIGNATURE-----\n!!!\n-----END SSH SIGNATURE-----\n") == ""
    v = judge(None, "commit", 1, "", TRUSTED)
    assert (v.ok, v.reason) == (False, "unsigned")
    x509 = "-----BEGIN SIGNED MESSAGE-----\nMII\n-----END SIGNED MESSAGE-----\n"
    assert (
        judge(signature_of(_commit(x509), "commit"), "commit", 0, "", TRUSTED).reason
        == "unverifiable"
    )


def test_the_signature_of_a_tag_ends_its_message() -> None:
    head = "object abc\ntype commit\ntag v1\ntagger A <a@x> 1 +0000\n\nv1\n"
    assert signature_of(head, "tag") is None
    assert signature_of(head + PGP_SIG, "tag") == PGP_SIG
    assert signature_of(head + SSH_SIG, "tag") == SSH_SIG


def test_messages_name_the_object_the_key_and_the_reason() -> None:
    v = parse_gpg_status(NO_KEY, TRUSTED)
    assert message("commit", "ab" * 20, "main", v) == (
        f"commit {'ab' * 20} of main not applied: untrusted-key: signed by OpenPGP key "
        "160FC8033B35FD3E355E4629005754E773023BC4, which is not a trusted key"
    )
    good = parse_gpg_status(GOOD.replace("Alice", "Al\x1bice"), TRUSTED)
    text = message("tag", "cd" * 20, "v1", good)
    assert text.startswith(f"tag {'cd' * 20} of v1 is signed by trusted OpenPGP key {ALICE} (Al")
    assert "\x1b" not in text  # a user id is the signer's text: escaped


def test_primary_fingerprints_skip_subkeys() -> None:
    listing = (
        "tru:t:0:0:0:0:0:0\n"
        f"pub:-:255:22:3126B74AA43C6F5D:1796280671:::-:::scSC:::::ed25519:::0:\n"
        f"fpr:::::::::{ALICE}:\n"
        "uid:-::::1796280671::AD66::Alice <alice@example.com>::::::::::0:\n"
        "sub:-:255:18:0123456789ABCDEF:1796280671::::::e:::::cv25519::\n"
        f"fpr:::::::::{SUBKEY}:\n"
    )
    assert primary_fingerprints(listing) == {ALICE}


def test_ssh_key_lines() -> None:
    b64 = base64.b64encode(KEY_BLOB).decode()
    key = parse_ssh_line(f"ssh-ed25519 {b64} bob@example.com", "bob")
    assert not isinstance(key, str)
    assert key.line() == f'bob@example.com namespaces="git" ssh-ed25519 {b64}\n'
    assert key.fingerprint == SSH_FP
    # a comment that is no plain name: the file's name is the principal
    key = parse_ssh_line(f"ssh-ed25519 {b64} two words", "bob")
    assert not isinstance(key, str) and key.principals == "bob"
    line = f'ops@example.com namespaces="git",valid-before="20300101" ssh-ed25519 {b64}'
    key = parse_ssh_line(line, "x")
    # the window is gitsync's to check (at the time of verification), not ssh-keygen's
    assert (
        not isinstance(key, str)
        and key.line() == line.replace(',valid-before="20300101"', "") + "\n"
    )
    assert key.option("valid-before") == "20300101" and key.signs_for("git")
    assert "is not a time" in str(parse_ssh_line(f'x valid-after="soon" ssh-ed25519 {b64}', "x"))
    assert (
        parse_ssh_line("hello world", "x")
        == "neither an SSH public key nor an allowed-signers line"
    )
    assert "not valid base64" in str(parse_ssh_line("ssh-ed25519 !!!", "x"))
    assert "not a ssh-rsa key" in str(parse_ssh_line(f"ssh-rsa {b64}", "x"))


def test_a_refused_commit_is_notified_as_a_failed_sync() -> None:
    from gitsync.daemon.notification import Trigger, from_pass
    from gitsync.engine.changeset import ChangeSet

    reason = f"commit {'ab' * 20} of main not applied: unsigned: the commit carries no signature"
    refused = ChangeSet([], revision="main@sha1:" + "cd" * 20, errors=[reason])
    refused.verification = reason
    n = from_pass("x", refused, None, Trigger("poll"), "2026-12-03T00:00:00Z")
    assert n is not None and (n.event, n.subject) == ("sync.failed", "instance/x")
    assert n.message.splitlines()[-1] == reason
    assert n.details["verification"] == reason and n.details["errors"] == [reason]


def test_a_key_file_with_an_armored_key_and_ssh_lines_gives_both() -> None:
    from gitsync.source.verify import split_key_file

    b64 = base64.b64encode(KEY_BLOB).decode()
    armored = (
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ\n=abcd\n-----END PGP PUBLIC KEY BLOCK-----\n"
    )
    text = f"# ops keys\n{armored}\nops@example.com ssh-ed25519 {b64}\n{armored}"
    blocks, others = split_key_file(text)
    assert blocks == [armored, armored]
    assert others == [(8, f"ops@example.com ssh-ed25519 {b64}")]
    # a block with no end runs to the end of the file; nothing after it is an SSH line
    assert split_key_file(armored[:-35] + "x\n") == ([armored[:-35] + "x\n"], [])


def test_an_ssh_key_is_judged_valid_at_the_time_given() -> None:
    from datetime import UTC, datetime

    from gitsync.source.verify import check_ssh_key, ssh_time

    assert ssh_time("20300101Z") == datetime(2030, 1, 1, tzinfo=UTC)
    assert ssh_time("203001011230Z") == datetime(2030, 1, 1, 12, 30, tzinfo=UTC)
    assert ssh_time("2030") is None and ssh_time("20301399") is None
    b64 = base64.b64encode(KEY_BLOB).decode()
    at = datetime(2026, 6, 1, tzinfo=UTC)
    good = Verdict(True, None, "ssh", SSH_FP, "ops")

    def judged(*options: str) -> str | None:
        keys = [parse_ssh_line(f"ops {o} ssh-ed25519 {b64}", "x") for o in options]
        assert all(not isinstance(k, str) for k in keys)
        return check_ssh_key(good, "", keys, at).reason  # type: ignore[arg-type]

    assert judged('valid-before="20260601Z"') == "expired-key"
    assert judged('valid-before="20260602Z"') is None
    assert judged('valid-after="20260602Z"') == "not-yet-valid"
    assert judged('namespaces="file,git"') is None
    assert judged('namespaces="file"') == "namespace-mismatch"
    # listed twice: the line still valid lets it through
    assert judged('valid-before="20200101Z"', 'valid-after="20250101Z"') is None
