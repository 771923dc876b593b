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
from gitsync.cli.options import policy_options
from gitsync.cli.run import run
from gitsync.cli.sync import sync
from gitsync.cli.validate import validate
from gitsync.errors import ConfigError

#: what the commands take as parameters of their own, not through parse
OWN = {"output", "color", "all_namespaces"}


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


def test_sync_windows_come_from_flags_or_one_variable_split_at_semicolons() -> None:
    """What click gives the command: several --sync-window, or GITSYNC_SYNC_WINDOW with
    windows separated by ';' (a window holds spaces); a bad one is a usage error naming it."""
    from click.testing import CliRunner

    seen: list[Flags] = []

    @click.command()
    @policy_options
    def probe(**kw: object) -> None:
        seen.append(parse(kw))

    runner = CliRunner()
    night = "deny 0 22 * * * 8h Europe/Berlin name=night"
    day = "allow 0 8 * * 1-5 10h UTC name=day"
    assert runner.invoke(probe, ["--sync-window", night, "--sync-window", day]).exit_code == 0
    assert [w.name for w in seen[-1].sync_window] == ["night", "day"]
    result = runner.invoke(probe, [], env={"GITSYNC_SYNC_WINDOW": f"{night};{day}\n"})
    assert result.exit_code == 0, result.output
    assert [w.name for w in seen[-1].sync_window] == ["night", "day"]
    assert seen[-1].windows().windows == seen[-1].sync_window
    assert runner.invoke(probe, [], env={"GITSYNC_SYNC_WINDOW": ""}).exit_code == 0
    assert seen[-1].sync_window == ()
    assert not seen[-1].windows_block_corrections and not seen[-1].ignore_windows
    bad = runner.invoke(probe, ["--sync-window", "deny 0 22 * * * forever"])
    assert isinstance(bad.exception, ConfigError) and "deny 0 22 * * * forever" in str(
        bad.exception
    )
