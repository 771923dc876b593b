"""The ``GITSYNC_*`` environment variables: which ones gitsync reads, and a warning for
one it does not.

click reads a flag's variable and ignores every other, so a misspelt setting
(``GITSYNC_PATH=apps`` for ``GITSYNC_PATH_IN_REPO``) would leave the flag at its default
without a word. The settings are the variables of the commands' flags (:func:`settings`);
the variables of gitsync's own tests, benchmarks and child processes share the prefix and
are not settings, so they are listed here and never warned of.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from typing import Final

import click

from gitsync.errors import printable

PREFIX: Final = "GITSYNC_"

#: read by the tests, the benchmark, the soak and the test environment (Makefile, tests/,
#: bench/, testenv/), never by gitsync: ``make test-sharded`` or ``make faults`` runs
#: gitsync with them set
INTERNAL_PREFIXES: Final = (
    "GITSYNC_TEST_",
    "GITSYNC_TESTENV_",
    "GITSYNC_BENCH_",
    "GITSYNC_SOAK_",
    "GITSYNC_FAULTS",
    "GITSYNC_FUZZ",
)
INTERNAL: Final = frozenset(
    {
        # the daemon's heap tracing (docs/operating.md), a diagnostic and not a flag
        "GITSYNC_TRACEMALLOC_DIR",
        # set by gitsync for its git child's credential prompt (source/gitenv.py)
        "GITSYNC_GIT_HOST",
        "GITSYNC_GIT_TOKEN_FILE",
        # the browser test's
        "GITSYNC_CHROMIUM",
        "GITSYNC_SCREENSHOT",
    }
)


def settings(root: click.Command) -> dict[str, str]:
    """Every flag's variable under ``root``, by the flag's long name (``path`` →
    ``GITSYNC_PATH_IN_REPO``); a name two commands give different variables keeps the
    first."""
    found: dict[str, str] = {}
    for command in _commands(root):
        for param in command.params:
            envvar = param.envvar if isinstance(param, click.Option) else None
            for var in [envvar] if isinstance(envvar, str) else envvar or ():
                found.setdefault(var, param.name or "")
    return found


def unknown(environ: Mapping[str, str], known: Mapping[str, str]) -> list[str]:
    """A warning for each ``GITSYNC_*`` variable of ``environ`` that is neither a setting
    (``known``: variable → flag name, as :func:`settings` gives) nor gitsync's own; with
    the setting it most likely meant, when one is close."""
    by_flag = {flag.upper(): var for var, flag in known.items()}
    warnings = []
    for var in sorted(environ):
        if not var.startswith(PREFIX) or var in known or _internal(var):
            continue
        meant = _meant(var, by_flag, known)
        hint = f" (did you mean {meant}?)" if meant else ""
        warnings.append(f"warning: {printable(var)} is not a gitsync setting and is ignored{hint}")
    return warnings


def _internal(var: str) -> bool:
    return var in INTERNAL or var.startswith(INTERNAL_PREFIXES)


def _meant(var: str, by_flag: Mapping[str, str], known: Iterable[str]) -> str:
    # the flag's own name first: GITSYNC_PATH is --path, whose variable is PATH_IN_REPO
    name = var.removeprefix(PREFIX)
    if name in by_flag:
        return by_flag[name]
    # compared without the prefix, which every name shares and would make any two close
    names = {v.removeprefix(PREFIX): v for v in known}
    close = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.75)
    return names[close[0]] if close else ""


def _commands(root: click.Command) -> Iterator[click.Command]:
    yield root
    if isinstance(root, click.Group):
        for command in root.commands.values():
            yield from _commands(command)
