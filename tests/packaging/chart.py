"""Running helm on charts/gitsync and reading what it renders (shared by the chart tests)."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "gitsync"
# labels Helm's conventions add to metadata.labels; deploy/ has no release to name
HELM_LABELS = {
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
    "helm.sh/chart",
}
# the pod template's hash of the ConfigMap, so that `helm upgrade` rolls the Pods on a
# change of settings (deploy/ says to `kubectl rollout restart` instead)
HELM_ANNOTATIONS = {"checksum/config"}

Doc = dict[str, Any]


def run_helm(
    helm: str, *args: str, home: Path, check: bool = True
) -> subprocess.CompletedProcess[str]:
    # helm keeps its cache, config and data under these: never the user's own
    env = os.environ | {
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    proc = subprocess.run(
        [helm, *args], capture_output=True, text=True, check=False, env=env, timeout=300
    )
    if check:
        assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
    return proc


def template(helm: str, home: Path, *args: str, namespace: str = "gitsync-system") -> list[Doc]:
    proc = run_helm(
        helm, "template", "gitsync", str(CHART), "--namespace", namespace, *args, home=home
    )
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def by_kind(docs: list[Doc]) -> dict[tuple[str, str], Doc]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def without_helm_metadata(doc: Doc) -> Doc:
    """The object as deploy/ would have it: Helm's own labels and annotations removed."""
    out = copy.deepcopy(doc)
    metas = [out["metadata"]]
    template = out.get("spec", {}).get("template")
    if isinstance(template, dict):
        metas.append(template["metadata"])
    for meta in metas:
        for key, drop in (("labels", HELM_LABELS), ("annotations", HELM_ANNOTATIONS)):
            kept = {k: v for k, v in (meta.get(key) or {}).items() if k not in drop}
            meta.pop(key, None)
            if kept:
                meta[key] = kept
    return out
