"""deploy/monitoring against the real tools: promtool checks the alert rules and runs
their unit tests (tests/monitoring/alerts_test.yaml); a real Prometheus scrapes a real
sharded ``gitsync run`` on the local control plane, evaluates every alert rule, and
through its HTTP API every series each alert and dashboard expression selects must exist
with every label it groups by (no metric name or label that gitsync does not export)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitsync.kube.client import Kube, path_of
from testenv import build, peers
from tests.gitserver import free_port
from tests.integration.test_ha import Replica
from tests.support import app_yaml, get, wait_until

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
RULES = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
DASHBOARD = json.loads((MONITORING / "dashboard.json").read_text())
#: what the dashboard's variables stand for when its queries are run here
VARIABLES = {"$namespace": "gitsync-test", "$job": "gitsync"}


@pytest.fixture(scope="module")
def tool() -> Any:
    def get_tool(name: str) -> str:
        try:
            return str(peers.build(name))
        except build.BuildError as e:
            pytest.fail(f"{name} could not be built: {e}", pytrace=False)

    return get_tool


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    """The PrometheusRule's spec as a Prometheus rules file, beside the unit tests."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(RULES["spec"], sort_keys=False))
    shutil.copy(ROOT / "tests" / "monitoring" / "alerts_test.yaml", tmp_path)
    return tmp_path


def test_promtool_checks_the_rules_and_their_unit_tests_pass(tool: Any, rules_dir: Path) -> None:
    def promtool(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [tool("promtool"), *args], cwd=rules_dir, capture_output=True, text=True, timeout=120
        )

    check = promtool("check", "rules", "rules.yaml")
    assert check.returncode == 0, check.stdout + check.stderr
    alerts = [r["alert"] for g in RULES["spec"]["groups"] for r in g["rules"]]
    assert f"SUCCESS: {len(alerts)} rules found" in check.stdout, check.stdout
    unit = promtool("test", "rules", "alerts_test.yaml")
    assert unit.returncode == 0, unit.stdout + unit.stderr
    assert "SUCCESS" in unit.stdout, unit.stdout
    # every alert has a unit test that sees it fire, and one that sees it quiet
    tests = yaml.safe_load((rules_dir / "alerts_test.yaml").read_text())["tests"]
    cases = [c for t in tests for c in t["alert_rule_test"]]
    for alert in alerts:
        mine = [c for c in cases if c["alertname"] == alert]
        assert any(c["exp_alerts"] for c in mine), f"{alert}: no test sees it fire"
        assert any(not c["exp_alerts"] for c in mine), f"{alert}: no test sees it quiet"
    # and a runbook in docs/operating.md
    docs = (ROOT / "docs" / "operating.md").read_text()
    for alert in alerts:
        assert f"#### {alert}\n" in docs, f"{alert}: no runbook"


