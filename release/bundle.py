"""The OLM bundle (bundle/), generated from deploy/ and crds/ so the two never drift apart.

deploy/ is built with ``kubectl kustomize`` (so the image, labels and names are the ones
``kubectl apply -k deploy/`` installs) and translated: the ClusterRole becomes the CSV's
``clusterPermissions``, the Role its ``permissions``, the Deployment its
``install.spec.deployments``, the MyApp CRD an owned CRD with descriptors; the
ConfigMap, Service and PodDisruptionBudget ship beside the CSV, as OLM creates those
itself. Namespace, ServiceAccount and bindings are left out: OLM makes them.

    python -m release.bundle            # write bundle/
    python -m release.bundle --check    # exit 1 when bundle/ is not what deploy/ gives
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from release import versions

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "bundle"
PACKAGE = "gitsync"
# a channel name OLM recommends (candidate, fast, stable); 0.x is not stable yet
CHANNEL = "candidate"
# as docs/operating.md says: Pod Security admission (the restricted securityContext is
# enforced by the namespace label) is GA from 1.25
MIN_KUBE_VERSION = "1.25.0"
REPOSITORY = "https://github.com/example/gitsync"
# objects OLM creates from the CSV itself, or that belong to the cluster admin
NOT_SHIPPED = {"Namespace", "ServiceAccount", "ClusterRoleBinding", "RoleBinding"}
# objects a registry+v1 bundle may carry beside the CSV that gitsync's deploy/ has
SHIPPED = {"ConfigMap", "Service", "PodDisruptionBudget"}

Doc = dict[str, Any]


class BundleError(Exception):
    """deploy/ or crds/ cannot be turned into a bundle; the message names what is off."""


# --- reading the sources -----------------------------------------------------------------


def package_version(root: Path = ROOT) -> str:
    with (root / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def kustomize(kubectl: str, directory: Path) -> list[Doc]:
    proc = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise BundleError(f"kubectl kustomize {directory} failed: {proc.stderr.strip()}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def with_component(kubectl: str, root: Path, name: str) -> list[Doc]:
    """deploy/ with deploy/components/NAME, built from an overlay of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        deploy = Path(os.path.relpath(root / "deploy", tmp))
        overlay = {"resources": [str(deploy)], "components": [str(deploy / "components" / name)]}
        (Path(tmp) / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
        return kustomize(kubectl, Path(tmp))


def only(docs: list[Doc], kind: str) -> Doc:
    found = [d for d in docs if d.get("kind") == kind]
    if len(found) != 1:
        raise BundleError(f"deploy/ must hold exactly one {kind}, it holds {len(found)}")
    return found[0]


# --- the CSV (pure) ----------------------------------------------------------------------


def _descriptor(path: str, name: str, text: str, *xs: str) -> Doc:
    d: Doc = {"path": path, "displayName": name, "description": text}
    if xs:
        d["x-descriptors"] = list(xs)
    return d


def owned_crd(crd: Doc) -> Doc:
    version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
    return {
        "name": crd["metadata"]["name"],
        "version": version,
        "kind": crd["spec"]["names"]["kind"],
        "displayName": "MyApp",
        "description": "An application gitsync deploys from Git as a Deployment it owns.",
        "resources": [{"kind": "Deployment", "version": "v1", "name": ""}],
        "specDescriptors": [
            _descriptor("image", "Image", "Container image of the application."),
            _descriptor(
                "replicas",
                "Replicas",
                "Desired number of Pods.",
                "urn:alm:descriptor:com.tectonic.ui:podCount",
            ),
            _descriptor("port", "Port", "Container port the application listens on."),
            _descriptor(
                "resources",
                "Resources",
                "CPU and memory requests and limits.",
                "urn:alm:descriptor:com.tectonic.ui:resourceRequirements",
            ),
            _descriptor(
                "driftPolicy",
                "Drift policy",
                "correct re-applies drifted fields; report only records them.",
                "urn:alm:descriptor:com.tectonic.ui:select:correct",
                "urn:alm:descriptor:com.tectonic.ui:select:report",
            ),
            _descriptor(
                "suspend",
                "Suspend",
                "Stop applying this MyApp from Git.",
                "urn:alm:descriptor:com.tectonic.ui:booleanSwitch",
            ),
        ],
        "statusDescriptors": [
            _descriptor(
                "phase",
                "Phase",
                "Pending, Progressing, Available or Degraded.",
                "urn:alm:descriptor:io.kubernetes.phase",
            ),
            _descriptor(
                "availableReplicas",
                "Available replicas",
                "Pods of the Deployment available.",
                "urn:alm:descriptor:com.tectonic.ui:podCount",
            ),
            _descriptor("source.revision", "Revision", "Git commit that last changed this MyApp."),
            _descriptor("drift", "Drift", "Fields changed outside Git, and by whom."),
            _descriptor(
                "conditions",
                "Conditions",
                "Synced, Drifted and Ready.",
                "urn:alm:descriptor:io.kubernetes.conditions",
            ),
        ],
    }


def example_myapp() -> Doc:
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {"name": "hello", "namespace": "default"},
        "spec": {"image": "nginx:1.27", "replicas": 2, "port": 8080},
    }


