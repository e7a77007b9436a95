"""The gRPC door as a client nobody here wrote sees it: stubs generated from `proto/` alone
(grpc_tools.protoc into a temp dir, run in a process that has no Loom package), the standard
reflection client, and the standard health service, on every plane's server."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import grpc
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from loom_runner.embedded import Instance

from tests.conftest import Tenant

CLIENT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import grpc
import loom_api
assert loom_api.__file__.startswith(sys.argv[1]), loom_api.__file__  # the generated stubs, not Loom's package
from grpc_status import rpc_status
from google.rpc import error_details_pb2
from loom_api.identity.v1 import identity_pb2, identity_pb2_grpc
from loom_api.tasks.v1 import tasks_pb2, tasks_pb2_grpc
address, token = sys.argv[2], sys.argv[3]
md = [("authorization", "Bearer " + token)]
with grpc.insecure_channel(address) as channel:
    me = identity_pb2_grpc.IdentityServiceStub(channel).WhoAmI(identity_pb2.WhoAmIRequest(), metadata=md)
    out = {"subject": me.subject}
    try:
        tasks_pb2_grpc.TaskServiceStub(channel).GetTask(tasks_pb2.GetTaskRequest(task_id="abcdefgh1234"), metadata=md)
    except grpc.RpcError as exc:
        status = rpc_status.from_call(exc)
        info = error_details_pb2.ErrorInfo()
        status.details[0].Unpack(info)
        out["wrong_plane"] = {"code": exc.code().name, "reason": info.reason, "message": status.message, "detail": json.loads(info.metadata["detail"])}
print(json.dumps(out))
"""


async def test_stubs_generated_from_proto_alone_call_a_plane_and_the_wrong_plane_names_the_right_one(
    stack: Instance, tenant: Tenant, generated_stubs: Path
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLIENT, str(generated_stubs), stack.grpc_address("identity"), tenant.token,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    answer = json.loads(out)
    assert answer["subject"] == "user:admin"
    wrong = answer["wrong_plane"]
    assert wrong["code"] == "UNIMPLEMENTED" and wrong["reason"] == "UNKNOWN_OP"
    assert wrong["detail"]["plane"] == "tasks" and wrong["detail"]["op"] == "task.get"
    assert "tasks plane" in wrong["message"]


def _reflect(address: str) -> dict[str, list[str]]:
    with grpc.insecure_channel(address) as channel:
        db = ProtoReflectionDescriptorDatabase(channel)
        pool = DescriptorPool(db)
        return {name: [m.name for m in pool.FindServiceByName(name).methods] for name in db.get_services()}


async def test_every_plane_server_answers_reflection_with_its_services_and_methods(stack: Instance) -> None:
    assert stack.servers
    for plane, server in stack.servers.items():
        services = await asyncio.to_thread(_reflect, stack.grpc_address(plane))
        for name in server.service_names():
            assert name in services, (plane, services)
            ops = [op.method for op in stack.runtime.catalog.for_plane(plane) if op.service == name]
            assert sorted(services[name]) == sorted(ops)
        assert "grpc.health.v1.Health" in services


async def test_every_plane_server_reports_serving_on_the_standard_health_service(stack: Instance) -> None:
    for plane, server in stack.servers.items():
        async with grpc.aio.insecure_channel(stack.grpc_address(plane)) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            for service in ("", plane, *server.service_names()):
                answer = await health.Check(health_pb2.HealthCheckRequest(service=service))
                assert answer.status == health_pb2.HealthCheckResponse.SERVING, (plane, service)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"))
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
