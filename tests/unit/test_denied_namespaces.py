"""--denied-namespaces: MyApps may not target kube-* or gitsync's own namespace unless a
namespace is allowed by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gitsync.cli import main
from gitsync.cli.flags import parse
from gitsync.kube import kubeconfig
from gitsync.model.schema import denied_by
from gitsync.source.manifests import load

DENIED = ("kube-*", "gitsync-system")


def denied_of(flags: dict[str, str]) -> tuple[str, ...]:
    return parse(flags).denied_namespaces


def write_app(root: Path, name: str, namespace: str | None) -> None:
    ns = f"  namespace: {namespace}\n" if namespace else ""
    (root / "apps").mkdir(parents=True, exist_ok=True)
    (root / "apps" / f"{name}.yaml").write_text(
        "apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata:\n"
        f"  name: {name}\n{ns}spec:\n  image: nginx:1.27\n"
    )


@pytest.mark.parametrize(
    ("namespace", "allowed", "pattern"),
    [
        ("kube-system", None, "kube-*"),
        ("kube-public", None, "kube-*"),
        ("kube-node-lease", None, "kube-*"),
        ("gitsync-system", None, "gitsync-system"),
        ("shop", None, None),
        ("kubernetes-dashboard", None, None),  # kube-* means the "kube-" prefix
        ("xkube-system", None, None),
        # an explicit allow wins over a pattern
        ("kube-system", frozenset({"kube-system"}), None),
        ("kube-public", frozenset({"kube-system"}), "kube-*"),
    ],
)
def test_denied_by(namespace: str, allowed: frozenset[str] | None, pattern: str | None) -> None:
    assert denied_by(namespace, DENIED, allowed) == pattern


def test_load_reports_a_denied_namespace_and_keeps_the_rest(tmp_path: Path) -> None:
    write_app(tmp_path, "web", "shop")
    write_app(tmp_path, "evil", "kube-system")
    write_app(tmp_path, "near", "gitsync-system")
    result = load(tmp_path, "apps", denied_namespaces=DENIED)
    assert [a.key for a in result.apps] == ["shop/web"]
    messages = sorted(str(e) for e in result.errors)
    assert len(messages) == 2
    assert messages[0].startswith("apps/evil.yaml:")
    assert "'kube-system' is denied (matches 'kube-*'" in messages[0]
    assert "--allowed-namespaces" in messages[0]
    assert "'gitsync-system' is denied" in messages[1]
    # the default namespace of a MyApp that names none is checked too
    write_app(tmp_path / "other", "plain", None)
    result = load(
        tmp_path / "other", "apps", default_namespace="kube-system", denied_namespaces=DENIED
    )
    assert not result.apps and "is denied" in str(result.errors[0])
    # named in --allowed-namespaces: allowed
    allowed = frozenset({"shop", "kube-system"})
    result = load(tmp_path, "apps", allowed_namespaces=allowed, denied_namespaces=DENIED)
    assert sorted(a.key for a in result.apps) == ["kube-system/evil", "shop/web"]
    assert "'gitsync-system' is not allowed" in str(result.errors[0])


def test_the_cli_denies_kube_namespaces_by_default(tmp_path: Path) -> None:
    write_app(tmp_path, "web", "shop")
    write_app(tmp_path, "evil", "kube-system")
    runner = CliRunner()
    args = ["validate", "--repo", str(tmp_path), "--path", "apps"]
    denied = runner.invoke(main, args, env={"GITSYNC_DENIED_NAMESPACES": None})
    assert denied.exit_code == 1
    assert "'kube-system' is denied" in denied.output
    allowed = runner.invoke(main, [*args, "--allowed-namespaces", "shop,kube-system"])
    assert allowed.exit_code == 0, allowed.output


def test_in_a_pod_its_own_namespace_is_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pod_ns = tmp_path / "namespace"
    pod_ns.write_text("gitsync-prod\n")
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.setattr(kubeconfig, "SERVICEACCOUNT_NAMESPACE", pod_ns)
    assert denied_of({"denied_namespaces": "kube-*"}) == ("kube-*", "gitsync-prod")
    monkeypatch.setattr(kubeconfig, "SERVICEACCOUNT_NAMESPACE", tmp_path / "absent")
    assert denied_of({"denied_namespaces": "kube-*, team-?"}) == ("kube-*", "team-?")


def test_deploy_ships_the_safe_default() -> None:
    config = Path(__file__).resolve().parents[2] / "deploy" / "config.yaml"
    data = yaml.safe_load(config.read_text())["data"]
    # empty counts as unset, which would fall back to the flag's default: say it outright
    patterns = denied_of({"denied_namespaces": data["GITSYNC_DENIED_NAMESPACES"]})
    assert denied_by("kube-system", patterns, None) == "kube-*"
    assert not data.get("GITSYNC_ALLOWED_NAMESPACES")
