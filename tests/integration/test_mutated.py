"""A value a mutating admission webhook rewrites (a registry mirror rewriting images):
the server stores something else than gitsync sends, so every reconcile sees a
difference, and its dry-run (which runs admission too) shows the server would store
exactly what is live. Nothing is written; what the step leaves stays in status.

The webhook is a real HTTPS server on loopback that kube-apiserver calls, registered
for this test's namespace only.
"""

from __future__ import annotations

import base64
import http.server
import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.reconcile.controller import Controller
from tests.integration.test_drift import drift_of, start_app
from tests.support import admission_webhook, get, wait_until

MIRROR = "mirror.local/"


class MirrorServer(http.server.ThreadingHTTPServer):
    #: set: images are rewritten; clear: every request is let through unchanged
    rewriting: threading.Event


class Mirror(http.server.BaseHTTPRequestHandler):
    """Rewrites the image of every Deployment to the mirror's, as admission."""

    server: MirrorServer

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        image = request["object"]["spec"]["template"]["spec"]["containers"][0]["image"]
        response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
        if self.server.rewriting.is_set() and not image.startswith(MIRROR):
            patch = [
                {
                    "op": "replace",
                    "path": "/spec/template/spec/containers/0/image",
                    "value": MIRROR + image,
                }
            ]
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        body = json.dumps({**review, "response": response}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def mirror_webhook(kube: Kube, namespace: str, tmp_path: Path) -> Iterator[threading.Event]:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    server = MirrorServer(("127.0.0.1", 0), Mirror)
    server.rewriting = threading.Event()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client_config = {
        "url": f"https://127.0.0.1:{server.server_address[1]}/mutate",
        "caBundle": base64.b64encode(cert.read_bytes()).decode(),
    }
    try:
        with admission_webhook(
            kube,
            "MutatingWebhookConfiguration",
            namespace,
            name="mirror.gitsync.test",
            client_config=client_config,
            resource=("apps", "deployments"),
            timeout=10,
        ):
            yield server.rewriting
    finally:
        server.shutdown()
        server.server_close()


def test_what_a_step_leaves_stays_in_status_when_admission_rewrites_a_value(
    kube: Kube, namespace: str, controller: Controller, mirror_webhook: threading.Event
) -> None:
    key = f"{namespace}/web"
    start_app(kube, namespace, "web", replicas=2)
    scaler = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"replicas": 6},
    }
    # another controller takes replicas (as an HPA-like owner would): a conflict
    kube.apply(path_of("Deployment", namespace, "web"), scaler, field_manager="hpa-sim", force=True)
    conflict = ("Deployment/web", "spec.replicas", "hpa-sim", True)

    def entries() -> list[tuple[Any, ...]]:
        return [
            (d["object"], d["path"], d["manager"], d["conflict"])
            for d in drift_of(kube, namespace, "web")
        ]

    wait_until(lambda: entries() == [conflict], what="the conflict in status")
    # now a registry mirror rewrites images, and the MyApp moves to a new one
    mirror_webhook.set()
    kube.request(
        "PATCH",
        path_of("MyApp", namespace, "web"),
        body={"spec": {"image": "nginx:1.28"}},
        content_type="application/merge-patch+json",
    )

    def image() -> str:
        dep = get(kube, "Deployment", namespace, "web") or {}
        return str(dep["spec"]["template"]["spec"]["containers"][0]["image"])

    # applied, and stored as the mirror's: from now on every reconcile differs from
    # the server's copy, and its dry-run shows nothing to write
    wait_until(lambda: image() == MIRROR + "nginx:1.28", what="the mirror's image stored")
    controller.reconcile(key)
    assert controller.wait_idle(30)
    assert entries() == [conflict]
    app = get(kube, "MyApp", namespace, "web")
    assert app is not None
    drifted = next(c for c in app["status"]["conditions"] if c["type"] == "Drifted")
    assert drifted["status"] == "True"
    dep = get(kube, "Deployment", namespace, "web")
    assert dep is not None and dep["spec"]["replicas"] == 6
    assert controller.events.flush(10), "Events still queued"
    events = kube.list(resource_path("v1", "events", namespace))["items"]
    assert [e["message"] for e in events if e["reason"] == "DriftResolved"] == []
