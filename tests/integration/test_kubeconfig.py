"""What the CLI takes from the kubeconfig, or in a Pod from the service account, as kubectl
does: the namespace when no flag names one, the proxy, and the server's trust. Against the
real API server; gitsync runs as a process of its own."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gitsync.cli import common
from gitsync.cli.flags import Flags
from gitsync.errors import APINotFoundError
from gitsync.kube.client import Kube, resource_path
from tests.integration.test_deploy import Install, install  # noqa: F401 (a fixture)
from tests.netfixtures import connect_proxy, self_signed
from tests.support import app_yaml

GITSYNC = str(Path(sys.executable).parent / "gitsync")
UNNAMESPACED = """\
apiVersion: apps.example.com/v1
kind: MyApp
metadata:
  name: {name}
spec:
  image: nginx:1.27
  replicas: 1
"""
# gitsync run the way kubelet starts it in a Pod: no kubeconfig, the service account's
# token, CA and namespace files (here at paths of the test's choosing)
IN_POD = """\
import sys
from pathlib import Path
from kubernetes.config import incluster_config, kube_config
import gitsync.kube.kubeconfig
token, ca, namespace = sys.argv[1:4]
incluster_config.SERVICE_TOKEN_FILENAME = token
incluster_config.SERVICE_CERT_FILENAME = ca
kube_config.KUBE_CONFIG_DEFAULT_LOCATION = "/nonexistent/kubeconfig"
gitsync.kube.kubeconfig.SERVICEACCOUNT_NAMESPACE = Path(namespace)
from gitsync.cli import main
sys.argv = ["gitsync", *sys.argv[4:]]
main()
"""


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without gitsync's, kubectl's or proxy settings."""
    dropped = ("GITSYNC_", "KUBECONFIG", "POD_NAMESPACE", "KUBERNETES_SERVICE_")
    proxies = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(dropped) and k.lower() not in proxies
    }
    return env | {"GITSYNC_LOG_FORMAT": "text"} | extra


