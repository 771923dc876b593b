"""The commands' flags as one typed value: every flag has its field, and a field's default
is the flag's."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click
import pytest

from gitsync.cli.blame import blame_command
from gitsync.cli.diff import diff
from gitsync.cli.drift import drift
from gitsync.cli.flags import Flags, parse, parse_run
from gitsync.cli.run import run
from gitsync.cli.sync import sync
from gitsync.cli.validate import validate

#: what the commands take as parameters of their own, not through parse
OWN = {"output", "color"}


def defaults(command: click.Command, *args: str) -> dict[str, Any]:
    """The keyword arguments click calls ``command`` with, given ``args``."""
    ctx = command.make_context(command.name or "", list(args), resilient_parsing=True)
    return {k: v for k, v in ctx.params.items() if k not in OWN}


@pytest.mark.parametrize("command", [validate, sync, diff, drift], ids=lambda c: c.name)
def test_every_flag_of_a_command_has_a_field(command: click.Command) -> None:
    flags = parse(defaults(command))
    assert isinstance(flags, Flags)


def test_every_flag_of_run_has_a_field() -> None:
    flags, own = parse_run(defaults(run))
    assert (flags.repo, own.webhook_secret, own.notify_url) == ("", b"", ())


def test_blame_reads_the_cluster_flags() -> None:
    kw = defaults(blame_command, "shop/web", "--context", "kind")
    cluster = {k: kw[k] for k in ("kubeconfig", "context")}
    assert (parse(cluster).kubeconfig, parse(cluster).context) == (None, "kind")


def test_a_field_defaults_as_its_flag() -> None:
    given = asdict(parse(defaults(sync, "--repo", "r")))
    bare = asdict(parse({"repo": "r"}))
    # --denied-namespaces is kube-* unless told otherwise; a Flags without the flag (a
    # command that loads nothing) denies nothing
    assert {k for k in given if given[k] != bare[k]} == {"denied_namespaces"}
    assert given["denied_namespaces"][0] == "kube-*"


def test_a_flag_without_a_field_is_an_error() -> None:
    with pytest.raises(TypeError, match="flags without a field in Flags: new_flag"):
        parse({"repo": "r", "new_flag": 1})


@pytest.mark.parametrize(
    ("kw", "allowed", "forced", "ref_given"),
    [
        ({}, None, ("kubectl", "before-first-apply"), False),
        ({"allowed_namespaces": " shop, ,blog "}, {"shop", "blog"}, None, False),
        ({"force_managers": ("helm",)}, None, ("helm",), False),
        ({"force_managers": ()}, None, ("kubectl", "before-first-apply"), False),
        # no click context: a ref other than the default counts as given
        ({"ref": "staging"}, None, None, True),
        ({"ref": "main"}, None, None, False),
    ],
)
def test_parse(
    kw: dict[str, Any],
    allowed: set[str] | None,
    forced: tuple[str, ...] | None,
    ref_given: bool,
) -> None:
    flags = parse(kw)
    assert flags.allowed_namespaces == (frozenset(allowed) if allowed else None)
    if forced is not None:
        assert flags.force_managers == forced
    assert flags.ref_given is ref_given


def test_namespaces_not_given_are_the_fallback() -> None:
    where = parse({"namespace": "shop"}).namespaces("team")
    assert (where.default, where.status) == ("shop", "team")
    where = parse({"status_namespace": "ops"}).namespaces("team")
    assert (where.default, where.status) == ("team", "ops")
