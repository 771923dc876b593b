"""A MyApp and the Deployment the API server stores for it, shared by the drift tests."""

from __future__ import annotations

from gitsync.model.api import Obj

UID = "6f1c2a7e-2b7a-4d8e-9c41-0a6c9b1f2d3e"
APP = 'k:{"name":"app"}'
C = "spec.template.spec.containers[name=app]"

MYAPP: Obj = {
    "apiVersion": "apps.example.com/v1",
    "kind": "MyApp",
    "metadata": {"name": "web", "namespace": "shop", "uid": UID},
    "spec": {
        "image": "nginx:1.27",
        "replicas": 3,
        "port": 8080,
        "env": [{"name": "LOG_LEVEL", "value": "debug"}, {"name": "MODE", "value": "prod"}],
        "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": {"cpu": "1000m"}},
    },
}
SELECTOR = {"app.kubernetes.io/instance": "web", "app.kubernetes.io/name": "web"}


def live_deployment() -> Obj:
    """The Deployment as the API server stores it after gitsync's apply: defaults and all."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "0d9a4f5e-1111-4c2b-8d3e-5a6b7c8d9e0f",
            "resourceVersion": "5120",
            "generation": 1,
            "creationTimestamp": "2025-06-01T10:00:00Z",
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "labels": {
                **SELECTOR,
                "app.kubernetes.io/managed-by": "gitsync",
                "gitsync.apps.example.com/bucket": "210",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps.example.com/v1",
                    "kind": "MyApp",
                    "name": "web",
                    "uid": UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": 3,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": dict(SELECTOR)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            },
            "template": {
                "metadata": {"labels": dict(SELECTOR)},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "nginx:1.27",
                            "imagePullPolicy": "IfNotPresent",
                            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                            "env": [
                                {"name": "LOG_LEVEL", "value": "debug"},
                                {"name": "MODE", "value": "prod"},
                            ],
                            "resources": {
                                "limits": {"cpu": "1"},
                                "requests": {"cpu": "250m", "memory": "128Mi"},
                            },
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File",
                        }
                    ],
                    "dnsPolicy": "ClusterFirst",
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "securityContext": {},
                    "terminationGracePeriodSeconds": 30,
                },
            },
        },
        "status": {"replicas": 3, "availableReplicas": 3, "observedGeneration": 1},
    }


def container(obj: Obj) -> Obj:
    found: Obj = obj["spec"]["template"]["spec"]["containers"][0]
    return found
