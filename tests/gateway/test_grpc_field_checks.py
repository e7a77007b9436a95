"""A direct gRPC caller (stubs generated from `proto/` alone, straight to a plane's port) gets the
same generated field checks as REST: the proto's field options, run in the shared interceptor
chain. The same bad input answers INVALID_ARGUMENT over gRPC and 422 over REST, with the same
Loom code, message and detail, for each kind of field option."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from loom_runner.embedded import Instance

from tests.conftest import Tenant

TASK_ID = "abcdefgh1234"

# (op, arguments, the field the refusal names): one case per kind of field option.
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("namespace.create", {}, "name"),  # required
    ("namespace.create", {"name": "Not A Name!"}, "name"),  # pattern
    ("grants.set", {"subject": "user:ann", "role": "owner"}, "role"),  # enum
    ("token.mint", {"subject": "user:ann"}, "(body)"),  # requires
    ("token.mint", {"subject": "user:ann", "roles": {"default": "owner"}}, "roles.default"),  # enum on a map's values
    ("token.mint", {"ttl_seconds": 2592001}, "ttl_seconds"),  # maximum
    ("token.mint", {"ttl_seconds": -5}, "ttl_seconds"),  # minimum
    ("token.revoke", {}, "token_id"),  # one_required_of
    ("task.cancel", {"task_id": TASK_ID, "reason": "x" * 2001}, "reason"),  # max_length
    ("task.cancel", {"task_id": "NOT-AN-ID", "reason": "r"}, "task_id"),  # pattern on an id
    ("task.cancel", {"task_id": TASK_ID, "reason": "   "}, "reason"),  # a required text that is blank
    ("task.defer", {"task_id": TASK_ID, "fence": 1, "resume_at": "tomorrow", "reason": "r"}, "resume_at"),  # timestamp
    ("task.defer", {"task_id": TASK_ID, "resume_at": "2030-01-01T00:00:00Z", "reason": "r"}, "fence"),  # a required int
    ("inbox.register", {"inbox": "box", "posters": [f"user:u{i}" for i in range(201)]}, "posters"),  # max_items
    ("inbox.register", {"inbox": "box", "accept_disclosure": ["secret"]}, "accept_disclosure[0]"),  # enum on a list's items
    ("inbox.register", {"inbox": "box", "default_lease_seconds": 604801}, "default_lease_seconds"),  # range
]

# A client with no Loom package: the generated stubs only. Reads the cases (plane, service,
# method, request message, JSON arguments) on stdin, answers each call's outcome as JSON.
CLIENT = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
import grpc
import loom_api
assert loom_api.__file__.startswith(sys.argv[1]), loom_api.__file__  # the generated stubs, not Loom's package
from google.protobuf import json_format
from google.rpc import error_details_pb2
from grpc_status import rpc_status
addresses, token, namespace = json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
md = [("authorization", "Bearer " + token), ("x-loom-namespace", namespace)]
out = []
for plane, service, method, message, args in json.loads(sys.stdin.read()):
    pb2 = importlib.import_module(f"loom_api.{plane}.v1.{plane}_pb2")
    pb2_grpc = importlib.import_module(f"loom_api.{plane}.v1.{plane}_pb2_grpc")
    request = json_format.ParseDict(args, getattr(pb2, message)())
    with grpc.insecure_channel(addresses[plane]) as channel:
        stub = getattr(pb2_grpc, service.rsplit(".", 1)[1] + "Stub")(channel)
        try:
            getattr(stub, method)(request, metadata=md, timeout=30)
            out.append({"status": "OK"})
        except grpc.RpcError as exc:
            status = rpc_status.from_call(exc)
            info = error_details_pb2.ErrorInfo()
            status.details[0].Unpack(info)
            detail = json.loads(info.metadata["detail"]) if "detail" in info.metadata else None
            out.append({"status": exc.code().name, "code": info.reason, "message": status.message, "detail": detail})
print(json.dumps(out))
"""


async def grpc_answers(stack: Instance, tenant: Tenant, stubs: Path, cases: list[tuple[str, dict[str, Any], str]]) -> list[dict[str, Any]]:
    catalog = stack.runtime.catalog
    calls = []
    for name, args, _ in cases:
        op = catalog.get(name)
        assert op is not None
        calls.append([op.plane, op.service, op.method, op.request_cls.DESCRIPTOR.name, args])
    addresses = {plane: stack.grpc_address(plane) for plane in {c[0] for c in calls}}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLIENT, str(stubs), json.dumps(addresses), tenant.token, tenant.namespace,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate(json.dumps(calls).encode())
    assert proc.returncode == 0, err.decode()
    answers: list[dict[str, Any]] = json.loads(out)
    return answers


