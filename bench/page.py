"""What an open drift page costs per minute at N MyApps: the bytes its one poll a second
downloads when nothing changes, asked plainly (every answer the whole JSON, built
again, as before the page sent its ETag) and asked as the page asks now (``If-None-Match``: 304, no
body), and the server's time per poll either way. In process: the daemon's page over
caches of N MyApps with status, a tenth of them drifted; no cluster.

    python -m bench.page [N ...]
"""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace
from typing import Any, cast

from gitsync.daemon.httpproto import Request, Response, render
from gitsync.daemon.ui import DriftPage
from gitsync.reconcile.controller import Controller
from tests.fakes import FakeCache

POLLS = 60  # a minute of the page's polls


class Cache(FakeCache):
    """A cache whose version is a counter, as the informer's (FakeCache's is its JSON,
    itself the cost of a whole dump)."""

    @property
    def version(self) -> str:
        return "1"


def fleet(n: int) -> tuple[Cache, Cache]:
    myapps, deployments = Cache(), Cache()
    for i in range(n):
        name = f"app-{i:05}"
        drift = (
            [{"object": f"Deployment/{name}", "path": "spec.replicas", "desired": 2, "live": 5,
              "manager": "kubectl", "operation": "Update", "time": "2026-12-05T10:00:00Z"}]
            if i % 10 == 0
            else []
        )  # fmt: skip
        myapps.objects[f"shop/{name}"] = {
            "metadata": {"namespace": "shop", "name": name},
            "spec": {"image": "nginx:1.27", "replicas": 2},
            "status": {
                "phase": "Available",
                "availableReplicas": 2,
                "source": {"revision": "main@sha1:" + "a" * 40, "path": f"apps/{name}.yaml"},
                "conditions": [
                    {"type": "Synced", "status": "True"},
                    {"type": "Ready", "status": "True"},
                    {"type": "Drifted", "status": "True" if drift else "False"},
                ],
                "drift": drift,
            },
        }
    return myapps, deployments


def measure(n: int) -> dict[str, Any]:
    myapps, deployments = fleet(n)
    operator = SimpleNamespace(myapps=myapps, deployments=deployments)
    page = DriftPage(cast(Controller, operator), None)
    first = page.handle(Request("GET", "/api/v1/apps", {}, b"", "bench"))
    etag = dict(first.headers)["ETag"]
    plain = conditional = 0
    start = time.perf_counter()
    for _ in range(POLLS):
        # as before: the document built and sent whole at every poll
        body = json.dumps(page.apps(), default=str)
        plain += len(render(Response(200, body, "application/json", first.headers)))
    plain_s = (time.perf_counter() - start) / POLLS
    ask = {"If-None-Match": etag}
    start = time.perf_counter()
    for _ in range(POLLS):
        conditional += len(render(page.handle(Request("GET", "/api/v1/apps", ask, b"", "b"))))
    conditional_s = (time.perf_counter() - start) / POLLS
    return {
        "myapps": n,
        "json_bytes": len(first.body),
        "bytes_per_minute_plain": plain,
        "bytes_per_minute_conditional": conditional,
        "ms_per_poll_plain": round(plain_s * 1000, 2),
        "ms_per_poll_conditional": round(conditional_s * 1000, 3),
    }


def main(argv: list[str]) -> int:
    for n in [int(a) for a in argv] or [1000, 5000]:
        print(measure(n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