def _strip(meta: Mapping[str, Any]) -> Doc:
    """Name and labels only: OLM sets the namespace, and annotations are kustomize's."""
    out: Doc = {"name": meta["name"]}
    if meta.get("labels"):
        out["labels"] = dict(meta["labels"])
    return out


def render_csv(
    docs: list[Doc], crd: Doc, version: str, icon_svg: bytes, replaces: str | None = None
) -> Doc:
    """The CSV of ``version``; ``replaces``: the version it upgrades (OLM's upgrade graph:
    olm-operator replaces that CSV with this one once this one has succeeded)."""
    deployment = only(docs, "Deployment")
    cluster_role = only(docs, "ClusterRole")
    role = only(docs, "Role")
    account = only(docs, "ServiceAccount")["metadata"]["name"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    description = (
        "gitsync applies MyApp manifests from a Git repository with server-side apply, "
        "renders a Deployment owned by each MyApp, reports drift in MyApp.status (and undoes "
        "it with driftPolicy: correct) and prunes MyApps removed from Git, with guards.\n\n"
        "After install, set the repository in the gitsync-config ConfigMap "
        "(GITSYNC_REPO, GITSYNC_REF, GITSYNC_PATH_IN_REPO) and create the Secret "
        "gitsync-webhook (key: secret) in the install namespace; see docs/operating.md."
    )
    csv: Doc = {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": f"{PACKAGE}.v{version}",
            "annotations": {
                "alm-examples": json.dumps([example_myapp()]),
                "capabilities": "Basic Install",
                "categories": "Developer Tools",
                "containerImage": container["image"],
                "description": "GitOps reconciler for MyApp resources, with drift reports.",
                "repository": REPOSITORY,
                "support": "gitsync maintainers",
                "operators.operatorframework.io/suggested-namespace": "gitsync-system",
            },
        },
        "spec": {
            "displayName": "gitsync",
            "description": description,
            "version": version,
            "minKubeVersion": MIN_KUBE_VERSION,
            "maturity": "alpha",
            "keywords": ["gitops", "git", "server-side apply", "drift"],
            "provider": {"name": "gitsync maintainers", "url": REPOSITORY},
            "maintainers": [{"name": "gitsync maintainers", "email": "gitsync@example.com"}],
            "links": [
                {"name": "Source", "url": REPOSITORY},
                {"name": "Operating gitsync", "url": f"{REPOSITORY}/blob/main/docs/operating.md"},
            ],
            "icon": [
                {
                    "base64data": base64.b64encode(icon_svg).decode(),
                    "mediatype": "image/svg+xml",
                }
            ],
            # gitsync watches MyApps cluster-wide (its ClusterRole); it has no notion of
            # an OperatorGroup's target namespaces, so it offers AllNamespaces alone
            "installModes": [
                {"type": "OwnNamespace", "supported": False},
                {"type": "SingleNamespace", "supported": False},
                {"type": "MultiNamespace", "supported": False},
                {"type": "AllNamespaces", "supported": True},
            ],
            "customresourcedefinitions": {"owned": [owned_crd(crd)]},
            "install": {
                "strategy": "deployment",
                "spec": {
                    "clusterPermissions": [
                        {"serviceAccountName": account, "rules": cluster_role["rules"]}
                    ],
                    "permissions": [{"serviceAccountName": account, "rules": role["rules"]}],
                    "deployments": [
                        {
                            "name": deployment["metadata"]["name"],
                            "label": dict(deployment["metadata"].get("labels") or {}),
                            "spec": copy.deepcopy(deployment["spec"]),
                        }
                    ],
                },
            },
        },
    }
    if replaces is not None and replaces != version:
        csv["spec"]["replaces"] = f"{PACKAGE}.v{replaces}"
    return csv


