"""Configuration errors name the source that was tried, as the user gave it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitsync.errors import ConfigError
from gitsync.kube.kubeconfig import Source, choose_source, load_configuration


def kubeconfig(path: Path) -> Path:
    clusters = [
        {"name": n, "cluster": {"server": f"https://{n}.example:6443"}} for n in ("one", "two")
    ]
    contexts = [{"name": n, "context": {"cluster": n, "user": "u"}} for n in ("one", "two")]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "contexts": contexts,
        "users": [{"name": "u", "user": {"token": "t"}}],
        "current-context": "one",
    }
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def message(**kw: str) -> str:
    with pytest.raises(ConfigError) as e:
        load_configuration(**kw)
    return str(e.value)


def test_choose_follows_kubectl_order() -> None:
    home = Path("/nowhere/.kube/config")
    assert choose_source("/a", {"KUBECONFIG": "/b"}, home) == Source("flag", "/a")
    assert choose_source(None, {"KUBECONFIG": "/b"}, home) == Source("env", "/b")
    assert choose_source(None, {}, home) == Source("home", str(home))
    # in a Pod, a kubeconfig that is not there gives way to the service account
    pod = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    assert choose_source(None, pod, home).kind == "in-cluster"
    assert choose_source(None, {**pod, "KUBECONFIG": "/b"}, home).kind == "in-cluster"
    assert choose_source("/a", pod, home) == Source("flag", "/a")


def test_missing_kubeconfig_file_named_as_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert message(kubeconfig="/nonexistent") == "--kubeconfig /nonexistent: no such file"
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")
    assert message() == "$KUBECONFIG=/nonexistent: no such file"
    monkeypatch.delenv("KUBECONFIG")
    home = tmp_path / "home" / ".kube" / "config"
    assert message() == (
        f"kubeconfig {home}: no such file (and not in a Pod: no in-cluster configuration)"
    )


def test_unknown_context_named_with_the_ones_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = kubeconfig(tmp_path / "config")
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert (
        message(context="foo") == f"--context foo: no such context in $KUBECONFIG={path} (one, two)"
    )
    assert load_configuration(context="two").host == "https://two.example:6443"
    assert load_configuration(str(path)).host == "https://one.example:6443"


def test_in_cluster_when_no_kubeconfig_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    # no service-account token on this machine: the in-cluster attempt is what failed
    assert message().startswith("cannot load the in-cluster configuration (no kubeconfig found)")
    assert message(context="foo").startswith("--context foo: no kubeconfig to take it from")


def test_a_broken_kubeconfig_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("clusters: [\n")
    text = message(kubeconfig=str(bad))
    assert text.startswith(f"cannot load Kubernetes configuration from --kubeconfig {bad}: ")
    assert "\n" not in text
