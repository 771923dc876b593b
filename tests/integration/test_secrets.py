"""Secrets hygiene, end to end: ``gitsync run`` as a process against the real control plane,
once fetching over HTTPS with a token (git http-backend behind HTTP Basic auth, TLS with a
private CA) and once over SSH with a deploy key (a real OpenSSH sshd on loopback, the host
key pinned by known_hosts). Each goes through a sync, a commit, drift, failing fetches, a
push webhook and a prune; then ``gitsync validate``, ``diff`` and ``sync`` run with the same
credentials, failing and succeeding. Everything gitsync said or left is then searched for
the credential in each spelling it could take (:mod:`tests.secretscan`): every log line,
Event, MyApp, ConfigMap, the metrics, the drift page and its API, every CLI output, the
command line and environment of the daemon and every child sampled while it ran, and every
file in the cache and temporary directories. The figure is printed as ``FIGURES``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gitsync.kube.client import Kube, resource_path
from tests.gitserver import Upstream, free_port, serve_http_git
from tests.integration.test_drift import drift_of, kubectl
from tests.netfixtures import self_signed
from tests.secretscan import Haystack, Needle, ProcessTreeSampler, key_needles, token_needles
from tests.sshserver import available as sshd_available
from tests.sshserver import sshd_for
from tests.support import app_yaml, get, wait_until

GITSYNC = str(Path(sys.executable).parent / "gitsync")
HOOK_SECRET = "hook-" + secrets.token_hex(12)


@dataclass
class Transport:
    """How gitsync reaches the repository, and how a test breaks and mends that."""

    url: str
    credential_args: list[str]
    needles: list[Needle]
    faults: list[tuple[str, Callable[[], None], Callable[[], None]]]  # what, break, mend
    secret_file: Path  # where the credential is: the search must find it there
    misuses: list[tuple[str, list[str]]]  # what, the CLI's source arguments
    helper: str  # the process git runs for this transport (its comm, 15 characters at most)
    proof: Callable[[], bool] = lambda: True  # the server saw the credential used


def move_repo(upstream: Upstream) -> tuple[Callable[[], None], Callable[[], None]]:
    """A wrong path: the repository is not where the URL says (the server answers)."""
    away = upstream.bare.with_name("moved-away.git")

    def wrong() -> None:
        upstream.bare.rename(away)

    def right() -> None:
        away.rename(upstream.bare)

    return wrong, right


@pytest.fixture
def https_transport(upstream: Upstream, tmp_path: Path) -> Iterator[Transport]:
    tls = tmp_path / "tls"
    tls.mkdir()
    cert, key = self_signed(tls)
    # characters that URL-encoding and base64 spell differently from the token itself
    token = f"gst_{secrets.token_hex(16)}+/={secrets.token_hex(4)}"
    token_file = tmp_path / "creds" / "token"
    token_file.parent.mkdir(mode=0o700)
    token_file.write_text(token + "\n")
    with serve_http_git(upstream, token, tls=(cert, key)) as server:
        wrong, right = move_repo(upstream)
        yield Transport(
            url=server.url,
            credential_args=["--token-file", str(token_file), "--git-ca-file", str(cert)],
            needles=token_needles(token),
            faults=[
                ("wrong path", wrong, right),
                # the server stops taking the token (a revoked one): 401 on every fetch
                (
                    "token refused",
                    lambda: server.set_token("revoked"),
                    lambda: server.set_token(token),
                ),
            ],
            secret_file=token_file,
            helper="git-remote-http",
            misuses=[
                # some Git hosts take a token as a query parameter; gitsync must not
                ("token in the query", ["--repo", f"{server.url}?private_token={token}"]),
                ("token in the URL", ["--repo", server.url.replace("//", f"//git:{token}@")]),
                # the token file given as a CA bundle: what the TLS error says of it
                ("token as the CA", ["--repo", server.url, "--git-ca-file", str(token_file)]),
            ],
            proof=lambda: any(token_needles(token)[2].value.decode() in r for r in server.requests),
        )


@pytest.fixture
def ssh_transport(upstream: Upstream, tmp_path: Path) -> Iterator[Transport]:
    if not sshd_available():
        pytest.fail("/usr/sbin/sshd or git-shell is missing: run `make sshd`")
    sshd = sshd_for(upstream.bare, tmp_path / "sshd")
    sshd.start()
    wrong, right = move_repo(upstream)
    try:
        yield Transport(
            url=sshd.url,
            credential_args=[
                *("--ssh-key-file", str(sshd.key)),
                *("--known-hosts-file", str(sshd.known_hosts)),
            ],
            needles=key_needles(sshd.key),
            faults=[("wrong path", wrong, right), ("sshd down", sshd.stop, sshd.start)],
            secret_file=sshd.key,
            helper="ssh",
            misuses=[
                # the key given as known_hosts and as the CA: what ssh says of its lines
                (
                    "key as known_hosts",
                    [
                        *("--repo", sshd.url, "--ssh-key-file", str(sshd.key)),
                        *("--known-hosts-file", str(sshd.key)),
                    ],
                ),
                (
                    "host key unknown",
                    [
                        *("--repo", sshd.url, "--ssh-key-file", str(sshd.key)),
                        *("--known-hosts-file", os.devnull),
                    ],
                ),
            ],
            proof=lambda: "Accepted publickey" in sshd.log.read_text(),
        )
    finally:
        sshd.stop()


class Daemon:
    """``gitsync run`` as a process, JSON logs at debug level, stdout and stderr apart."""

    def __init__(self, kubeconfig: str, namespace: str, t: Transport, work: Path) -> None:
        self.port = free_port()
        self.work = work
        self.tmp = work / "tmp"  # TMPDIR: whatever temporary file gitsync makes is here
        self.tmp.mkdir(mode=0o700)
        hook = work / "hook-secret"
        hook.write_text(HOOK_SECRET)
        self.env = {
            **os.environ,
            "KUBECONFIG": kubeconfig,
            "TMPDIR": str(self.tmp),
            "GITSYNC_LOG_FORMAT": "json",
            "GITSYNC_LOG_LEVEL": "debug",
        }
        argv = [
            *(GITSYNC, "run", "--repo", t.url, "--path", "apps", "-n", namespace),
            *("--watch-namespace", namespace, "--status-namespace", namespace),
            *("--interval", "2", "--listen", f"127.0.0.1:{self.port}"),
            *("--webhook-secret-file", str(hook), "--cache-dir", str(work / "cache")),
            *t.credential_args,
        ]
        self.stdout, self.stderr = work / "daemon.stdout", work / "daemon.stderr"
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.proc = subprocess.Popen(argv, env=self.env, stdout=out, stderr=err)

    def http(self, method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, str]:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=body or None, method=method
        )
        for k, v in headers.items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as e:
            return int(e.code), e.read().decode()
        except OSError:
            return 0, ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def status_of(kube: Kube, namespace: str) -> dict[str, str]:
    maps = kube.list(resource_path("v1", "configmaps", namespace))["items"]
    found = [m for m in maps if m["metadata"]["name"].startswith("gitsync-status")]
    return dict(found[0].get("data") or {}) if found else {}


def run_scenario(
    kube: Kube,
    kubeconfig: str,
    kubectl_bin: str,
    namespace: str,
    upstream: Upstream,
    t: Transport,
    work: Path,
) -> None:
    ns = namespace
    upstream.commit(
        {
            "apps/a.yaml": app_yaml(ns, "a"),
            "apps/b.yaml": app_yaml(ns, "b", driftPolicy="report"),
            "apps/c.yaml": app_yaml(ns, "c"),
        }
    )
    haystack = Haystack()
    daemon = Daemon(kubeconfig, ns, t, work)
    try:
        with ProcessTreeSampler(daemon.proc.pid) as sampler:
            # a sync
            wait_until(
                lambda: all(get(kube, "Deployment", ns, n) for n in "abc"),
                timeout=90,
                what="the first sync",
            )
            # a commit
            upstream.commit({"apps/a.yaml": app_yaml(ns, "a", replicas=2)})
            wait_until(
                lambda: (get(kube, "MyApp", ns, "a") or {}).get("spec", {}).get("replicas") == 2,
                timeout=60,
                what="the commit applied",
            )
            # drift: reported on b, corrected on a
            kubectl(kubectl_bin, kubeconfig, "-n", ns, "scale", "deployment/b", "--replicas=3")
            kubectl(kubectl_bin, kubeconfig, "-n", ns, "scale", "deployment/a", "--replicas=4")
            wait_until(lambda: drift_of(kube, ns, "b"), timeout=60, what="drift reported")
            wait_until(
                lambda: (get(kube, "Deployment", ns, "a") or {})["spec"]["replicas"] == 2,
                timeout=60,
                what="drift corrected",
            )
            # failing fetches, each seen in the status, then mended
            for what, breaks, mends in t.faults:
                breaks()
                failed = wait_until(
                    lambda: (st := status_of(kube, ns)).get("result") == "Failed" and st,
                    timeout=60,
                    what=f"{what}: the failure in the status ConfigMap",
                )
                haystack.add(f"status during {what}", json.dumps(failed))
                mends()
                wait_until(
                    lambda: status_of(kube, ns).get("result", "") not in ("", "Failed"),
                    timeout=60,
                    what=f"{what}: recovery",
                )
            # a push webhook
            upstream.commit({"apps/d.yaml": app_yaml(ns, "d")})
            body = b'{"ref": "refs/heads/main"}'
            sig = "sha256=" + hmac.new(HOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
            code, text = daemon.http("POST", "/hooks/git", body, **{"X-Hub-Signature-256": sig})
            assert code == 202, text
            haystack.add("webhook reply", text)
            wait_until(lambda: get(kube, "MyApp", ns, "d"), timeout=60, what="d via the webhook")
            # a prune
            upstream.commit({"apps/c.yaml": None})
            wait_until(lambda: get(kube, "MyApp", ns, "c") is None, timeout=60, what="c pruned")
            collect_served(haystack, daemon, ns)
            collect_cluster(haystack, kube, kubeconfig, ns)
            cli = run_cli(haystack, daemon, ns, t)
        assert t.proof(), "the server never saw the credential: the scenario proves nothing"
    finally:
        daemon.stop()
    haystack.add("daemon stdout", daemon.stdout.read_bytes())
    haystack.add("daemon stderr", daemon.stderr.read_bytes())
    samplers = [sampler, *cli.samplers]
    for each in samplers:
        each.add_to(haystack)
    commands = sum(each.commands for each in samplers)
    names = set().union(*(each.names for each in samplers))
    log_lines = daemon.stdout.read_bytes().count(b"\n") + daemon.stderr.read_bytes().count(b"\n")
    haystack.add_tree(work / "cache")
    haystack.add_tree(work / "cli-cache")
    haystack.add_tree(daemon.tmp)

    # the search can find what it looks for: the credential's own file is a hit
    control = Haystack()
    control.add("the credential's file", t.secret_file.read_bytes())
    assert control.search(t.needles), "the needles are not found even where they are"

    hits = haystack.search([*t.needles, Needle("webhook secret", HOOK_SECRET.encode())])
    print(
        f"FIGURES secrets {t.url.split(':')[0]}: hits {len(hits)}; searched {len(haystack.items)}"
        f" items, {haystack.lines} lines ({log_lines} daemon log lines), {haystack.files} files,"
        f" {commands} process command lines ({', '.join(sorted(names))}), {cli.count} CLI runs;"
        f" {len(t.needles)} spellings"
    )
    assert hits == [], "\n".join(hits)
    # the sampling saw git and its transport at work: their argument lists were searched
    assert {"git", t.helper} <= names, names


def collect_served(haystack: Haystack, daemon: Daemon, ns: str) -> None:
    for path in (
        "/metrics",
        "/",
        "/api/v1/apps",
        f"/api/v1/apps/{ns}/a",
        f"/api/v1/apps/{ns}/b",
        f"/apps/{ns}/b",
        "/healthz",
        "/readyz",
    ):
        code, text = daemon.http("GET", path)
        assert code == 200, f"{path}: {code}"
        haystack.add(f"GET {path}", text)
    # a refused webhook's answer too
    haystack.add("bad webhook", daemon.http("POST", "/hooks/git", b"{}")[1])


def collect_cluster(haystack: Haystack, kube: Kube, kubeconfig: str, ns: str) -> None:
    for api, plural in (
        ("v1", "events"),
        ("events.k8s.io/v1", "events"),
        ("v1", "configmaps"),
        ("apps.example.com/v1", "myapps"),
        ("apps/v1", "deployments"),
        ("coordination.k8s.io/v1", "leases"),
    ):
        for obj in kube.list(resource_path(api, plural, ns))["items"]:
            haystack.add(f"{plural} {obj['metadata']['name']}", json.dumps(obj))
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    for fmt in (["-o", "json"], []):
        out = subprocess.run(
            [GITSYNC, "drift", "-n", ns, *fmt], capture_output=True, timeout=120, env=env
        )
        haystack.add(f"gitsync drift {fmt}", out.stdout + out.stderr)


def run_cli(haystack: Haystack, daemon: Daemon, ns: str, t: Transport) -> CliRuns:
    """validate, diff and sync with the daemon's credentials, as JSON and text logs: with
    none of the faults, with each, and with each of the transport's misuses (a credential
    where it does not belong: refused or failing, without showing it)."""
    runs = CliRuns()
    source = ["--repo", t.url, *t.credential_args]
    common = ["--path", "apps", "-n", ns, "--cache-dir", str(daemon.work / "cli-cache")]
    nothing: Callable[[], None] = lambda: None  # noqa: E731
    cases = [("ok", nothing, nothing, source), *((w, b, m, source) for w, b, m in t.faults)]
    cases += [(what, nothing, nothing, args) for what, args in t.misuses]
    for what, breaks, mends, args in cases:
        breaks()
        try:
            for command in ("validate", "diff", "sync"):
                for log_format in ("json", "text"):
                    env = {**daemon.env, "GITSYNC_LOG_FORMAT": log_format}
                    extra = ["--status-namespace", ns] if command == "sync" else []
                    argv = [GITSYNC, command, *args, *common, *extra]
                    proc = subprocess.Popen(
                        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
                    )
                    # a misuse's credential is in gitsync's own arguments: the user put
                    # it there. What counts is whether gitsync hands it on
                    misuse = args is not source
                    with ProcessTreeSampler(proc.pid, children_only=misuse) as sampler:
                        out, err = proc.communicate(timeout=180)
                    runs.samplers.append(sampler)
                    runs.count += 1
                    if what != "ok":
                        assert proc.returncode != 0, f"{command} with {what} succeeded"
                    assert b"Traceback" not in err, err.decode()
                    haystack.add(f"{command} ({what}, {log_format})", out + err)
        finally:
            mends()
    return runs


@dataclass
class CliRuns:
    count: int = 0
    samplers: list[ProcessTreeSampler] = field(default_factory=list)


def test_an_https_token_appears_nowhere(
    kube: Kube,
    kubeconfig: str,
    kubectl_bin: str,
    crd: str,
    namespace: str,
    upstream: Upstream,
    https_transport: Transport,
    tmp_path: Path,
) -> None:
    work = tmp_path / "run"
    work.mkdir()
    run_scenario(kube, kubeconfig, kubectl_bin, namespace, upstream, https_transport, work)


def test_an_ssh_key_appears_nowhere(
    kube: Kube,
    kubeconfig: str,
    kubectl_bin: str,
    crd: str,
    namespace: str,
    upstream: Upstream,
    ssh_transport: Transport,
    tmp_path: Path,
) -> None:
    work = tmp_path / "run"
    work.mkdir()
    run_scenario(kube, kubeconfig, kubectl_bin, namespace, upstream, ssh_transport, work)