def test_a_broken_rule_is_refused_by_promtool(tool: Any, tmp_path: Path) -> None:
    """The check above can fail: a typo'd function is refused."""
    broken = {"groups": [{"name": "x", "rules": [{"alert": "X", "expr": "ratee(up[5m]) > 0"}]}]}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(broken))
    check = subprocess.run(
        [tool("promtool"), "check", "rules", "rules.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode != 0 and "ratee" in check.stdout + check.stderr


class Prometheus:
    def __init__(self, binary: str, work: Path, target: str, rules: Path) -> None:
        self.port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [
                {
                    "job_name": "gitsync",
                    "static_configs": [
                        {"targets": [target], "labels": {"namespace": VARIABLES["$namespace"]}}
                    ],
                }
            ],
        }
        (work / "prometheus.yml").write_text(yaml.safe_dump(config))
        argv = [
            binary,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        self.log = (work / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        return body["data"]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def selectors(node: Any) -> Iterator[dict[str, Any]]:
    """Every selector of a parsed query (Prometheus' parse_query tree), of an instant or
    a range vector (``rate(x[5m])``'s ``x``)."""
    if isinstance(node, dict):
        if node.get("type") in ("vectorSelector", "matrixSelector"):
            yield node
        for value in node.values():
            yield from selectors(value)
    elif isinstance(node, list):
        for value in node:
            yield from selectors(value)


def groupings(node: Any) -> Iterator[tuple[list[str], Any]]:
    """(labels grouped by, the expression aggregated) of each ``by`` aggregation."""
    if isinstance(node, dict):
        if node.get("type") == "aggregation" and not node.get("without"):
            yield node.get("grouping") or [], node.get("expr")
        for value in node.values():
            yield from groupings(value)
    elif isinstance(node, list):
        for value in node:
            yield from groupings(value)


def dashboard_queries() -> list[str]:
    out = []
    for panel in DASHBOARD["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            out.append(expr)
    return out


def test_prometheus_scrapes_gitsync_and_every_expression_selects_series(
    tool: Any, kube: Kube, kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    prometheus_bin = tool("prometheus")
    repo = tmp_path / "repo"
    (repo / "apps").mkdir(parents=True)
    (repo / "apps" / "a.yaml").write_text(app_yaml(namespace, "a"))
    secret = tmp_path / "secret"
    secret.write_text("s3cret")
    flags = (
        *("--sharding", "--repo", str(repo), "--path", "apps", "--interval", "5"),
        *("--drift-policy", "report", "--webhook-secret-file", str(secret)),
    )
    daemon = Replica(kubeconfig, namespace, tmp_path / "gitsync.log", flags)
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(RULES["spec"], sort_keys=False))
    prometheus = Prometheus(prometheus_bin, tmp_path, f"127.0.0.1:{daemon.port}", rules)
    try:
        wait_until(prometheus.ready, timeout=60, what="Prometheus ready")
        wait_until(daemon.up, timeout=60, what="gitsync serving /metrics")
        wait_until(
            lambda: (get(kube, "MyApp", namespace, "a") or {}).get("status"),
            timeout=60,
            what="the MyApp synced",
        )
        # drift that stays (policy report), so that a drifted MyApp has its series
        kube.request(
            "PATCH",
            path_of("Deployment", namespace, "a"),
            body={"spec": {"replicas": 3}},
            content_type="application/merge-patch+json",
            params={"fieldManager": "kubectl-edit"},
        )

        def scraped() -> bool:
            found = prometheus.api(
                "query", query='gitsync_drift_since_timestamp_seconds{myapp!=""}'
            )
            up = prometheus.api("query", query='up{job="gitsync"} == 1')
            return bool(found["result"]) and bool(up["result"])

        wait_until(scraped, timeout=60, interval=1.0, what="the drift scraped")
        # every rule group is evaluated without error
        groups = prometheus.api("rules")["groups"]
        evaluated = [r for g in groups for r in g["rules"]]
        assert len(evaluated) == sum(len(g["rules"]) for g in RULES["spec"]["groups"])
        wait_until(
            lambda: all(
                r.get("health") == "ok"
                for g in prometheus.api("rules")["groups"]
                for r in g["rules"]
            ),
            timeout=20,
            what="every rule evaluated, healthy",
        )
        expressions = [r["expr"] for g in RULES["spec"]["groups"] for r in g["rules"]]
        expressions += dashboard_queries()
        missing = []
        for expr in expressions:
            tree = prometheus.api("parse_query", query=expr)
            for sel in selectors(tree):
                text = _selector_text(sel)
                if not prometheus.api("query", query=text)["result"]:
                    missing.append(f"{text} (in {expr.strip()[:80]})")
            for labels, inner in groupings(tree):
                for sel in selectors(inner):
                    text = _selector_text(sel)
                    series = prometheus.api("query", query=text)["result"]
                    for label in labels:
                        if not any(label in s["metric"] for s in series):
                            missing.append(f"{text} has no label {label} (in {expr[:60]})")
        assert not missing, "\n".join(missing)
    finally:
        prometheus.stop()
        daemon.stop(signal.SIGKILL)


def _selector_text(sel: dict[str, Any]) -> str:
    matchers = [m for m in sel.get("matchers") or [] if m["name"] != "__name__" or m["type"] != "="]
    ops = {"=": "=", "!=": "!=", "=~": "=~", "!~": "!~"}
    inner = ",".join(f"{m['name']}{ops[m['type']]}{json.dumps(m['value'])}" for m in matchers)
    return f"{sel.get('name', '')}{{{inner}}}"


def test_the_dashboard_is_grafana_json_with_a_query_in_every_panel() -> None:
    assert DASHBOARD["title"] and DASHBOARD["uid"] and DASHBOARD["schemaVersion"] >= 36
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for panel in DASHBOARD["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["title"] and panel["targets"], panel
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]), panel
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            assert re.search(r"\bgitsync_|\bprocess_", target["expr"]), target
    names = {v["name"] for v in DASHBOARD["templating"]["list"]}
    assert names == {"datasource", "namespace", "job"}
