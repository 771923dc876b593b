"""What git runs with: the environment of every git call, built from an allow-list (nothing
else of gitsync's own environment reaches git), and the configuration that hardens it, so
that neither the user's git configuration nor anything in the repository can add options,
helpers or protocols. Pure: it reads the process environment and writes nothing.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from gitsync.source.giturl import INSECURE_SCHEMES, SECURE_SCHEMES


@dataclass(frozen=True)
class Credentials:
    token_file: Path | None = None
    username: str = "git"
    ssh_key_file: Path | None = None
    known_hosts_file: Path | None = None
    #: CA certificates that sign the Git server's HTTPS certificate (a private CA)
    ca_file: Path | None = None


#: anonymous access (a public repository, or a local one)
NO_CREDENTIALS = Credentials()


# The only variables of gitsync's own environment that git gets: where programs are, and
# the host's proxies (curl's variables, as every HTTP client honours them). No GIT_*
# variable: GIT_PROXY_COMMAND, GIT_SSL_NO_VERIFY, GIT_CONFIG, GIT_EXEC_PATH and the rest
# would each change what git runs or trusts.
ENV_ALLOWED = (
    "PATH",
    "TMPDIR",
    "http_proxy",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
    # the user's ssh-agent, for a CLI user's own keys: ssh reads it, git does not
    "SSH_AUTH_SOCK",
)
# Above the repository's config: even a config that got past the cache checks runs nothing
FORCED_CONFIG = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("credential.helper", ""),  # an empty value clears every helper configured before
)

# git reads these from the repository's own config; ours is written here and nowhere else
REPO_CONFIG = (
    ("core.logAllRefUpdates", "false"),  # no reflog: replaced commits become garbage
    ("gc.autoDetach", "false"),  # a detached gc would outlive the call (a leaked process)
    ("maintenance.autoDetach", "false"),
    ("transfer.fsckObjects", "true"),  # refuse corrupt or malicious objects on fetch
    ("protocol.version", "2"),  # v2 lets us ask for exactly the refs we want
)

ASKPASS = """#!/bin/sh
# git asks "Username for 'https://host': " then "Password for 'https://user@host': ". The
# token is read from its file on every call, so it is never in an argument, a URL or git's
# config; and it is given to the configured host only, never to the target of a redirect.
case "$1" in
  "Username for '"*"://$GITSYNC_GIT_HOST': ") printf '%s\\n' "$GITSYNC_GIT_USERNAME" ;;
  "Password for '"*"@$GITSYNC_GIT_HOST': ") cat -- "$GITSYNC_GIT_TOKEN_FILE" ;;
  *) exit 1 ;;
esac
"""


def environment(
    url: str,
    creds: Credentials,
    repo_dir: Path,
    home: Path,
    timeout: float,
    allow_insecure: bool,
) -> dict[str, str]:
    """The whole environment of every git call on ``url``'s cache repository ``repo_dir``:
    the allow-listed variables of ours, and what hardens git; nothing else."""
    protocols = [*SECURE_SCHEMES, *(INSECURE_SCHEMES if allow_insecure else ())]
    env = {name: os.environ[name] for name in ENV_ALLOWED if name in os.environ}
    env |= {
        # git's messages are matched (a timeout, a missing ref): the same words everywhere
        "LC_ALL": "C",
        "LANGUAGE": "C",
        "GIT_TERMINAL_PROMPT": "0",  # never wait for a human
        "GIT_ALLOW_PROTOCOL": ":".join(protocols),  # no ext::, fd::, or insecure ones
        # the user's and the system's git config must not add helpers, insteadOf
        # rewrites or an sshCommand: HOME is ours and empty, and no global file is read
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        # explicit, so git never searches upwards into a repository around the cache
        "GIT_DIR": str(repo_dir / ".git"),
        "GIT_WORK_TREE": str(repo_dir),
        "GIT_TRACE_REDACT": "1",
        # refs/replace/ could make a checkout read another commit than the one named
        # (and verified): objects are what their hashes say, nothing else
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_SSH_COMMAND": ssh_command(creds, timeout),
        # without a token, any credential prompt fails at once ("false" prints nothing)
        "GIT_ASKPASS": str(home / "askpass.sh") if creds.token_file else "false",
        "SSH_ASKPASS": "false",
    }
    forced = list(FORCED_CONFIG)
    if creds.ca_file is not None:
        # a flag, not GIT_SSL_CAINFO from the environment: what git trusts is said
        # on purpose, never inherited
        forced.append(("http.sslCAInfo", str(creds.ca_file.absolute())))
    env["GIT_CONFIG_COUNT"] = "0"
    add_config(env, forced)
    if creds.token_file is not None:
        # absolute, not resolved: a mounted Secret is a symlink into a timestamped
        # directory that Kubernetes replaces when the Secret rotates
        env["GITSYNC_GIT_TOKEN_FILE"] = str(creds.token_file.absolute())
        env["GITSYNC_GIT_USERNAME"] = creds.username
        env["GITSYNC_GIT_HOST"] = urlsplit(url).netloc
    return env


def add_config(env: dict[str, str], pairs: Sequence[tuple[str, str]]) -> None:
    """Append ``pairs`` to the command-line-level config in ``env`` (GIT_CONFIG_COUNT)."""
    start = int(env.get("GIT_CONFIG_COUNT", "0"))
    for i, (key, value) in enumerate(pairs, start):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    env["GIT_CONFIG_COUNT"] = str(start + len(pairs))


def ssh_command(creds: Credentials, timeout: float) -> str:
    # BatchMode: no prompts; StrictHostKeyChecking=yes: an unknown host key is an error,
    # never silently trusted
    args = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]
    args += ["-o", f"ConnectTimeout={max(1, int(timeout))}"]
    if creds.ssh_key_file is not None:
        args += ["-i", str(creds.ssh_key_file.absolute()), "-o", "IdentitiesOnly=yes"]
    if creds.known_hosts_file is not None:
        args += ["-o", f"UserKnownHostsFile={creds.known_hosts_file.absolute()}"]
    return shlex.join(args)
