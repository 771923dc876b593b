"""A real OpenSSH sshd on loopback serving Git, for the SSH transport tests.

sshd runs in the foreground (``-D -e``) as a child of the test, on a free port of
127.0.0.1, with a configuration, host key and authorized_keys of its own in a temporary
directory: nothing of the host's ssh setup is read or changed. The one key it accepts may
run nothing but ``git-shell`` (so only ``git-upload-pack`` and its kin), and nothing else
of an SSH session (no pty, forwarding or agent). It is stopped by its process id.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.gitserver import free_port, wait_for_port

SSHD = "/usr/sbin/sshd"
# sshd started by root needs its privilege separation directory (made by the service
# unit on a normal host, which does not run here)
_PRIVSEP_DIR = Path("/run/sshd")


def keygen(path: Path, comment: str) -> Path:
    """A new ed25519 key pair at ``path`` (private) and ``path.pub``; returns ``path``."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return path


@dataclass
class SshGit:
    """What a client needs: the URL, a key sshd accepts and a known_hosts vouching for it."""

    url: str
    key: Path
    known_hosts: Path
    port: int
    _dir: Path
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        """sshd's own log (the server side: not gitsync's output)."""
        return self._dir / "sshd.log"

    def start(self) -> None:
        argv = [SSHD, "-D", "-e", "-f", str(self._dir / "sshd_config")]
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        try:
            wait_for_port(self.port, timeout=15)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"sshd did not start: {self.log.read_text()[-2000:]}") from None

    def stop(self) -> None:
        """Stop sshd and its sessions (one process group: it was started in a session)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout=10)
        self._proc = None
        time.sleep(0.1)  # the port is free again for a restart on it


def available() -> bool:
    return os.access(SSHD, os.X_OK) and shutil.which("git-shell") is not None


def sshd_for(repo: Path, directory: Path) -> SshGit:
    """An sshd (not started yet) serving the bare repository ``repo`` by its absolute path
    (``ssh://USER@127.0.0.1:PORT/abs/path``) to this user, who alone it can log in as."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    host_key = keygen(directory / "host_ed25519", "gitsync-test-host")
    client_key = keygen(directory / "client_ed25519", "gitsync-test-client")
    port = free_port()
    user = getpass.getuser()
    forced = 'command="git-shell -c \\"$SSH_ORIGINAL_COMMAND\\"",restrict'
    (directory / "authorized_keys").write_text(
        f"{forced} {client_key.with_suffix('.pub').read_text()}"
    )
    host_pub = host_key.with_suffix(".pub").read_text().split()
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    (directory / "sshd_config").write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                "PidFile none",
                "UsePAM no",
                "StrictModes no",  # the temporary directory's modes are the test's
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                f"AuthorizedKeysFile {directory / 'authorized_keys'}",
                f"AllowUsers {user}",
                "PermitRootLogin prohibit-password",  # the tests may run as root
                "AllowTcpForwarding no",
                "X11Forwarding no",
                "PermitTTY no",
                "LogLevel VERBOSE",
                "",
            ]
        )
    )
    if os.geteuid() == 0:
        _PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    return SshGit(f"ssh://{user}@127.0.0.1:{port}{repo}", client_key, known_hosts, port, directory)
