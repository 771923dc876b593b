"""The trusted signing keys, and the check of a commit or tag against them.

The keys (a file, or a directory such as a mounted Secret) are copied into a directory
gitsync makes for itself (``mkdtemp``: mode 0700, this user's): a GNUPGHOME holding only
the trusted OpenPGP public keys, and an allowed-signers file of the trusted SSH keys. Never
the user's keyring, never ``$GNUPGHOME``: git gets its allow-listed environment from
:mod:`gitsync.source.checkout` plus exactly this GNUPGHOME and the ``gpg.*`` settings below. The
files are read again when they change, so a Secret's keys rotate without a restart. The
verdict itself is :mod:`gitsync.source.verify`'s.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from gitsync.errors import ConfigError, VerificationError, quote
from gitsync.source.verify import (
    Mode,
    SshKey,
    Verdict,
    check_ssh_key,
    judge,
    message,
    parse_ssh_line,
    primary_fingerprints,
    reject,
    signature_of,
    split_key_file,
    tag_name_of,
)

log = logging.getLogger(__name__)

#: runs one git command in the repository: (args, extra environment, extra config) →
#: (exit code, stdout, stderr)
GitCall = Callable[
    [Sequence[str], Mapping[str, str], Sequence[tuple[str, str]]], tuple[int, str, str]
]

# trust-model always: which keys are trusted is gitsync's decision (the primary key's
# fingerprint is one of the keys given), not gpg's web of trust, which would want an
# ownertrust for each. Expiry and revocation stay gpg's to check. no-autostart: a
# verification needs no agent, and none may be left running.
_GPG_CONF = """# written by gitsync: verification with the trusted keys only
no-autostart
no-auto-key-retrieve
trust-model always
"""
_MAX_KEY_FILE = 1 << 20


@dataclass(frozen=True)
class Keyring:
    dir: Path
    gpg: str
    fingerprints: frozenset[str] = frozenset()
    ssh: tuple[SshKey, ...] = ()

    @property
    def gnupghome(self) -> Path:
        return self.dir / "gnupg"

    @property
    def allowed_signers(self) -> Path:
        return self.dir / "allowed_signers"

    def git_env(self) -> dict[str, str]:
        return {"GNUPGHOME": str(self.gnupghome)}

    def git_config(self) -> list[tuple[str, str]]:
        return [
            ("gpg.program", self.gpg),
            ("gpg.ssh.program", "ssh-keygen"),
            ("gpg.ssh.allowedSignersFile", str(self.allowed_signers)),
            ("gpg.x509.program", "false"),  # never reached: X.509 is refused before
        ]

    def summary(self) -> str:
        return (
            f"{len(self.fingerprints)} OpenPGP key(s) {', '.join(sorted(self.fingerprints))}"
            f"; {len(self.ssh)} SSH key(s) {', '.join(k.fingerprint for k in self.ssh)}"
        )


class TrustedKeys:
    """The keys at ``path``, as a :class:`Keyring` rebuilt whenever the files change."""

    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self.path = path
        self.timeout = timeout
        self._lock = threading.Lock()
        self._digest = ""
        self._ring: Keyring | None = None
        atexit.register(self.close)

    def current(self) -> Keyring:
        files = self._files()
        digest = hashlib.sha256(repr(files).encode()).hexdigest()
        with self._lock:
            if self._ring is not None and digest == self._digest:
                return self._ring
            ring = self._build(files)
            old, self._ring, self._digest = self._ring, ring, digest
        if old is not None:
            shutil.rmtree(old.dir, ignore_errors=True)
        log.info("trusted signing keys from %s: %s", self.path, ring.summary())
        return ring

    def close(self) -> None:
        with self._lock:
            ring, self._ring, self._digest = self._ring, None, ""
        if ring is not None:
            shutil.rmtree(ring.dir, ignore_errors=True)

    def _files(self) -> list[tuple[str, bytes]]:
        """(name, content) of each key file: the file, or the directory's regular files
        but those whose names start with "." (a mounted Secret's ``..data`` and the like)."""
        try:
            if self.path.is_dir():
                paths = sorted(
                    p for p in self.path.iterdir() if not p.name.startswith(".") and p.is_file()
                )
            else:
                paths = [self.path]
            found = []
            for p in paths:
                with p.open("rb") as f:
                    found.append((p.name, f.read(_MAX_KEY_FILE + 1)))
        except OSError as e:
            raise ConfigError(f"trusted keys {self.path}: {e.strerror}") from None
        for name, content in found:
            if len(content) > _MAX_KEY_FILE:
                raise ConfigError(f"trusted keys {self.path}: {name} is larger than 1 MiB")
        return found

    def _build(self, files: list[tuple[str, bytes]]) -> Keyring:
        pgp: list[tuple[str, bytes]] = []
        ssh: list[SshKey] = []
        for name, content in files:
            if b"PRIVATE KEY" in content:
                # refused rather than copied: a signing key does not belong in gitsync's Pod
                raise ConfigError(f"trusted keys {self.path}: {name} holds a private key")
            if content[:1] >= b"\x80":  # a binary OpenPGP key (gpg --export)
                pgp.append((name, content))
                continue
            blocks, others = split_key_file(content.decode(errors="replace"))
            pgp += [(name, block.encode()) for block in blocks]
            ssh += self._ssh_keys(name, others)
        gpg = shutil.which("gpg") or "gpg"
        home = Path(tempfile.mkdtemp(prefix="gitsync-keys-"))  # 0700, ours
        try:
            # both always exist: git must find an allowed-signers file (even empty) and
            # run gpg in this home (even keyless), never fall back to the user's
            (home / "gnupg").mkdir(mode=0o700)
            _write(home / "gnupg" / "gpg.conf", _GPG_CONF)
            _write(home / "allowed_signers", "".join(k.line() for k in ssh))
            ring = Keyring(home, gpg, self._import(home, gpg, pgp), tuple(ssh))
        except BaseException:
            shutil.rmtree(home, ignore_errors=True)
            raise
        if not ring.fingerprints and not ring.ssh:
            shutil.rmtree(home, ignore_errors=True)
            raise ConfigError(f"trusted keys {self.path}: no OpenPGP or SSH public key found")
        return ring

    def _ssh_keys(self, name: str, lines: list[tuple[int, str]]) -> list[SshKey]:
        keys = []
        stem = name.rsplit(".", 1)[0] or "key"
        for number, line in lines:
            key = parse_ssh_line(line, stem)
            if isinstance(key, str):
                raise ConfigError(f"trusted keys {self.path}: {name}:{number}: {key}")
            keys.append(key)
        return keys

    def _import(self, home: Path, gpg: str, pgp: list[tuple[str, bytes]]) -> frozenset[str]:
        if not pgp:
            return frozenset()
        for name, content in pgp:
            rc, out, err = self._gpg(home, gpg, ["--status-fd", "1", "--import"], content)
            if "IMPORT_OK" not in out:
                why = "; ".join(err.split("\n")[:3]) or f"gpg exited {rc}"
                raise ConfigError(
                    f"trusted keys {self.path}: {name}: no public key imported: {why}"
                )
        rc, out, err = self._gpg(home, gpg, ["--with-colons", "--fixed-list-mode", "--list-keys"])
        if rc != 0:
            raise ConfigError(f"trusted keys {self.path}: gpg --list-keys failed: {err.strip()}")
        return primary_fingerprints(out)

    def _gpg(
        self, home: Path, gpg: str, args: list[str], stdin: bytes = b""
    ) -> tuple[int, str, str]:
        # only PATH of gitsync's environment: GNUPGHOME and gpg's options are ours
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
        env["GNUPGHOME"] = str(home / "gnupg")
        try:
            proc = subprocess.run(
                [gpg, "--batch", "--no-tty", *args],
                input=stdin,
                env=env,
                capture_output=True,
                timeout=self.timeout,
                umask=0o077,
            )
        except OSError as e:
            raise ConfigError(f"OpenPGP keys need gpg: {e.strerror}") from None
        except subprocess.TimeoutExpired:
            raise ConfigError(f"gpg timed out after {self.timeout:g}s") from None
        return (
            proc.returncode,
            proc.stdout.decode(errors="replace"),
            proc.stderr.decode(errors="replace"),
        )


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


@dataclass
class Verifier:
    """``--verify-commits``: the commit at the ref (``mode`` commit), or the annotated tag
    the ref names (``mode`` tag), must carry a good signature by a trusted key."""

    keys: TrustedKeys
    mode: Mode = "commit"
    #: apply a signed commit that does not descend from the last applied one (logged)
    allow_non_fast_forward: bool = False
    #: ``--tip-keys``: the only keys that may sign what the ref names (None: ``keys``).
    #: Descent alone does not tell a merged commit from one of a branch never merged that
    #: forks at the applied commit; who signed it can, when only a release or merge key
    #: signs what lands on the ref
    tip_keys: TrustedKeys | None = None

    def check(
        self, git: GitCall, ref: str, remote_ref: str, commit: str, obj: str, *, tip: bool = True
    ) -> str:
        """The good verdict in words, else :class:`VerificationError`. ``commit`` is the sha
        that will be checked out, ``obj`` what the remote ref names (a tag object for an
        annotated tag): objects named by their hashes, so what is checked is what is read.
        ``tip``: what the ref names now, held to the tip keys; else a pin, which a key of
        either set may have signed."""
        kind: Mode = self.mode
        target = commit
        verdict: Verdict | None = None
        if kind == "tag":
            target = obj
            if not remote_ref.startswith("refs/tags/"):
                verdict = reject("unsigned", f"{ref} is not a tag; --verify tag needs a signed tag")
            elif obj == commit:
                verdict = reject("unsigned", "a lightweight tag, which cannot carry a signature")
        if verdict is None:
            tag = remote_ref.removeprefix("refs/tags/")
            if tip and self.tip_keys is not None:
                verdict = self._verdict(git, kind, target, tag, self.tip_keys)
                if verdict.reason == "untrusted-key":
                    verdict = replace(
                        verdict,
                        detail=f"{verdict.detail.removesuffix(', which is not a trusted key')}"
                        f", which is not a key that may sign the tip of {quote(ref)} (--tip-keys)",
                    )
            else:
                verdict = self._verdict(git, kind, target, tag, self.keys)
                if not tip and verdict.reason == "untrusted-key" and self.tip_keys is not None:
                    verdict = self._verdict(git, kind, target, tag, self.tip_keys)
        if verdict.ok and kind == "tag":
            # the tag's own hash names its target: it peels to the commit checked out
            rc, peeled, _ = git(["rev-parse", "--verify", f"{target}^{{commit}}"], {}, [])
            if rc != 0 or peeled.strip() != commit:
                verdict = reject("unverifiable", f"tag {target} does not point at {commit}")
        text = message(kind, target, ref, verdict)
        if not verdict.ok:
            raise VerificationError(
                text, reason=verdict.reason or "unverifiable", sha=target, key=verdict.key
            )
        return text

    def _verdict(
        self, git: GitCall, kind: Mode, target: str, tag: str, keys: TrustedKeys
    ) -> Verdict:
        try:
            ring = keys.current()
        except ConfigError as e:
            return reject("unverifiable", f"no trusted keys to check with: {e}")
        rc, raw, err = git(["cat-file", kind, target], {}, [])
        if rc != 0:
            return reject("unverifiable", f"cannot read {kind} {target}: {err.strip()[:200]}")
        signature = signature_of(raw, kind)
        if signature is None:
            return judge(None, kind, 0, "", ring.fingerprints)
        rc, _, err = git([f"verify-{kind}", "--raw", target], ring.git_env(), ring.git_config())
        verdict = judge(signature, kind, rc, err, ring.fingerprints)
        if verdict.format == "ssh":
            verdict = check_ssh_key(verdict, signature, ring.ssh, datetime.now(UTC))
        if verdict.ok and kind == "tag" and tag_name_of(raw) != tag:
            # the signature covers the tag's own name, not the ref's: a signed "v1.0"
            # pushed as refs/tags/prod would otherwise pass as a signed "prod"
            return Verdict(
                False,
                "tag-mismatch",
                verdict.format,
                verdict.key,
                verdict.signer,
                f"the signed tag is named {quote(tag_name_of(raw))}, not {quote(tag)}"
                f" (signed by {verdict.describe()})",
            )
        return verdict


def verifier_of(options: Mapping[str, object]) -> Verifier | None:
    """The verifier the command-line options ask for (``verify_commits``, ``verify``,
    ``trusted_keys``), with its keys read once here: a missing or bad key file stops the
    command before anything starts."""
    keys = options.get("trusted_keys")
    tip_keys = options.get("tip_keys")
    mode = options.get("verify")
    if not options.get("verify_commits") and mode is None:
        for flag, given in (("--trusted-keys", keys), ("--tip-keys", tip_keys)):
            if given:
                # never silently unverified: keys alone are most likely a forgotten flag
                raise ConfigError(f"{flag} is given without --verify-commits")
        return None
    if not isinstance(keys, Path):
        raise ConfigError("--verify-commits needs --trusted-keys (a file or directory of keys)")
    timeout = options.get("git_timeout")
    seconds = float(timeout) if isinstance(timeout, int | float) else 30.0
    trusted = TrustedKeys(keys, seconds)
    trusted.current()
    tip = TrustedKeys(tip_keys, seconds) if isinstance(tip_keys, Path) else None
    if tip is not None:
        tip.current()
    allow = bool(options.get("allow_non_fast_forward"))
    if allow:
        log.warning(
            "--allow-non-fast-forward: a signed commit is applied even when it does not"
            " descend from the last applied one (a rewind or a jump sideways)"
        )
    return Verifier(trusted, "tag" if mode == "tag" else "commit", allow, tip)
