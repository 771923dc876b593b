"""The releases of gitsync (``release/RELEASES``): each version and its commit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RELEASES = Path(__file__).resolve().parent / "RELEASES"


@dataclass(frozen=True)
class Release:
    version: str
    commit: str

    @property
    def tag(self) -> str:
        return f"v{self.version}"


def releases(text: str | None = None) -> list[Release]:
    """Every release listed, oldest first."""
    out: list[Release] = []
    for n, line in enumerate((text or RELEASES.read_text()).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        version, _, commit = line.partition(" ")
        commit = commit.strip()
        if len(commit) != 40 or not all(c in "0123456789abcdef" for c in commit):
            raise ValueError(f"RELEASES line {n}: {commit!r} is not a full commit sha")
        out.append(Release(version, commit))
    return out


def previous() -> Release:
    """The newest release: what an upgrade to the working tree starts from."""
    return releases()[-1]
