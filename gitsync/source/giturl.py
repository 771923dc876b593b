"""Git repository URLs: which ones gitsync hands to git, and how any URL is shown.

A URL may carry a secret (``user:token@``, ``?private_token=``), in a well-formed spelling
or not: every message shows URLs through :func:`redact_url`.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from gitsync.errors import ConfigError

SECURE_SCHEMES = ("https", "ssh", "file")
INSECURE_SCHEMES = ("http", "git")  # no authentication of the server, no encryption
SCP_URL = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9][A-Za-z0-9.-]*:(?!//)\S+")
# userinfo in any spelling: "https://u:t@h", "https:/u:t@h", "https:u:t@h", "u:t@h". A known
# scheme is kept (any word before a ":" might be a token: "<token>:x-oauth-basic@h"), the
# rest of the word goes, up to its last "@" (a password may hold an "@" or a "/"): a path
# that holds an "@" is hidden too, which costs a message nothing
_URL_USERINFO = re.compile(r"((?:(?i:https?|ssh|git|file|git\+ssh|ssh\+git):)?/*)[^\s'\"<>]*@")
# a query string or fragment after a URL-ish word: "?private_token=..." (prose ends a "?")
_URL_QUERY = re.compile(r"(?<=[^\s'\"<>?])[?#][^\s'\"<>]+")


def redact_url(text: str) -> str:
    """Hide ``user:password@`` and query strings in every URL of ``text``, in every
    spelling git or a person may use (a well-formed URL or not)."""
    return _URL_QUERY.sub("?***", _URL_USERINFO.sub(r"\1***@", text))


def check_url(url: str, allow_insecure: bool) -> None:
    """Refuse what git must never be handed: embedded secrets, odd transports, options."""
    if not url or url.startswith("-") or any(c.isspace() or ord(c) < 32 for c in url):
        raise ConfigError("the repository URL is empty or contains spaces or control characters")
    if SCP_URL.fullmatch(url):
        return  # user@host:path, i.e. ssh
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if parts.password is not None or (scheme in ("https", "http") and parts.username):
        # the message must not echo the URL: it holds the secret
        raise ConfigError(
            "the repository URL must not contain credentials; give a token file instead"
        )
    if scheme != "file":
        _check_no_hidden_secret(scheme, url.split(":", 1)[1].lstrip("/"))
    if scheme in INSECURE_SCHEMES and not allow_insecure:
        raise ConfigError(
            f"{scheme}:// is neither authenticated nor encrypted; allow it explicitly"
            " (--allow-insecure-git) to use it"
        )
    if scheme not in (*SECURE_SCHEMES, *INSECURE_SCHEMES) or "::" in url.split("/", 1)[0]:
        raise ConfigError(f"unsupported repository URL scheme {scheme!r}")
    if scheme != "file" and not parts.hostname:
        raise ConfigError(f"the repository URL {redact_url(url)!r} has no host")
    if (parts.hostname or "").startswith("-"):  # ssh://-oProxyCommand=...: not a host
        raise ConfigError(f"the repository URL {redact_url(url)!r} has an invalid host")


def _check_no_hidden_secret(scheme: str, rest: str) -> None:
    """Refuse what urlsplit does not see as a credential but git and its helpers would
    still carry on every command line (``git ls-remote URL``, ``git-remote-https URL``,
    readable by any user of the host) and perhaps send: a password holding a "/"
    (``https://u:to/ken@h``: urlsplit reads the host as "u"), and a query string or
    fragment (``?private_token=``). The message never echoes the URL."""
    userinfo = rest[: rest.rfind("@")] if "@" in rest else ""
    if (scheme in ("https", "http") and userinfo) or ":" in userinfo:
        raise ConfigError(
            "the repository URL must not contain credentials; give a token file instead"
        )
    if "?" in rest or "#" in rest:
        raise ConfigError(
            "the repository URL must not contain a query string or fragment (git would show"
            " it on its command line); give a token in a token file instead"
        )
