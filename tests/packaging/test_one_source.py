"""One source of truth: deploy/ (as ``kubectl kustomize`` builds it), the Helm chart's
defaults and the OLM bundle's CSV agree on everything that decides what gitsync may do
and how it runs: RBAC rules, image, args, env, settings, probes, resources and security
contexts. A change to deploy/ that is not carried to the chart (and, by ``make bundle``,
to bundle/) fails here, naming the fact and the packaging that differs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from release import bundle
from tests.packaging.chart import template

Doc = dict[str, Any]
CONTAINER_FACTS = (
    "image",
    "args",
    "env",
    "envFrom",
    "ports",
    "startupProbe",
    "livenessProbe",
    "readinessProbe",
    "resources",
    "securityContext",
    "volumeMounts",
)


def facts(deployment_spec: Doc, cluster_rules: Any, rules: Any, config: Doc) -> dict[str, Any]:
    pod = deployment_spec["template"]["spec"]
    [container] = pod["containers"]
    out = {f"container.{k}": container.get(k) for k in CONTAINER_FACTS}
    out |= {
        "clusterRole.rules": cluster_rules,
        "role.rules": rules,
        "config.data": config.get("data"),
        "pod.securityContext": pod.get("securityContext"),
        "pod.serviceAccountName": pod.get("serviceAccountName"),
        "pod.volumes": pod.get("volumes"),
        "replicas": deployment_spec.get("replicas"),
    }
    return out


def of_docs(docs: list[Doc]) -> dict[str, Any]:
    return facts(
        bundle.only(docs, "Deployment")["spec"],
        bundle.only(docs, "ClusterRole")["rules"],
        bundle.only(docs, "Role")["rules"],
        bundle.only(docs, "ConfigMap"),
    )


def of_bundle(root: Path) -> dict[str, Any]:
    csv = yaml.safe_load((root / "manifests" / "gitsync.clusterserviceversion.yaml").read_text())
    install = csv["spec"]["install"]["spec"]
    config = yaml.safe_load((root / "manifests" / "gitsync-config.configmap.yaml").read_text())
    [deployment] = install["deployments"]
    [cluster] = install["clusterPermissions"]
    [namespaced] = install["permissions"]
    return facts(deployment["spec"], cluster["rules"], namespaced["rules"], config)


@pytest.fixture(scope="module")
def deploy(kubectl: str) -> dict[str, Any]:
    return of_docs(bundle.kustomize(kubectl, bundle.ROOT / "deploy"))


def test_the_chart_defaults_agree_with_deploy(
    deploy: dict[str, Any], helm: str, tmp_path: Path
) -> None:
    chart = of_docs(template(helm, tmp_path / "helm"))
    differ = [k for k in deploy if chart[k] != deploy[k]]
    assert differ == [], f"charts/gitsync disagrees with deploy/ on {differ}"


def test_the_csv_agrees_with_deploy(deploy: dict[str, Any], kubectl: str) -> None:
    csv = of_bundle(bundle.BUNDLE)
    # the CSV's Role also has what --sharding needs (fixed at install, see release/bundle)
    sharded = of_docs(bundle.with_component(kubectl, bundle.ROOT, "sharding"))
    assert csv["role.rules"] == sharded["role.rules"]
    differ = [k for k in deploy if k != "role.rules" and csv[k] != deploy[k]]
    assert differ == [], f"bundle/ disagrees with deploy/ on {differ}: run `make bundle`"


def test_versions_agree() -> None:
    """The package, the chart, the image tag deploy/ installs and the CSV name one version."""
    version = bundle.package_version()
    chart = yaml.safe_load((bundle.ROOT / "charts" / "gitsync" / "Chart.yaml").read_text())
    kustomization = yaml.safe_load((bundle.ROOT / "deploy" / "kustomization.yaml").read_text())
    [image] = kustomization["images"]
    csv = yaml.safe_load(
        (bundle.BUNDLE / "manifests" / "gitsync.clusterserviceversion.yaml").read_text()
    )
    found = {
        "chart version": chart["version"],
        "chart appVersion": chart["appVersion"],
        "deploy/ image tag": image["newTag"],
        "CSV version": csv["spec"]["version"],
    }
    assert {k: v for k, v in found.items() if v != version} == {}, f"pyproject: {version}"
