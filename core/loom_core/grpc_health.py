"""The standard gRPC health service (grpc.health.v1.Health) on every plane's server.

Compose's health checks (`python -m loom_runner.probe grpc://…`) and Kubernetes' native gRPC
probes call `Check`; it needs no token and is not an op, so the op chain lets it through. The
server answers SERVING for "" (the whole server) and for `loom.<plane>` once it listens, and
NOT_SERVING from the moment it starts to stop.
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


async def serve_health(server: grpc.aio.Server, plane: str) -> health.aio.HealthServicer:
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    for service in ("", f"loom.{plane}"):
        await servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    return servicer