def admin_config(kubeconfig: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(Path(kubeconfig).read_text())
    return config


def write(path: Path, config: dict[str, Any]) -> str:
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return str(path)


def unnamespaced_repo(tmp_path: Path, name: str) -> Path:
    apps = tmp_path / "repo" / "apps"
    apps.mkdir(parents=True)
    (apps / f"{name}.yaml").write_text(UNNAMESPACED.format(name=name))
    return tmp_path / "repo"


def status_configmaps(kube: Kube, namespace: str) -> list[str]:
    items = kube.list(resource_path("v1", "configmaps", namespace)).get("items", [])
    return [
        cm["metadata"]["name"]
        for cm in items
        if cm["metadata"]["name"].startswith("gitsync-status")
    ]


def myapp_path(namespace: str, name: str) -> str:
    return resource_path("apps.example.com/v1", "myapps", namespace, name)


# --- namespaces ----------------------------------------------------------------------------


def test_namespaces_default_to_the_kubeconfig_context(
    kubeconfig: str, kube: Kube, crd: str, namespace: str, tmp_path: Path
) -> None:
    config = admin_config(kubeconfig)
    config["contexts"][0]["context"]["namespace"] = namespace
    kc = write(tmp_path / "kubeconfig", config)
    repo = unnamespaced_repo(tmp_path, "web")
    args = ["--kubeconfig", kc, "--repo", str(repo), "--path", "apps"]
    args += ["--allowed-namespaces", namespace, "--cache-dir", str(tmp_path / "cache")]

    proc = subprocess.run(
        [GITSYNC, "sync", *args], capture_output=True, text=True, timeout=120, env=clean_env()
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # what the API server holds: the MyApp, and the sync status, in the context's namespace
    assert kube.get(myapp_path(namespace, "web"))["metadata"]["namespace"] == namespace
    assert status_configmaps(kube, namespace) != []

    drift = subprocess.run(
        # -n only filters the apps shown; the status is read from the context's namespace
        [GITSYNC, "drift", "--kubeconfig", kc, "-n", namespace, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert drift.returncode == 0, drift.stderr
    assert json.loads(drift.stdout)["sync"]["revision"] == "local"


def test_in_a_pod_the_shipped_service_account_needs_no_namespace_flag(
    install: Install,  # noqa: F811 (the fixture imported above)
    kubeconfig: str,
    kube: Kube,
    namespace: str,
    tmp_path: Path,
) -> None:
    """``gitsync sync`` as the shipped ServiceAccount, configured the in-cluster way: the
    Pod's own namespace, where its Role lets it write the status, is the default, as
    kubectl in that Pod would use. (A MyApp that names no namespace would go there too,
    and be refused: gitsync's own namespace is denied to MyApps.)"""
    sa = json.loads(install.kubeconfig.read_text())
    token = tmp_path / "sa" / "token"
    token.parent.mkdir()
    token.write_text(sa["users"][0]["user"]["token"])
    (tmp_path / "sa" / "namespace").write_text(install.namespace)
    cluster = admin_config(kubeconfig)["clusters"][0]["cluster"]
    server = cluster["server"].removeprefix("https://")
    host, _, port = server.rpartition(":")
    apps = tmp_path / "repo" / "apps"
    apps.mkdir(parents=True)
    (apps / "in-pod.yaml").write_text(app_yaml(namespace, "in-pod"))
    (apps / "nameless.yaml").write_text(UNNAMESPACED.format(name="nameless"))
    repo = tmp_path / "repo"
    env = clean_env(KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=port)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            IN_POD,
            str(token),
            cluster["certificate-authority"],
            str(tmp_path / "sa" / "namespace"),
            *("sync", "--repo", str(repo), "--path", "apps"),
            *("--instance-name", "platform-apps"),  # as deploy/config.yaml names it
            *("--cache-dir", str(tmp_path / "cache")),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert "forbidden" not in proc.stderr.lower(), proc.stderr
    # the MyApp naming its namespace is applied; the nameless one would land in the Pod's
    # own namespace, which is refused as a manifest error (so the pass reports a failure)
    assert kube.get(myapp_path(namespace, "in-pod"))["metadata"]["name"] == "in-pod"
    assert f"'{install.namespace}' is denied" in proc.stderr, proc.stderr
    with pytest.raises(APINotFoundError):
        kube.get(myapp_path(install.namespace, "nameless"))
    # the status is where the Role allows it: the Pod's own namespace, with no flag
    assert status_configmaps(kube, install.namespace) == ["gitsync-status-platform-apps"]


# --- the proxy -----------------------------------------------------------------------------


def test_the_kubeconfigs_proxy_url_carries_the_cli(
    kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    config = admin_config(kubeconfig)
    server = config["clusters"][0]["cluster"]["server"].removeprefix("https://")
    with connect_proxy() as proxy:
        config["clusters"][0]["cluster"]["proxy-url"] = proxy.url
        kc = write(tmp_path / "kubeconfig", config)
        proc = subprocess.run(
            [GITSYNC, "drift", "--kubeconfig", kc, "-n", namespace, "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(),
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["apps"] == []
    assert proxy.tunnels and set(proxy.tunnels) == {server}


# --- trust ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "code"), [("sync", 1), ("drift", 2), ("diff", 2), ("run", 1)])
def test_a_wrong_ca_fails_the_cli_at_once_naming_the_server(
    kubeconfig: str, crd: str, tmp_path: Path, command: str, code: int
) -> None:
    config = admin_config(kubeconfig)
    server = config["clusters"][0]["cluster"]["server"]
    wrong_ca, _ = self_signed(tmp_path, "not-the-cluster-ca")
    config["clusters"][0]["cluster"]["certificate-authority"] = str(wrong_ca)
    kc = write(tmp_path / "kubeconfig", config)
    repo = unnamespaced_repo(tmp_path, "web")
    args = {
        "sync": ["--repo", str(repo), "--path", "apps"],
        "diff": ["--repo", str(repo), "--path", "apps"],
        "drift": [],
        "run": ["--listen", "127.0.0.1:0"],
    }[command]
    start = time.monotonic()
    proc = subprocess.run(
        [GITSYNC, command, "--kubeconfig", kc, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == code, proc.stderr
    assert f"TLS with the API server {server} failed" in proc.stderr
    assert "certificate is not trusted" in proc.stderr and "Traceback" not in proc.stderr
    assert elapsed < 15, f"{command} took {elapsed:.1f}s to give up"


def test_refused_credentials_fail_the_cli_at_once_naming_the_server(
    kubeconfig: str, crd: str, tmp_path: Path
) -> None:
    config = admin_config(kubeconfig)
    server = config["clusters"][0]["cluster"]["server"]
    config["users"][0]["user"] = {"token": "not-a-token"}
    kc = write(tmp_path / "kubeconfig", config)
    repo = unnamespaced_repo(tmp_path, "web")
    start = time.monotonic()
    proc = subprocess.run(
        [GITSYNC, "sync", "--kubeconfig", kc, "--repo", str(repo), "--path", "apps"],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
    )
    assert proc.returncode == 1, proc.stderr
    assert f"the API server {server} did not accept the credentials (401" in proc.stderr
    assert time.monotonic() - start < 15


# --- connections ---------------------------------------------------------------------------


def test_gitsync_run_has_a_connection_for_every_thread_that_sends_at_once(
    kubeconfig: str, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A pass's threads (--concurrency), the workers (--workers) and the two watches
    send at once; a pool smaller than that opens connections only to throw them away
    (each a TLS handshake again), and urllib3 warns of each."""
    workers = 4
    kube = common.connect(Flags(kubeconfig=kubeconfig), workers)
    senders = Flags().concurrency + workers
    before = kube.requests["GET"]  # (connect's check of the server)
    watching = [
        threading.Thread(
            target=lambda: list(
                kube.stream(
                    resource_path("v1", "configmaps", namespace),
                    params={"watch": "true", "timeoutSeconds": 5},
                )
            )
        )
        for _ in range(2)
    ]
    together = threading.Barrier(senders)

    def send() -> None:
        for _ in range(5):
            together.wait(30)
            kube.get(resource_path("v1", "namespaces", "", namespace))

    caplog.set_level(logging.WARNING, logger="urllib3.connectionpool")
    try:
        for w in watching:
            w.start()
        with ThreadPoolExecutor(senders) as pool:
            list(pool.map(lambda _i: send(), range(senders)))
        for w in watching:
            w.join(30)
    finally:
        kube.close()
    assert [r.getMessage() for r in caplog.records if "pool is full" in r.getMessage()] == []
    assert kube.requests["GET"] - before == senders * 5