async def test_each_kind_of_field_option_is_refused_alike_over_grpc_and_rest(
    stack: Instance, tenant: Tenant, transport: str, generated_stubs: Path
) -> None:
    if transport != "inproc":
        pytest.skip("the plane's gRPC port is the same whichever transport the gateway uses; once is enough")
    answers = await grpc_answers(stack, tenant, generated_stubs, CASES)
    async with tenant.client(**{"X-Loom-Namespace": tenant.namespace}) as c:
        for (name, args, field), over_grpc in zip(CASES, answers, strict=True):
            r = await c.post(f"/v1/{name}", json=args)
            assert r.status_code == 422, (name, args, r.text)
            over_rest = r.json()["error"]
            assert over_grpc["status"] == "INVALID_ARGUMENT", (name, args, over_grpc)
            assert over_rest["code"] == over_grpc["code"] == "VALIDATION_FAILED", (name, over_rest, over_grpc)
            assert over_rest["message"] == over_grpc["message"], (name, over_rest, over_grpc)
            assert over_rest["detail"] == over_grpc["detail"], (name, over_rest, over_grpc)
            assert over_grpc["detail"]["field"] == field, (name, over_grpc)


async def test_an_empty_value_a_schema_refuses_is_an_absent_field_on_the_wire(
    stack: Instance, tenant: Tenant, transport: str, generated_stubs: Path
) -> None:
    """proto3 does not send a string, number or list left at its default: what REST refuses as
    too short (min_length) gRPC cannot send, and the refusal it gets is the absent field's."""
    if transport != "inproc":
        pytest.skip("the plane's gRPC port is the same whichever transport the gateway uses; once is enough")
    fence_zero = {"task_id": TASK_ID, "fence": 0, "resume_at": "2030-01-01T00:00:00Z", "reason": "r"}
    cases: list[tuple[str, dict[str, Any], str]] = [("token.revoke", {"token_id": ""}, "token_id"), ("task.defer", fence_zero, "fence")]
    revoke, defer = await grpc_answers(stack, tenant, generated_stubs, cases)
    assert revoke["status"] == "INVALID_ARGUMENT" and revoke["code"] == "VALIDATION_FAILED", revoke
    assert revoke["detail"]["reason"] == "required" and revoke["detail"]["one_of"] == ["token_id", "subject", "session_id"]
    assert (defer["status"], defer["message"]) == ("INVALID_ARGUMENT", "fence: required"), defer
    async with tenant.client(**{"X-Loom-Namespace": tenant.namespace}) as c:
        r = await c.post("/v1/token.revoke", json={"token_id": ""})
        assert r.status_code == 422 and r.json()["error"]["detail"]["field"] == "token_id", r.text
        r = await c.post("/v1/task.defer", json=fence_zero)
        assert r.status_code == 422 and r.json()["error"]["message"] == "fence: 0 is less than the minimum of 1", r.text


async def test_a_well_formed_grpc_call_still_reaches_its_plane(
    stack: Instance, tenant: Tenant, transport: str, generated_stubs: Path
) -> None:
    """The checks refuse only what the schema refuses: a valid request over gRPC is answered by the plane."""
    if transport != "inproc":
        pytest.skip("the plane's gRPC port is the same whichever transport the gateway uses; once is enough")
    box = "box-grpc-checked"
    answers = await grpc_answers(
        stack,
        tenant,
        generated_stubs,
        [("inbox.register", {"inbox": box, "posters": ["user:ann"], "default_lease_seconds": 60}, ""), ("namespace.list", {}, "")],
    )
    assert [a["status"] for a in answers] == ["OK", "OK"], answers


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("brief", "title", "code"),
    [
        (nested(33), "t", "REQUEST_TOO_DEEP"),
        ({"x": float("nan")}, "t", "VALIDATION_FAILED"),
        ({"x": [1.0, float("inf")]}, "t", "VALIDATION_FAILED"),
        ({}, "a\x00b", "VALIDATION_FAILED"),
    ],
)
async def test_a_direct_grpc_caller_meets_the_same_value_limits_and_nothing_is_written(
    stack: Instance, tenant: Tenant, brief: dict[str, Any], title: str, code: str
) -> None:
    import grpc
    from google.protobuf import struct_pb2
    from loom_api.tasks.v1 import tasks_pb2, tasks_pb2_grpc
    from loom_core.grpc_errors import from_rpc_error

    md = [("authorization", f"Bearer {tenant.token}"), ("x-loom-namespace", tenant.namespace)]
    async with grpc.aio.insecure_channel(stack.grpc_address("tasks")) as channel:
        stub = tasks_pb2_grpc.TaskServiceStub(channel)
        await stub.RegisterInbox(tasks_pb2.RegisterInboxRequest(inbox="grpc-box"), metadata=md)
        struct = struct_pb2.Struct()
        struct.update(brief)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.CreateTask(tasks_pb2.CreateTaskRequest(inbox="grpc-box", kind="chore", title=title, brief=struct), metadata=md)
        listed = await stub.ListTasks(tasks_pb2.ListTasksRequest(inbox="grpc-box"), metadata=md)
    err = from_rpc_error(caught.value)
    assert err.code == code and err.retryable is False, err
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert list(listed.tasks) == []
