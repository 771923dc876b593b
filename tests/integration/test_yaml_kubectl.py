"""The oracle for tests/unit/test_yaml_kubectl.py: each case as ``kubectl apply
--dry-run=server`` reads it, against the real API server. Where gitsync loads a spec,
kubectl stores that spec; where gitsync refuses the file, kubectl refuses it too, or
stores the spec docs/operating.md says gitsync is stricter about."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_yaml_kubectl import CASES, NS, Case

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_kubectl_reads_each_case_as_documented(
    kubectl_bin: str, kubeconfig: str, crd: str, namespace: str, tmp_path: Path, case: Case
) -> None:
    manifest = tmp_path / "web.yaml"
    manifest.write_text(case.text.replace(f"namespace: {NS}\n", f"namespace: {namespace}\n"))
    proc = subprocess.run(
        [kubectl_bin, "apply", "--dry-run=server", "-o", "json", "-f", str(manifest)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KUBECONFIG": kubeconfig},
    )
    if case.kubectl == "refuses":
        assert proc.returncode != 0, proc.stdout
        return
    assert proc.returncode == 0, proc.stderr
    stored = json.loads(proc.stdout)["spec"]
    expected = case.spec if case.spec is not None else case.kubectl_spec
    assert expected is not None
    assert {k: stored.get(k) for k in expected} == expected, stored
