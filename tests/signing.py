"""Real signing keys for the verification tests: OpenPGP keys made by gpg, SSH keys made
by ssh-keygen, each in a temporary directory of the test, and commits and tags signed with
them pushed to a :class:`tests.gitserver.Upstream`."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.gitserver import Upstream

#: a time long past, for a key that expired long ago (made, and signing, while its clock
#: says 2020)
PAST = "20200101T000000"
SIGNED_AT = "20200101T000100"


class Signer:
    """One signing key. ``public`` is what goes into the trusted keys; ``config`` and
    ``env`` make git sign with it."""

    public: Path
    key: str  # the OpenPGP fingerprint or the SSH key file
    ident: str  # the fingerprint gitsync names the key by
    config: tuple[tuple[str, str], ...]
    env: Mapping[str, str]

    def close(self) -> None:
        pass


class GpgSigner(Signer):
    def __init__(self, base: Path, name: str, *, expired: bool = False) -> None:
        self.home = base / f"gnupg-{name}"
        self.home.mkdir(mode=0o700)
        self.env = {"GNUPGHOME": str(self.home)}
        args = ["--faked-system-time", PAST] if expired else []
        # expiring a day after creation: with the faked clock, long expired by now
        self._gpg(*args, "--passphrase", "", "--quick-gen-key", f"{name} <{name}@example.com>",
                  "ed25519", "sign", "1d")  # fmt: skip
        listing = self._gpg("--with-colons", "--list-keys")
        self.key = next(
            line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr")
        )
        self.ident = self.key
        self.public = base / f"{name}.asc"
        self.public.write_text(self._gpg("--armor", "--export", self.key))
        config = [("gpg.format", "openpgp"), ("user.signingkey", self.key)]
        if expired:
            wrapper = base / f"gpg-{name}"
            wrapper.write_text(f'#!/bin/sh\nexec gpg --faked-system-time {SIGNED_AT} "$@"\n')
            wrapper.chmod(0o700)
            config.append(("gpg.program", str(wrapper)))
        self.config = tuple(config)

    def _gpg(self, *args: str) -> str:
        env = {**os.environ, "GNUPGHOME": str(self.home)}
        out = subprocess.run(["gpg", "--batch", "--no-tty", *args], env=env, check=True,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        return out.stdout

    def close(self) -> None:
        # the agent gpg started for this home (signing needs it): ended by its home
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env={**os.environ, **self.env},
                       capture_output=True, timeout=30, check=False)  # fmt: skip


class SshSigner(Signer):
    def __init__(self, base: Path, name: str) -> None:
        self.key = str(base / f"ssh-{name}")
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@example.com",
                        "-f", self.key], check=True, capture_output=True, timeout=30)  # fmt: skip
        self.public = Path(self.key + ".pub")
        self.env = {}
        self.config = (("gpg.format", "ssh"), ("user.signingkey", self.key))
        out = subprocess.run(["ssh-keygen", "-l", "-f", str(self.public)], check=True,
                             capture_output=True, text=True, timeout=30)  # fmt: skip
        self.ident = out.stdout.split()[1]


def _git(upstream: Upstream, signer: Signer | None, *args: str) -> str:
    config = [a for k, v in (signer.config if signer else ()) for a in ("-c", f"{k}={v}")]
    env = {**upstream.env, **(signer.env if signer else {})}
    out = subprocess.run(["git", "-C", str(upstream.work), *config, *args], env=env, check=True,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    return out.stdout.strip()


def commit(
    upstream: Upstream, files: Mapping[str, str | None], signer: Signer | None, message: str = "c"
) -> str:
    """As :meth:`Upstream.commit` (force-pushed to main), signed by ``signer`` (None:
    unsigned); the commit's sha."""
    for rel, text in files.items():
        p = upstream.work / rel
        if text is None:
            p.unlink()
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    _git(upstream, signer, "add", "--all")
    _git(upstream, signer, "commit", "--quiet", "--allow-empty", "-m", message,
         *(["-S"] if signer else []))  # fmt: skip
    _git(upstream, None, "push", "--quiet", "--force", "origin", "HEAD:refs/heads/main")
    return _git(upstream, None, "rev-parse", "HEAD")


def tag(upstream: Upstream, name: str, signer: Signer | None) -> str:
    """An annotated tag of HEAD, signed by ``signer`` (None: unsigned), pushed; its sha."""
    _git(upstream, signer, "tag", "--force", *(["-s"] if signer else ["-a"]), "-m", name, name)
    _git(upstream, None, "push", "--quiet", "--force", "origin", f"refs/tags/{name}")
    return _git(upstream, None, "rev-parse", name)


def keys_dir(base: Path, *signers: Signer) -> Path:
    """A directory of public keys laid out as the kubelet mounts a Secret: the files are
    links into ``..data``, itself a link to a timestamped directory."""
    root = base / "trusted"
    stamp = root / "..2026_01_01_00_00_00.000000001"
    stamp.mkdir(parents=True, exist_ok=True)
    for s in signers:
        (stamp / s.public.name).write_bytes(s.public.read_bytes())
    (root / "..data").symlink_to(stamp.name)
    for s in signers:
        (root / s.public.name).symlink_to(f"..data/{s.public.name}")
    return root


@pytest.fixture
def signers(tmp_path: Path) -> Iterator[dict[str, Signer]]:
    """alice (OpenPGP, trusted in the tests), mallory (OpenPGP, not trusted), old (OpenPGP,
    expired), bob (SSH, trusted), eve (SSH, not trusted)."""
    base = tmp_path / "keys"
    base.mkdir()
    made: dict[str, Signer] = {}
    try:
        made["alice"] = GpgSigner(base, "alice")
        made["mallory"] = GpgSigner(base, "mallory")
        made["old"] = GpgSigner(base, "old", expired=True)
        made["bob"] = SshSigner(base, "bob")
        made["eve"] = SshSigner(base, "eve")
        yield made
    finally:
        for s in made.values():
            s.close()
