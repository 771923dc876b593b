"""The flags the gitsync commands share, and how an expected error leaves the command line.

Apart from the commands so that their module reads as the commands themselves: each shared
option group is defined once here and stacked on the commands that take it. Every flag made
with :func:`opt` can also be set as a ``GITSYNC_*`` environment variable, named in
``--help``, which is how the container is configured.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from gitsync.errors import GitsyncError

F = TypeVar("F", bound=Callable[..., Any])
#: kubectl's rule for a namespace not given as a flag
NAMESPACE_DEFAULT = "the kubeconfig context's namespace; in a Pod, its own; else default"


def opt(*names: str, env: str, **kw: Any) -> Callable[[F], F]:
    """A click option that ``GITSYNC_<env>`` can also set."""
    return click.option(*names, envvar=f"GITSYNC_{env}", show_envvar=True, **kw)


def cluster_options(f: F) -> F:
    for deco in reversed(
        [
            opt("--kubeconfig", env="KUBECONFIG", help="Path to a kubeconfig."),
            opt("--context", env="CONTEXT", help="The kubeconfig context to use."),
        ]
    ):
        f = deco(f)
    return f


def field_manager_option(f: F) -> F:
    return opt(
        "--field-manager",
        env="FIELD_MANAGER",
        default="gitsync",
        show_default=True,
        help="The server-side apply field manager for every write.",
    )(f)


def source_options(required: bool) -> Callable[[F], F]:
    def wrap(f: F) -> F:
        for deco in reversed(
            [
                opt("--repo", env="REPO", required=required, help="Git URL or a local directory."),
                opt(
                    "--instance-repo",
                    env="INSTANCE_REPO",
                    default="",
                    help="The repository URL that names this source instance, when --repo "
                    "is a local checkout of it (default: --repo).",
                ),
                opt(
                    "--instance-name",
                    env="INSTANCE_NAME",
                    default="",
                    help="Names this instance: the source label on its MyApps, its Lease "
                    "and status ConfigMap (default: from the repository, path and ref).",
                ),
                opt(
                    "--ref",
                    env="REF",
                    default="main",
                    show_default=True,
                    help="Branch, tag or commit.",
                ),
                opt(
                    "--path",
                    env="PATH_IN_REPO",
                    default=".",
                    show_default=True,
                    help="Directory in the repository holding the MyApp manifests.",
                ),
                opt(
                    "-n",
                    "--namespace",
                    env="NAMESPACE",
                    default=None,
                    help="Namespace for MyApps that name none (default: "
                    + NAMESPACE_DEFAULT
                    + ").",
                ),
                opt(
                    "--allowed-namespaces",
                    env="ALLOWED_NAMESPACES",
                    default="",
                    help="Comma-separated namespaces MyApps may use (default: any not "
                    "denied); one named here is allowed even if denied.",
                ),
                opt(
                    "--denied-namespaces",
                    env="DENIED_NAMESPACES",
                    default="kube-*",
                    show_default=True,
                    help="Comma-separated namespace patterns (* and ?) MyApps may not use; "
                    "gitsync's own namespace is always added when it runs in a Pod.",
                ),
                opt(
                    "--cache-dir",
                    env="CACHE_DIR",
                    type=click.Path(path_type=Path),
                    help="Where Git clones are kept, private to this user (default: "
                    "$XDG_CACHE_HOME/gitsync, else ~/.cache/gitsync).",
                ),
                opt(
                    "--token-file",
                    env="TOKEN_FILE",
                    type=click.Path(path_type=Path),
                    help="HTTPS token for Git, read from this file.",
                ),
                opt(
                    "--git-username",
                    env="GIT_USERNAME",
                    default="git",
                    show_default=True,
                    help="User name sent with the HTTPS token (e.g. a GitLab deploy token's).",
                ),
                opt(
                    "--ssh-key-file",
                    env="SSH_KEY_FILE",
                    type=click.Path(path_type=Path),
                    help="SSH private key for ssh:// remotes (needs --known-hosts-file).",
                ),
                opt(
                    "--known-hosts-file",
                    env="KNOWN_HOSTS_FILE",
                    type=click.Path(path_type=Path),
                    help="known_hosts for SSH; host keys are always checked.",
                ),
                opt(
                    "--git-ca-file",
                    env="GIT_CA_FILE",
                    type=click.Path(path_type=Path),
                    help="CA certificates (PEM) of the Git server's HTTPS certificate, "
                    "for a private CA.",
                ),
                opt(
                    "--git-timeout",
                    env="GIT_TIMEOUT",
                    type=float,
                    default=60.0,
                    show_default=True,
                    help="Seconds allowed for each git call.",
                ),
                opt(
                    "--allow-insecure-git",
                    env="ALLOW_INSECURE_GIT",
                    is_flag=True,
                    help="Allow plain git:// and http:// remotes.",
                ),
                *verify_options(),
            ]
        ):
            f = deco(f)
        return f

    return wrap


def verify_options() -> list[Callable[[F], F]]:
    """--verify-commits and its keys: an untrusted commit is never applied."""
    return [
        opt(
            "--verify-commits",
            env="VERIFY_COMMITS",
            is_flag=True,
            help="Apply only a commit signed by a trusted key (--trusted-keys); an "
            "unsigned or untrusted one is refused, nothing pruned.",
        ),
        opt(
            "--verify",
            env="VERIFY",
            type=click.Choice(["commit", "tag"]),
            default=None,
            help="What must be signed: the commit at the ref, or the annotated tag the "
            "ref names (default: commit). Turns --verify-commits on.",
        ),
        opt(
            "--trusted-keys",
            env="TRUSTED_KEYS",
            type=click.Path(path_type=Path),
            help="OpenPGP public keys and SSH public keys (or allowed-signers lines): a "
            "file, or a directory of them such as a mounted Secret.",
        ),
        opt(
            "--tip-keys",
            env="TIP_KEYS",
            type=click.Path(path_type=Path),
            help="With --verify-commits: the only keys that may sign the commit (or tag) "
            "at the ref, such as a release key or the forge's merge key, laid out as "
            "--trusted-keys (default: the trusted keys). A commit signed by another "
            "trusted key is refused at the ref as untrusted-key (a branch never merged, "
            "pushed as the ref); a pin may name a commit signed by either.",
        ),
        opt(
            "--allow-non-fast-forward",
            env="ALLOW_NON_FAST_FORWARD",
            is_flag=True,
            help="With --verify-commits: apply a signed commit even when it does not "
            "descend from the last applied one (a rewind or a jump sideways; logged). "
            "Without it such a commit is refused as not-a-descendant.",
        ),
    ]


def create_namespace_option(f: F) -> F:
    return opt(
        "--create-namespace",
        env="CREATE_NAMESPACE",
        is_flag=True,
        help="Create the namespaces MyApps name when they do not exist (labelled as "
        "gitsync's, never deleted; RBAC: create and patch namespaces).",
    )(f)


def adopt_option(f: F) -> F:
    return opt(
        "--adopt",
        env="ADOPT",
        is_flag=True,
        help="Take over MyApps made by hand (without the source label) that Git declares "
        "(default: only one annotated gitsync.apps.example.com/adopt=true).",
    )(f)


def sync_options(f: F) -> F:
    for deco in reversed(
        [
            create_namespace_option,
            adopt_option,
            opt(
                "--prune/--no-prune",
                env="PRUNE",
                default=True,
                show_default=True,
                help="Delete MyApps of this source that left Git (guarded).",
            ),
            opt(
                "--allow-empty",
                env="ALLOW_EMPTY",
                is_flag=True,
                help="Allow an empty desired set to prune everything.",
            ),
            opt(
                "--prune-max-fraction",
                env="PRUNE_MAX_FRACTION",
                type=click.FloatRange(0, 1),
                default=0.5,
                show_default=True,
                help="Refuse a prune that would delete this share of the tracked MyApps or "
                "more (0.5: half or more); 1 turns this guard off.",
            ),
            opt(
                "--concurrency",
                env="CONCURRENCY",
                type=int,
                default=64,
                show_default=True,
                help="MyApps applied in parallel during a sync pass.",
            ),
            opt(
                "--status-namespace",
                env="STATUS_NAMESPACE",
                default=None,
                help="Where the sync status ConfigMap and Lease live (default: "
                + NAMESPACE_DEFAULT
                + ").",
            ),
        ]
    ):
        f = deco(f)
    return policy_options(f)


def policy_options(f: F) -> F:
    """How differences are settled: shared by sync and run, which apply it, and diff,
    which previews it."""
    for deco in reversed(
        [
            opt(
                "--drift-policy",
                env="DRIFT_POLICY",
                type=click.Choice(["correct", "report"]),
                default="correct",
                show_default=True,
                help="Default for MyApps without spec.driftPolicy.",
            ),
            opt(
                "--rollback",
                env="ROLLBACK",
                type=click.Choice(["auto", "off"]),
                default="off",
                show_default=True,
                help="Default for MyApps without spec.rollback: auto re-applies a MyApp's "
                "last healthy spec when the rollout of a new one fails.",
            ),
            opt(
                "--sync-window",
                env="SYNC_WINDOW",
                type=WindowText(),
                multiple=True,
                help="A sync window: 'allow|deny MIN HOUR DOM MON DOW DURATION [ZONE] "
                "[name=N] [namespaces=A,B] [selector=SEL]', e.g. 'deny 0 22 * * 1-5 8h "
                "Europe/Berlin'. Repeatable; in the variable, separated by ';' or newlines. "
                "Inside a deny window or outside every allow window, no change from Git is "
                "applied (deny wins).",
            ),
            opt(
                "--windows-block-corrections",
                env="WINDOWS_BLOCK_CORRECTIONS",
                is_flag=True,
                default=False,
                help="A closed sync window also holds drift corrections back (default: "
                "drift is corrected by policy whatever the windows say).",
            ),
            opt(
                "--force-managers",
                env="FORCE_MANAGERS",
                multiple=True,
                help="Managers gitsync may take fields back from (default: kubectl*, "
                "before-first-apply).",
            ),
        ]
    ):
        f = deco(f)
    return f


class WindowText(click.ParamType):  # type: ignore[type-arg]
    """A sync window's text, as given; several in ``GITSYNC_SYNC_WINDOW`` are separated
    by ``;`` or newlines (a window holds spaces, click's default separator)."""

    name = "window"
    envvar_list_splitter = ";"


def ignore_windows_option(f: F) -> F:
    return opt(
        "--ignore-windows",
        env="IGNORE_WINDOWS",
        is_flag=True,
        default=False,
        help="Apply changes whatever the sync windows say; each change a closed window "
        "let through is logged and recorded as a SyncWindowOverridden Event.",
    )(f)


def dependency_timeout_option(f: F) -> F:
    return opt(
        "--dependency-timeout",
        env="DEPENDENCY_TIMEOUT",
        type=click.FloatRange(min=0),
        default=300.0,
        show_default=True,
        help="Seconds the pass waits in all for the dependencies (spec.dependsOn) it applies "
        "to become Available before applying what depends on them; what still waits then "
        "is held, and the exit code 1. 0: no wait.",
    )(f)


def watch_namespace_option(f: F) -> F:
    return opt(
        "--watch-namespace",
        env="WATCH_NAMESPACE",
        default=None,
        help="The only namespace the operator watches (default: all); MyApps that Git "
        "puts elsewhere are refused.",
    )(f)


def output_option(f: F) -> F:
    return opt(
        "-o",
        "--output",
        env="OUTPUT",
        type=click.Choice(["text", "json", "yaml"]),
        default="text",
        show_default=True,
    )(f)


def expected_errors(code: int) -> Callable[[F], F]:
    """Expected failures print one line and exit ``code``; no traceback."""

    def wrap(f: F) -> F:
        @functools.wraps(f)
        def inner(*args: Any, **kwargs: Any) -> Any:
            try:
                return f(*args, **kwargs)
            except GitsyncError as e:
                fail(str(e), code)

        return inner  # type: ignore[return-value]

    return wrap


def fail(message: str, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)
