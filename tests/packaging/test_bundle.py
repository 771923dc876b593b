"""The OLM bundle: bundle/ is what deploy/ and crds/ give (``make bundle``), and the
operator-framework's own validators (default bundle suite + operatorhub suite) accept
it; they are also shown refusing a broken CSV, so their verdict means something."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from release import bundle

CSV = "manifests/gitsync.clusterserviceversion.yaml"
K8S_VERSION = "1.35.0"


def check(bundlecheck: str, directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [bundlecheck, "-strict", "-k8s-version", K8S_VERSION, str(directory)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def edit_csv(directory: Path, change: Any) -> None:
    path = directory / CSV
    csv = yaml.safe_load(path.read_text())
    change(csv)
    path.write_text(yaml.safe_dump(csv))


def test_bundle_is_what_deploy_and_crds_give(kubectl: str) -> None:
    stale = bundle.differences(bundle.generate(kubectl))
    assert stale == [], f"bundle/ is stale, run `make bundle`: {stale}"


def test_the_operator_framework_validators_accept_the_bundle(bundlecheck: str) -> None:
    proc = check(bundlecheck, bundle.BUNDLE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "is valid" in proc.stdout
    assert "Warning" not in proc.stdout, proc.stdout


def test_the_validators_refuse_a_broken_bundle(bundlecheck: str, tmp_path: Path) -> None:
    def break_it(csv: dict[str, Any]) -> None:
        csv["metadata"]["annotations"]["categories"] = "Gardening"  # not an OperatorHub one
        csv["spec"]["installModes"] = []  # OLM could not install it anywhere
        del csv["spec"]["icon"]

    broken = tmp_path / "bundle"
    shutil.copytree(bundle.BUNDLE, broken)
    edit_csv(broken, break_it)
    proc = check(bundlecheck, broken)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Gardening" in proc.stdout
    assert "installModes" in proc.stdout or "install mode" in proc.stdout.lower()
    assert "icon" in proc.stdout.lower()


def test_the_csv_installs_deploys_deployment_and_rbac(kubectl: str) -> None:
    docs = bundle.kustomize(kubectl, bundle.ROOT / "deploy")
    csv = yaml.safe_load((bundle.BUNDLE / CSV).read_text())
    install = csv["spec"]["install"]["spec"]
    [deployment] = install["deployments"]
    assert deployment["spec"] == bundle.only(docs, "Deployment")["spec"]
    [cluster] = install["clusterPermissions"]
    assert cluster["rules"] == bundle.only(docs, "ClusterRole")["rules"]
    [namespaced] = install["permissions"]
    # deploy/'s Role, and what --sharding needs: a Subscription's config can turn it on
    sharded = bundle.with_component(kubectl, bundle.ROOT, "sharding")
    assert namespaced["rules"] == bundle.only(sharded, "Role")["rules"]
    lease_rules = [r for r in namespaced["rules"] if r["resources"] == ["leases"]]
    assert [r for r in namespaced["rules"] if r not in bundle.only(docs, "Role")["rules"]] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["list", "update", "delete"],
        }
    ]
    assert len(lease_rules) == 3
    config = yaml.safe_load(
        (bundle.BUNDLE / "manifests" / "gitsync-config.configmap.yaml").read_text()
    )
    assert "GITSYNC_SHARDING" not in config["data"]  # on only when asked
    account = bundle.only(docs, "ServiceAccount")["metadata"]["name"]
    assert cluster["serviceAccountName"] == namespaced["serviceAccountName"] == account
    assert csv["spec"]["version"] == bundle.package_version()
    [owned] = csv["spec"]["customresourcedefinitions"]["owned"]
    crd = yaml.safe_load((bundle.ROOT / "crds" / "myapps.apps.example.com.yaml").read_text())
    assert (owned["name"], owned["kind"]) == (crd["metadata"]["name"], "MyApp")
