"""gitsync's own exception tree.

Library exceptions (git's, kubernetes', PyYAML's) are mapped into these at the
boundary and never leak. Every error names what it is about (an object such as
``MyApp/ns/name``, or a file and line) and says whether retrying can help.
"""

from __future__ import annotations

import re

MAX_BODY = 512  # API error bodies are truncated so that nothing large or secret is logged
#: untrusted strings longer than this are cut in messages: one line stays one readable line
MAX_QUOTED = 200


def quote(value: object, limit: int = MAX_QUOTED) -> str:
    """An untrusted string (a file name, a YAML key or value, a name from Git, a ref, a
    header) as it may appear in a message or log line: repr-style, so that a newline,
    a control or invisible character, or a quote cannot forge or hide output lines; cut
    after ``limit`` characters, saying how long it was.
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} characters)"


def one_line(text: str, limit: int = 300) -> str:
    """A message that quotes what it got from elsewhere (a parser's problem, an API
    server's answer) as one line: control and invisible characters escaped, cut."""
    return printable(text if len(text) <= limit else text[:limit] + "…")


def printable(text: str) -> str:
    """``text`` with control and invisible characters escaped (``\\n``, ``\\x1b``,
    ``\\u202e``): what a line of output may hold, so that none can forge or hide another."""
    return (
        text
        if text.isprintable()
        else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    )


# what a path or field name may hold and still be printed bare: no space, colon, quote,
# bracket or control character, so it can neither end the location nor start a new line
_PLAIN = re.compile(r"[A-Za-z0-9._/@+=,~-]{1,200}")


def plain_or_quote(value: str) -> str:
    """``value`` bare when it is a plain name (``apps/web.yaml``, ``spec.env``), else
    :func:`quote` d: locations read as usual, and a hostile one still cannot forge lines."""
    return value if _PLAIN.fullmatch(value) else quote(value)


class GitsyncError(Exception):
    """Base of every error gitsync raises on purpose."""

    #: a temporary error is retried with backoff; a permanent one waits for a change
    temporary: bool = False


class ConfigError(GitsyncError):
    """Invalid flags, environment or files given to gitsync."""


class SourceError(GitsyncError):
    """Fetching or reading the Git source failed."""

    temporary = True


class ManifestError(GitsyncError):
    """One manifest is invalid. Names file, document index, line and field."""

    def __init__(
        self,
        file: str,
        message: str,
        *,
        document: int | None = None,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file = file
        self.document = document
        self.line = line
        self.column = column
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        # the file name comes from Git: quoted when it is not a plain path
        where = plain_or_quote(self.file) if self.file else ""
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        if self.document is not None:
            where += f" (document {self.document})"
        what = f"{self.field}: {self.message}" if self.field else self.message
        return f"{where}: {what}" if where else what


class APIError(GitsyncError):
    """The Kubernetes API server refused or failed a request."""

    def __init__(self, subject: str, message: str, *, status: int = 0, reason: str = "") -> None:
        self.subject = subject
        self.status = status
        self.reason = reason
        # the body is the server's, and may echo what a request carried: one line, cut
        self.message = one_line(message, MAX_BODY)
        super().__init__(f"{subject}: {self.message}")


class APIClientError(APIError):
    """4xx: the request itself is wrong; retrying the same request will not help."""


class APIConfigError(APIClientError):
    """The client's configuration does not fit the server: its certificate is not
    trusted, or the credentials are refused (401). Retrying will not help."""


class APINotFoundError(APIClientError):
    """404: the object, or its kind, does not exist."""


class APIForbiddenError(APIClientError):
    """403: RBAC denies the request."""


class APIInvalidError(APIClientError):
    """422: the object fails validation; ``causes`` holds the field messages."""

    def __init__(self, subject: str, message: str, causes: list[str], **kw: int | str) -> None:
        self.causes = causes
        super().__init__(subject, message, **kw)  # type: ignore[arg-type]


class APIConflictError(APIClientError):
    """409: an apply conflict (``conflicts`` names managers and fields) or a stale write."""

    temporary = True

    def __init__(self, subject: str, message: str, conflicts: list[str], **kw: int | str) -> None:
        self.conflicts = conflicts
        super().__init__(subject, message, **kw)  # type: ignore[arg-type]


class APITooManyRequestsError(APIError):
    """429: throttled; ``retry_after`` is the server's hint in seconds."""

    temporary = True

    def __init__(self, subject: str, message: str, retry_after: float, **kw: int | str) -> None:
        self.retry_after = retry_after
        super().__init__(subject, message, **kw)  # type: ignore[arg-type]


class APIServerError(APIError):
    """5xx: the server failed; try again later."""

    temporary = True


class APITimeoutError(APIError):
    """No answer in time, or the connection failed; try again later."""

    temporary = True


class OwnershipError(GitsyncError):
    """An object gitsync would create already exists and is not gitsync's: it is
    never taken over (its owner might lose it to the garbage collector later)."""


class VerificationError(GitsyncError):
    """The commit (or tag) at the ref is not signed by a trusted key: it is not applied.
    Retrying the same commit cannot help; a signed commit (or a key added) will."""

    def __init__(self, message: str, *, reason: str, sha: str, key: str = "") -> None:
        self.reason = reason
        self.sha = sha
        self.key = key
        super().__init__(message)
