"""The Helm chart: ``helm lint --strict`` passes, its defaults render exactly what
``kubectl kustomize deploy/`` gives (Helm's own labels aside), and its values reach
the objects they name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from release import bundle
from tests.packaging.chart import CHART, by_kind, run_helm, template, without_helm_metadata


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "helm"


def test_helm_lint_strict_passes(helm: str, home: Path) -> None:
    proc = run_helm(helm, "lint", "--strict", str(CHART), home=home, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


def test_defaults_render_what_kustomize_renders(helm: str, kubectl: str, home: Path) -> None:
    kustomized = by_kind(bundle.kustomize(kubectl, bundle.ROOT / "deploy"))
    # the Namespace is the installer's (helm install --create-namespace, or OLM's)
    del kustomized[("Namespace", "gitsync-system")]
    crd = kustomized.pop(("CustomResourceDefinition", "myapps.apps.example.com"))
    rendered = by_kind(template(helm, home, "--include-crds"))
    helm_crd = rendered.pop(("CustomResourceDefinition", "myapps.apps.example.com"))
    assert helm_crd["spec"] == crd["spec"], "charts/gitsync/crds/ is not crds/"

    assert sorted(rendered) == sorted(kustomized)
    for key, doc in rendered.items():
        assert without_helm_metadata(doc) == kustomized[key], f"{key} differs from deploy/"


def test_values_reach_the_objects(helm: str, home: Path) -> None:
    docs = by_kind(
        template(
            helm,
            home,
            *("--set", "repo.url=https://git.example.com/team/apps.git", "--set", "repo.ref=v2"),
            *("--set", "allowedNamespaces={team-a,team-b}", "--set", "driftPolicy=report"),
            *("--set", "rollback=auto"),
            *("--set", "gitCredentials.type=token", "--set", "gitCredentials.existingSecret=creds"),
            *("--set", "webhook.existingSecret=hook", "--set", "replicas=3"),
            *("--set", "notify.existingSecret=alerts"),
            *("--set", "image.tag=9.9.9", "--set", "leaderElection.enabled=false"),
            *("--set", "serviceMonitor.enabled=true", "--set", "prune.maxFraction=0.2"),
            namespace="elsewhere",
        )
    )
    config = docs[("ConfigMap", "gitsync-config")]["data"]
    assert config["GITSYNC_REPO"] == "https://git.example.com/team/apps.git"
    assert config["GITSYNC_REF"] == "v2"
    assert config["GITSYNC_ALLOWED_NAMESPACES"] == "team-a,team-b"
    assert config["GITSYNC_DRIFT_POLICY"] == "report"
    assert config["GITSYNC_ROLLBACK"] == "auto"
    assert config["GITSYNC_TOKEN_FILE"] == "/etc/gitsync/git/token"
    assert config["GITSYNC_LEADER_ELECT"] == "false"
    assert config["GITSYNC_PRUNE_MAX_FRACTION"] == "0.2"
    deployment = docs[("Deployment", "gitsync")]
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 3
    assert pod["containers"][0]["image"] == "ghcr.io/example/gitsync:9.9.9"
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {
        "git-credentials": "creds",
        "webhook-secret": "hook",
        "notify-secret": "alerts",
    }
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["GITSYNC_NOTIFY_URL"]["valueFrom"]["secretKeyRef"]["name"] == "alerts"
    [subject] = docs[("ClusterRoleBinding", "gitsync")]["subjects"]
    assert subject["namespace"] == "elsewhere"
    monitor = docs[("ServiceMonitor", "gitsync")]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"


def test_a_release_of_another_name_gets_names_of_its_own(helm: str, home: Path) -> None:
    proc = run_helm(helm, "template", "team-a", str(CHART), home=home)
    docs = by_kind([d for d in yaml.safe_load_all(proc.stdout) if d])
    binding = docs[("ClusterRoleBinding", "team-a-gitsync")]
    assert binding["roleRef"]["name"] == "team-a-gitsync"
    assert binding["subjects"][0]["name"] == "team-a-gitsync"
    assert ("ServiceAccount", "team-a-gitsync") in docs


def test_an_unknown_credentials_type_is_refused(helm: str, home: Path) -> None:
    proc = run_helm(
        helm,
        *("template", "gitsync", str(CHART), "--set", "gitCredentials.type=password"),
        home=home,
        check=False,
    )
    assert proc.returncode != 0
    assert "gitCredentials.type must be none, token or ssh" in proc.stderr


def test_create_namespace_value_renders_what_the_kustomize_component_does(
    helm: str, kubectl: str, home: Path
) -> None:
    kustomized = by_kind(bundle.with_component(kubectl, bundle.ROOT, "create-namespace"))
    off = by_kind(template(helm, home))
    on = by_kind(template(helm, home, "--set", "createNamespace=true"))
    role = ("ClusterRole", "gitsync")
    assert on[role]["rules"] == kustomized[role]["rules"] != off[role]["rules"]
    config = ("ConfigMap", "gitsync-config")
    assert on[config]["data"]["GITSYNC_CREATE_NAMESPACE"] == "true"
    assert kustomized[config]["data"]["GITSYNC_CREATE_NAMESPACE"] == "true"
    assert "GITSYNC_CREATE_NAMESPACE" not in off[config]["data"]


def test_sharding_value_renders_what_the_kustomize_component_does(
    helm: str, kubectl: str, home: Path
) -> None:
    kustomized = by_kind(bundle.with_component(kubectl, bundle.ROOT, "sharding"))
    off = by_kind(template(helm, home))
    on = by_kind(template(helm, home, "--set", "sharding=true", "--set", "replicas=3"))
    role = ("Role", "gitsync")
    assert on[role]["rules"] == kustomized[role]["rules"] != off[role]["rules"]
    config = ("ConfigMap", "gitsync-config")
    assert on[config]["data"]["GITSYNC_SHARDING"] == "true"
    assert kustomized[config]["data"]["GITSYNC_SHARDING"] == "true"
    assert "GITSYNC_SHARDING" not in off[config]["data"]
    deployment = ("Deployment", "gitsync")
    assert on[deployment]["spec"]["replicas"] == kustomized[deployment]["spec"]["replicas"] == 3


def test_monitoring_values_render_what_deploy_monitoring_does(
    helm: str, kubectl: str, home: Path
) -> None:
    for name in ("prometheusrule.yaml", "dashboard.json"):
        copy = CHART / "files" / name
        assert copy.read_text() == (bundle.ROOT / "deploy" / "monitoring" / name).read_text(), (
            f"charts/gitsync/files/{name} is not deploy/monitoring/{name}"
        )
    kustomized = by_kind(bundle.kustomize(kubectl, bundle.ROOT / "deploy" / "monitoring"))
    off = by_kind(template(helm, home))
    on = by_kind(
        template(
            helm,
            home,
            *("--set", "monitoring.rules=true", "--set", "monitoring.dashboard=true"),
            *("--set", "monitoring.labels.release=kube-prometheus"),
        )
    )
    rule, dashboard = ("PrometheusRule", "gitsync"), ("ConfigMap", "gitsync-dashboard")
    assert rule not in off and dashboard not in off
    # the alert texts reach Prometheus as written: Helm does not template them
    assert on[rule]["spec"] == kustomized[rule]["spec"]
    assert "{{ $labels.myapp }}" in yaml.safe_dump(on[rule]["spec"], width=10_000)
    assert on[rule]["metadata"]["labels"]["release"] == "kube-prometheus"
    assert on[dashboard]["data"] == kustomized[dashboard]["data"]
    assert on[dashboard]["metadata"]["labels"]["grafana_dashboard"] == "1"
