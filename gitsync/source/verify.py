"""Signature verification, the pure part: what a commit or tag carries, what the verifier
said about it, and the verdict. No process is run here (:mod:`gitsync.source.keyring` does that).

Why ``git verify-commit --raw`` (and ``verify-tag --raw``) rather than ``git log
--format=%G?``: with ``--raw`` git passes on the verifier's own output. For OpenPGP that is
gpg's ``--status-fd`` protocol (GnuPG's doc/DETAILS): one keyword per line, meant for
programs, stable across versions, and it tells apart what ``%G?`` folds together or maps
through gpg's web of trust (``U`` means "good, but gpg's trust model has no opinion", which
depends on ownertrust, not on our trusted set). ``VALIDSIG`` names the primary key's full
fingerprint, which is what the trusted set is checked against. ``%G?`` also says ``N``
(unsigned) for an SSH signature when no allowed-signers file is configured, so whether an
object is signed at all is read here from the object itself. For SSH, git's ``--raw`` output
is ssh-keygen's, whose one "Good signature" line git itself parses; the key's fingerprint is
read from the signature blob, so even a rejected signature names its key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

Mode = Literal["commit", "tag"]
Format = Literal["openpgp", "ssh", "x509"]
Reason = Literal[
    "unsigned",
    "bad-signature",
    "untrusted-key",
    "expired-key",
    "expired-signature",
    "revoked-key",
    "not-yet-valid",
    "namespace-mismatch",
    "tag-mismatch",
    "not-a-descendant",
    "unverifiable",
]

_BEGIN: dict[str, Format] = {
    "-----BEGIN PGP SIGNATURE-----": "openpgp",
    "-----BEGIN PGP MESSAGE-----": "openpgp",  # git accepts this armor for OpenPGP too
    "-----BEGIN SSH SIGNATURE-----": "ssh",
    "-----BEGIN SIGNED MESSAGE-----": "x509",
}
#: the key types ssh-keygen signs with (``-Y sign``)
SSH_KEY_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
    }
)


@dataclass(frozen=True)
class Verdict:
    """What the verification of one object concluded. ``key``: the full fingerprint when
    known (OpenPGP hex, SSH ``SHA256:…``), else the key id; ``signer``: the user id or
    principal; ``detail``: why, in words, when not ``ok``."""

    ok: bool
    reason: Reason | None = None
    format: Format | None = None
    key: str = ""
    signer: str = ""
    detail: str = ""

    def describe(self) -> str:
        """The key and signer, as a message names them."""
        what = {"openpgp": "OpenPGP key", "ssh": "SSH key", "x509": "X.509 key"}.get(
            self.format or "", "key"
        )
        who = f" ({_printable(self.signer)})" if self.signer else ""
        return f"{what} {self.key}{who}" if self.key else ""


def reject(reason: Reason, detail: str, fmt: Format | None = None, key: str = "") -> Verdict:
    return Verdict(False, reason, fmt, key, detail=detail)


def message(kind: Mode, sha: str, ref: str, verdict: Verdict) -> str:
    """One line naming the object, the key and the reason: for the log, the status
    ConfigMap, the Event and the command line."""
    if verdict.ok:
        return f"{kind} {sha} of {ref} is signed by trusted {verdict.describe()}"
    return f"{kind} {sha} of {ref} not applied: {verdict.reason}: {verdict.detail}"


# --- the signature an object carries ----------------------------------------------------


def signature_of(raw: str, kind: Mode) -> str | None:
    """The armored signature in a raw commit (``gpgsig`` header) or tag (appended to the
    message), or None when there is none."""
    if kind == "commit":
        header, _, _ = raw.partition("\n\n")
        lines: list[str] = []
        for line in header.split("\n"):
            if lines and line.startswith(" "):
                lines.append(line[1:])
            elif lines:
                break
            elif line.startswith(("gpgsig ", "gpgsig-sha256 ")):
                lines.append(line.split(" ", 1)[1])
        return "\n".join(lines) + "\n" if lines else None
    # a tag: git takes the last line that starts a signature, to the end
    starts = [m.start() for m in re.finditer(r"^-----BEGIN [A-Z ]+-----$", raw, re.M)]
    for start in reversed(starts):
        if raw[start:].split("\n", 1)[0] in _BEGIN:
            return raw[start:]
    return None


def tag_name_of(raw: str) -> str:
    """The name a raw tag object gives itself (its ``tag`` header), or "" when none."""
    header, _, _ = raw.partition("\n\n")
    for line in header.split("\n"):
        if line.startswith("tag "):
            return line[4:]
    return ""


def format_of(signature: str) -> Format | None:
    return _BEGIN.get(signature.strip().split("\n", 1)[0])


def ssh_key_of(signature: str) -> str:
    """The ``SHA256:`` fingerprint of the public key an SSH signature names, or "" when the
    blob cannot be read (the signature is then bad anyway)."""
    fields = _sshsig_fields(signature)
    return fingerprint_of(fields[0]) if fields and fields[0] else ""


def ssh_namespace_of(signature: str) -> str | None:
    """The namespace an SSH signature was made for (git signs for "git"), or None when
    the blob cannot be read."""
    fields = _sshsig_fields(signature)
    return fields[1].decode(errors="replace") if len(fields) > 1 else None


def _sshsig_fields(signature: str) -> list[bytes]:
    """The public key and namespace of an SSH signature blob (PROTOCOL.sshsig: "SSHSIG",
    uint32 version, string publickey, string namespace, …), as far as they can be read."""
    body = "".join(
        line.strip() for line in signature.strip().split("\n")[1:] if not line.startswith("-----")
    )
    try:
        blob = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return []
    if not blob.startswith(b"SSHSIG") or len(blob) < 14:
        return []
    fields: list[bytes] = []
    at = 10
    while len(fields) < 2 and at + 4 <= len(blob):
        (size,) = struct.unpack(">I", blob[at : at + 4])
        value = blob[at + 4 : at + 4 + size]
        if len(value) != size:
            break
        fields.append(value)
        at += 4 + size
    return fields


def fingerprint_of(key_blob: bytes) -> str:
    """ssh-keygen's fingerprint of a public key blob."""
    digest = base64.b64encode(hashlib.sha256(key_blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


# --- gpg's status lines ------------------------------------------------------------------


def parse_gpg_status(status: str, trusted: frozenset[str]) -> Verdict:
    """The verdict of gpg's ``--status-fd`` output for one signature.

    Good only with exactly one signature, a ``GOODSIG`` and a ``VALIDSIG`` whose primary
    key fingerprint is in ``trusted``: the private keyring holds only trusted keys, and this
    check keeps that true whatever else gpg might know."""
    fields = [line[9:].split(" ") for line in status.splitlines() if line.startswith("[GNUPG:] ")]
    seen: dict[str, list[str]] = {}
    for f in fields:
        seen.setdefault(f[0], f[1:])
    key = ""
    signer = ""
    for word in ("GOODSIG", "EXPKEYSIG", "EXPSIG", "REVKEYSIG", "BADSIG", "ERRSIG"):
        if seen.get(word):
            key = seen[word][0]
            signer = " ".join(seen[word][1:]) if word != "ERRSIG" else ""
            break
    if seen.get("VALIDSIG"):
        valid = seen["VALIDSIG"]
        key = (valid[9] if len(valid) > 9 else valid[0]).upper()

    def no(reason: Reason, detail: str) -> Verdict:
        return Verdict(False, reason, "openpgp", key, signer, detail)

    if sum(1 for f in fields if f[0] == "NEWSIG") > 1:
        return no("unverifiable", "more than one signature (gitsync checks exactly one)")
    if "BADSIG" in seen:
        return no("bad-signature", f"the signature by OpenPGP key {key} does not match the content")
    if "ERRSIG" in seen:
        err = seen["ERRSIG"]
        if "NO_PUBKEY" in seen or (len(err) > 5 and err[5] == "9"):
            fpr = err[6] if len(err) > 6 and err[6] != "-" else key
            return Verdict(
                False,
                "untrusted-key",
                "openpgp",
                fpr.upper(),
                detail=f"signed by OpenPGP key {fpr.upper()}, which is not a trusted key",
            )
        code = err[5] if len(err) > 5 else "?"
        return no("unverifiable", f"gpg could not check the signature (ERRSIG code {code})")
    if "REVKEYSIG" in seen:
        return no("revoked-key", f"signed by OpenPGP key {key}, which is revoked")
    if "EXPKEYSIG" in seen:
        return no("expired-key", f"signed by OpenPGP key {key}, which has expired")
    if "EXPSIG" in seen:
        return no("expired-signature", f"the signature by {key} has expired")
    if "GOODSIG" not in seen or "VALIDSIG" not in seen:
        return no("unverifiable", "gpg reported no good signature")
    if key not in trusted:
        return no("untrusted-key", f"signed by OpenPGP key {key}, which is not a trusted key")
    return Verdict(True, None, "openpgp", key, signer)


def parse_ssh_output(output: str, key: str) -> Verdict:
    """The verdict of ssh-keygen's output as git passes it on: "Good "git" signature for
    PRINCIPAL with TYPE key FP" names a key of the allowed-signers file; "… signature with
    TYPE key FP" (no principal) a good signature by a key that is not in it."""
    for line in output.splitlines():
        good = re.match(r'Good "git" signature for (.+) with \S+ key (SHA256:\S+)$', line)
        if good:
            return Verdict(True, None, "ssh", good.group(2), good.group(1))
        unknown = re.match(r'Good "git" signature with \S+ key (SHA256:\S+)$', line)
        if unknown:
            return reject(
                "untrusted-key",
                f"signed by SSH key {unknown.group(1)}, which is not a trusted key",
                "ssh",
                unknown.group(1),
            )
    who = f" by SSH key {key}" if key else ""
    return reject("bad-signature", f"the signature{who} does not match the content", "ssh", key)


def judge(
    signature: str | None, kind: Mode, rc: int, output: str, trusted: frozenset[str]
) -> Verdict:
    """The verdict from the object's signature, and git verify-commit/-tag's exit code and
    output. Good only when both git (exit 0) and our reading of the output say so."""
    if signature is None:
        return reject("unsigned", f"the {kind} carries no signature")
    fmt = format_of(signature)
    if fmt is None or fmt == "x509":
        return reject(
            "unverifiable", f"a {fmt or 'unknown'} signature (gitsync checks OpenPGP and SSH)", fmt
        )
    if fmt == "openpgp":
        verdict = parse_gpg_status(output, trusted)
    else:
        verdict = parse_ssh_output(output, ssh_key_of(signature))
    if verdict.ok and rc != 0:
        other = "; ".join(line for line in output.splitlines() if not line.startswith("[GNUPG:]"))
        return Verdict(
            False,
            "unverifiable",
            fmt,
            verdict.key,
            verdict.signer,
            f"git verify-{kind} failed: {_printable(other)[:300] or 'exit ' + str(rc)}",
        )
    return verdict


# --- the trusted keys ----------------------------------------------------------------------


def primary_fingerprints(listing: str) -> frozenset[str]:
    """The primary keys' fingerprints in ``gpg --with-colons --list-keys`` output (the
    ``fpr`` record right after each ``pub``; those after ``sub`` are subkeys')."""
    found: set[str] = set()
    after_pub = False
    for line in listing.splitlines():
        rec = line.split(":")
        if rec[0] == "pub":
            after_pub = True
        elif rec[0] == "fpr" and after_pub and len(rec) > 9:
            found.add(rec[9].upper())
            after_pub = False
        elif rec[0] in ("sub", "uid"):
            after_pub = False
    return frozenset(found)


@dataclass(frozen=True)
class SshKey:
    """One line of the allowed-signers file gitsync writes."""

    principals: str
    options: str
    keytype: str
    blob: str

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(base64.b64decode(self.blob))

    def line(self) -> str:
        """The allowed-signers line, without valid-after and valid-before: ssh-keygen
        would check those against the commit's date, which the signer chooses; gitsync
        checks them against the time of verification instead (:func:`check_ssh_key`)."""
        kept = [o for o in _options(self.options) if o[0] not in _WINDOW]
        options = ",".join(k if v is None else f'{k}="{v}"' for k, v in kept)
        return f"{self.principals} {options or _GIT_ONLY} {self.keytype} {self.blob}\n"

    def option(self, name: str) -> str | None:
        return next((v for k, v in _options(self.options) if k.lower() == name), None)

    def signs_for(self, namespace: str) -> bool:
        allowed = self.option("namespaces")
        return allowed is None or namespace in allowed.split(",")


_GIT_ONLY = 'namespaces="git"'
_WINDOW = frozenset({"valid-after", "valid-before"})
_OPTION = re.compile(r'([A-Za-z-]+)(?:="([^"]*)")?(?:,|$)')


def _options(options: str) -> list[tuple[str, str | None]]:
    return [(m.group(1), m.group(2)) for m in _OPTION.finditer(options) if m.group(0)]


def ssh_time(text: str) -> datetime | None:
    """A valid-after/valid-before time as ssh-keygen reads it: YYYYMMDD[HHMM[SS]], in UTC
    with a trailing Z, else local time; None when it is not one."""
    digits = text[:-1] if text[-1:] in ("Z", "z") else text
    form = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S"}.get(len(digits))
    if form is None or not digits.isdigit():
        return None
    try:
        t = datetime.strptime(digits, form)  # naive: its zone is set below
    except ValueError:
        return None
    return t.replace(tzinfo=UTC) if digits != text else t.astimezone()


def check_ssh_key(
    verdict: Verdict, signature: str, keys: Sequence[SshKey], at: datetime
) -> Verdict:
    """The verdict on an SSH signature, with what ssh-keygen is not asked (or not able) to
    judge: the signature's namespace must be "git", and the trusted key must allow that
    namespace and be valid at ``at``, the time of verification, as an OpenPGP key's expiry
    is checked (not at the commit's date, which whoever signs sets). A key listed on
    several lines passes if one of them allows it."""
    key = verdict.key
    namespace = ssh_namespace_of(signature)
    if namespace is not None and namespace != "git":
        return reject(
            "namespace-mismatch",
            f"the signature by SSH key {key} is for namespace {_printable(namespace)!r}, not 'git'",
            "ssh",
            key,
        )
    mine = [k for k in keys if k.fingerprint == key]
    if not mine:
        return verdict
    for_git = [k for k in mine if k.signs_for("git")]
    if not for_git:
        return reject(
            "namespace-mismatch",
            f"SSH key {key} is trusted only for namespaces {mine[0].option('namespaces')!r}",
            "ssh",
            key,
        )
    if any(_within(k, at) is None for k in for_git):
        return verdict
    expired = [k for k in for_git if _within(k, at) == "expired-key"]
    if expired:
        return reject(
            "expired-key",
            f"signed by SSH key {key}, which is valid only before"
            f" {expired[0].option('valid-before')} (valid-before)",
            "ssh",
            key,
        )
    return reject(
        "not-yet-valid",
        f"signed by SSH key {key}, which is valid only after"
        f" {for_git[0].option('valid-after')} (valid-after)",
        "ssh",
        key,
    )


def _within(key: SshKey, at: datetime) -> Reason | None:
    """None when ``key`` is valid at ``at``, else why not."""
    before, after = key.option("valid-before"), key.option("valid-after")
    if before is not None and (t := ssh_time(before)) is not None and at >= t:
        return "expired-key"
    if after is not None and (t := ssh_time(after)) is not None and at < t:
        return "not-yet-valid"
    return None


_ARMOR_BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
_ARMOR_END = "-----END PGP PUBLIC KEY BLOCK-----"


def split_key_file(text: str) -> tuple[list[str], list[tuple[int, str]]]:
    """The armored OpenPGP key blocks of a trusted-keys file, and its other lines with
    their numbers (blank and ``#`` lines left out), for the SSH keys. A file may hold both,
    as git's own configuration may name both kinds of key: every line outside an armored
    block is read as an SSH key, so none is dropped unread. A block with no end runs to the
    end of the file (gpg then says what is wrong with it)."""
    blocks: list[str] = []
    others: list[tuple[int, str]] = []
    block: list[str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if block is not None:
            block.append(line)
            if line.strip() == _ARMOR_END:
                blocks.append("\n".join(block) + "\n")
                block = None
        elif line.strip() == _ARMOR_BEGIN:
            block = [line]
        elif line.strip() and not line.lstrip().startswith("#"):
            others.append((number, line))
    if block is not None:
        blocks.append("\n".join(block) + "\n")
    return blocks, others


_PRINCIPAL = re.compile(r"[A-Za-z0-9._@+-]{1,100}")


def parse_ssh_line(line: str, default_principal: str) -> SshKey | str:
    """A public key line (``TYPE BASE64 [COMMENT]``, as in a ``.pub`` file) or an
    allowed-signers line (``PRINCIPALS [OPTIONS] TYPE BASE64``); else why not (a str)."""
    tokens = line.split()
    at = next((i for i, t in enumerate(tokens) if t in SSH_KEY_TYPES), None)
    if at is None or at + 1 >= len(tokens):
        return "neither an SSH public key nor an allowed-signers line"
    keytype, b64 = tokens[at], tokens[at + 1]
    try:
        blob = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        return f"the {keytype} key is not valid base64"
    (size,) = struct.unpack(">I", blob[:4]) if len(blob) >= 4 else (0,)
    if blob[4 : 4 + size].decode(errors="replace") != keytype:
        return f"the key's content is not a {keytype} key"
    if at == 0:
        comment = " ".join(tokens[2:])
        principal = comment if _PRINCIPAL.fullmatch(comment) else default_principal
        return SshKey(principal, _GIT_ONLY, keytype, b64)
    options = " ".join(tokens[1:at]) or _GIT_ONLY
    for name, value in _options(options):
        if name.lower() in _WINDOW and (value is None or ssh_time(value) is None):
            return f"{name}={value!r} is not a time (YYYYMMDD[HHMM[SS]][Z])"
    return SshKey(tokens[0], options, keytype, b64)


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