def bundle_annotations() -> Doc:
    return {
        "annotations": {
            "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
            "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
            "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
            "operators.operatorframework.io.bundle.package.v1": PACKAGE,
            "operators.operatorframework.io.bundle.channels.v1": CHANNEL,
            "operators.operatorframework.io.bundle.channel.default.v1": CHANNEL,
        }
    }


def dockerfile() -> str:
    labels = "".join(f"LABEL {k}={v}\n" for k, v in bundle_annotations()["annotations"].items())
    return (
        "# The OLM bundle image: `docker build -f bundle/bundle.Dockerfile bundle/`.\n"
        "# Generated by `make bundle` from deploy/ and crds/; do not edit.\n"
        f"FROM scratch\n\n{labels}\nCOPY manifests /manifests/\nCOPY metadata /metadata/\n"
    )


def _dump(doc: Doc) -> str:
    header = "# Generated by `make bundle` from deploy/ and crds/; do not edit.\n"
    return header + yaml.safe_dump(doc, sort_keys=False, width=100)


def files(
    docs: list[Doc], crd: Doc, version: str, icon_svg: bytes, replaces: str | None = None
) -> dict[str, str]:
    """Every file of bundle/, by path relative to it."""
    out = {
        f"manifests/{PACKAGE}.clusterserviceversion.yaml": _dump(
            render_csv(docs, crd, version, icon_svg, replaces)
        ),
        f"manifests/{crd['metadata']['name']}.crd.yaml": _dump(crd),
        "metadata/annotations.yaml": _dump(bundle_annotations()),
        "bundle.Dockerfile": dockerfile(),
    }
    for doc in docs:
        kind = doc["kind"]
        if kind in NOT_SHIPPED or kind in ("Deployment", "ClusterRole", "Role"):
            continue
        if kind == "CustomResourceDefinition":
            continue  # from crds/ itself, above
        if kind not in SHIPPED:
            raise BundleError(
                f"deploy/ holds a {kind} ({doc['metadata']['name']}) that the bundle does not "
                "know how to ship; add it to release/bundle.py"
            )
        body = {k: v for k, v in doc.items() if k != "metadata"}
        shipped = {
            "apiVersion": doc["apiVersion"],
            "kind": kind,
            "metadata": _strip(doc["metadata"]),
        }
        shipped |= {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
        out[f"manifests/{doc['metadata']['name']}.{kind.lower()}.yaml"] = _dump(shipped)
    return out


# --- I/O ---------------------------------------------------------------------------------


def generate(kubectl: str, root: Path = ROOT) -> dict[str, str]:
    docs = kustomize(kubectl, root / "deploy")
    # a CSV's permissions are fixed when OLM installs it: they carry what --sharding
    # needs (deploy/components/sharding's Role), so that a Subscription's config can
    # turn it on (GITSYNC_SHARDING=true, more replicas) without another install
    only(docs, "Role")["rules"] = only(with_component(kubectl, root, "sharding"), "Role")["rules"]
    crd = yaml.safe_load((root / "crds" / "myapps.apps.example.com.yaml").read_text())
    icon = (root / "release" / "icon.svg").read_bytes()
    # the newest release before this version: the CSV this one replaces
    return files(docs, crd, package_version(root), icon, versions.previous().version)


def differences(wanted: dict[str, str], bundle: Path = BUNDLE) -> list[str]:
    """Paths under bundle/ that are missing, stale or not generated."""
    have = {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()}
    stale = [p for p in wanted if p not in have or (bundle / p).read_text() != wanted[p]]
    return sorted(stale + [p for p in have if p not in wanted])


def write(wanted: dict[str, str], bundle: Path = BUNDLE) -> None:
    for path in differences(wanted, bundle):
        target = bundle / path
        if path not in wanted:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(wanted[path])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m release.bundle", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only compare with bundle/")
    args = parser.parse_args(argv)
    from testenv.build import build

    try:
        wanted = generate(str(build(verbose=False) / "kubectl"))
    except BundleError as e:
        print(f"bundle: {e}", file=sys.stderr)
        return 2
    if args.check:
        stale = differences(wanted)
        for path in stale:
            print(f"bundle/{path} is not what deploy/ and crds/ give: run `make bundle`")
        return 1 if stale else 0
    write(wanted)
    print(f"bundle: wrote {BUNDLE.relative_to(ROOT)}/ ({len(wanted)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
