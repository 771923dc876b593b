"""How the hostile-input corpus is laid out in a repository, and what each case expects.

A case is the file or directory of that name under ``files/`` (committed), plus whatever
its ``make`` writes at test time: symlinks (Git stores them, but a checkout of this
repository on another system might not), and the huge files and alias bombs, which are
generated rather than committed. In a repository under test the corpus sits at
``apps/corpus/`` next to ``apps/good/``, the MyApps that must load whatever the corpus
holds.
"""

from __future__ import annotations

import posixpath
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

FILES = Path(__file__).parent / "files"
CORPUS = "apps/corpus"
GOOD = "apps/good"


@dataclass(frozen=True)
class Error:
    """One error gitsync must report: the file as it names it (repository-relative), the
    line and column (None where there is none, as for a file refused whole), and a
    fragment of the message."""

    file: str
    line: int | None
    column: int | None
    fragment: str


def at(file: str, line: int | None, column: int | None, fragment: str) -> Error:
    """An :class:`Error` of a corpus file (``../good/victim.yaml`` for a good one)."""
    return Error(posixpath.normpath(f"{CORPUS}/{file}"), line, column, fragment)


@dataclass(frozen=True)
class Case:
    name: str
    #: the class of hostile input, as the promise table counts them
    kind: str
    errors: tuple[Error, ...] = ()
    #: MyApps of the case that are valid and must load (read as kubectl reads them):
    #: name -> fields of the spec they must hold
    accepted: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    #: writes what is not committed into the corpus directory
    make: Callable[[Path], None] | None = None
    #: a good MyApp this case takes away (a second definition makes neither apply)
    conflicts: tuple[str, ...] = ()

    def paths(self) -> list[str]:
        """The case's committed files and directories, relative to ``files/``."""
        return [p.name for p in FILES.iterdir() if p.name in (self.name, f"{self.name}.yaml")]


def lay_out(corpus: Path, cases: list[Case]) -> None:
    """Write ``cases`` into ``corpus`` (``apps/corpus`` of a repository)."""
    corpus.mkdir(parents=True, exist_ok=True)
    for case in cases:
        for rel in case.paths():
            source = FILES / rel
            if source.is_dir():
                shutil.copytree(source, corpus / rel, symlinks=True)
            else:
                shutil.copyfile(source, corpus / rel)
        if case.make is not None:
            case.make(corpus)


def good_apps(namespace: str, names: list[str]) -> dict[str, str]:
    """``apps/good/<name>.yaml`` for each name: plain valid MyApps."""
    return {
        f"{GOOD}/{name}.yaml": (
            "apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata:\n"
            f"  name: {name}\n  namespace: {namespace}\nspec:\n  image: nginx:1.27\n"
            "  replicas: 1\n"
        )
        for name in names
    }
