"""A container health check with nothing but the image's Python: exit 0 when healthy.

    python -m loom_runner.probe http://127.0.0.1:8080/v1/health/ready   # 200 from the gateway
    python -m loom_runner.probe grpc://127.0.0.1:7000                    # grpc.health.v1 SERVING

Compose runs it as each service's `healthcheck`; Kubernetes uses its own httpGet and gRPC probes.
"""

from __future__ import annotations

import asyncio
import sys
import urllib.request
from urllib.error import URLError

TIMEOUT_SECONDS = 3.0


def check(target: str) -> str | None:
    """None when `target` is healthy, else why not."""
    if target.startswith("grpc://"):
        from .cluster import plane_health

        try:
            asyncio.run(plane_health(target.removeprefix("grpc://"), TIMEOUT_SECONDS))
        except Exception as exc:  # noqa: BLE001 - any failure is "unhealthy"
            return str(exc) or type(exc).__name__
        return None
    if target.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(target, timeout=TIMEOUT_SECONDS) as r:
                return None if r.status == 200 else f"HTTP {r.status}"
        except URLError as exc:
            return str(exc)
        except OSError as exc:
            return type(exc).__name__
    return f"unknown target {target!r} (http://… or grpc://host:port)"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m loom_runner.probe http://host:port/path | grpc://host:port", file=sys.stderr)
        return 2
    problem = check(args[0])
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
