"""The gRPC door: an internal agent calls a plane directly with the generated stub and
`authorization: Bearer …` metadata; the same chain authenticates, refuses with rich status and
ledgers the call."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from loom_api.identity.v1 import identity_pb2 as pb
from loom_api.identity.v1 import identity_pb2_grpc
from loom_core.grpc_errors import from_rpc_error
from loom_runner.embedded import Instance
from prometheus_client import REGISTRY

from tests.conftest import Tenant, ledger_rows, unique


@pytest.fixture
async def identity_stub(stack: Instance) -> AsyncIterator[identity_pb2_grpc.IdentityServiceStub]:
    async with grpc.aio.insecure_channel(stack.grpc_address("identity")) as channel:
        yield identity_pb2_grpc.IdentityServiceStub(channel)


def bearer(token: str, **labels: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}"), *((k, v) for k, v in labels.items())]


def error_info(exc: grpc.aio.AioRpcError) -> tuple[str, dict[str, Any]]:
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    assert status is not None, "no rich status on the refusal"
    assert status.code == exc.code().value[0]
    infos = []
    for d in status.details:
        if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            d.Unpack(info)
            infos.append(info)
    assert len(infos) == 1
    assert infos[0].domain == "loom"
    detail = json.loads(infos[0].metadata["detail"]) if "detail" in infos[0].metadata else {}
    return infos[0].reason, detail


async def test_whoami_over_grpc_answers_the_verified_subject(tenant: Tenant, identity_stub: identity_pb2_grpc.IdentityServiceStub) -> None:
    reply = await identity_stub.WhoAmI(pb.WhoAmIRequest(), metadata=bearer(tenant.token, **{"x-loom-agent": "indexer"}))
    assert reply.subject == "user:admin"
    assert reply.org == tenant.org
    assert reply.namespace == tenant.namespace
    assert reply.role == "admin"
    assert reply.agent == "indexer"


async def test_namespace_metadata_selects_the_namespace(tenant: Tenant, identity_stub: identity_pb2_grpc.IdentityServiceStub) -> None:
    other = unique("ns")
    await identity_stub.CreateNamespace(pb.CreateNamespaceRequest(name=other), metadata=bearer(tenant.token))
    reply = await identity_stub.WhoAmI(pb.WhoAmIRequest(), metadata=bearer(tenant.token, **{"x-loom-namespace": other}))
    assert reply.namespace == other


async def test_missing_token_is_unauthenticated_with_rich_status(identity_stub: identity_pb2_grpc.IdentityServiceStub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await identity_stub.WhoAmI(pb.WhoAmIRequest())
    assert exc.value.code() == grpc.StatusCode.UNAUTHENTICATED
    reason, _ = error_info(exc.value)
    assert reason == "AUTH_REQUIRED"


async def test_bad_token_is_unauthenticated_with_rich_status(identity_stub: identity_pb2_grpc.IdentityServiceStub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await identity_stub.WhoAmI(pb.WhoAmIRequest(), metadata=bearer("a.b.c"))
    assert exc.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert error_info(exc.value)[0] == "AUTH_INVALID"
    assert from_rpc_error(exc.value).code == "AUTH_INVALID"


async def test_role_refusal_carries_the_detail(tenant: Tenant, identity_stub: identity_pb2_grpc.IdentityServiceStub) -> None:
    minted = await identity_stub.MintToken(
        pb.MintTokenRequest(roles={tenant.namespace: "viewer"}, ttl_seconds=60), metadata=bearer(tenant.token)
    )
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await identity_stub.SetGrant(pb.SetGrantRequest(subject="user:x", role="viewer"), metadata=bearer(minted.token))
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    reason, detail = error_info(exc.value)
    assert reason == "AUTH_INSUFFICIENT"
    assert detail["reason"] == "role"
    err = from_rpc_error(exc.value)
    assert err.http_status == 403 and err.detail == detail
    listed = await identity_stub.ListGrants(pb.ListGrantsRequest(), metadata=bearer(tenant.token))
    assert all(g.subject != "user:x" for g in listed.grants)


async def test_direct_grpc_call_is_ledgered_with_transport_grpc(
    tenant: Tenant, stack: Instance, identity_stub: identity_pb2_grpc.IdentityServiceStub
) -> None:
    run = f"run-{uuid.uuid4().hex}"
    md = bearer(tenant.token, **{"x-loom-run-id": run, "x-loom-agent": "indexer", "x-loom-user": "u1", "x-loom-session": "s1"})
    await identity_stub.WhoAmI(pb.WhoAmIRequest(), metadata=md)
    rows = await ledger_rows(stack, run)
    assert len(rows) == 1
    row = rows[0]
    assert row["transport"] == "grpc"
    assert row["op"] == "auth.whoami"
    assert (row["org"], row["namespace"], row["subject"]) == (tenant.org, tenant.namespace, "user:admin")
    assert (row["agent"], row["user"], row["session"]) == ("indexer", "u1", "s1")
    assert row["ok"] is True


async def test_a_grpc_calls_metric_and_ledger_row_are_taken_by_the_time_its_answer_arrives(
    tenant: Tenant, stack: Instance, identity_stub: identity_pb2_grpc.IdentityServiceStub
) -> None:
    """The chain takes them after the answer is on its way (`answer_first`), in the server's
    next loop turn: before the caller has the answer, so never after a call it makes next."""
    run = f"run-{uuid.uuid4().hex}"
    counted = {"op": "auth.whoami", "transport": "grpc", "code": "OK"}
    before = REGISTRY.get_sample_value("loom_requests_total", counted) or 0.0
    await identity_stub.WhoAmI(pb.WhoAmIRequest(), metadata=bearer(tenant.token, **{"x-loom-run-id": run}))
    assert REGISTRY.get_sample_value("loom_requests_total", counted) == before + 1
    assert len(await ledger_rows(stack, run)) == 1


async def test_refused_grpc_call_is_ledgered_with_its_code(stack: Instance, identity_stub: identity_pb2_grpc.IdentityServiceStub) -> None:
    run = f"run-{uuid.uuid4().hex}"
    with pytest.raises(grpc.aio.AioRpcError):
        await identity_stub.WhoAmI(pb.WhoAmIRequest(), metadata=[("x-loom-run-id", run)])
    rows = await ledger_rows(stack, run)
    assert len(rows) == 1
    assert (rows[0]["transport"], rows[0]["ok"], rows[0]["error_code"]) == ("grpc", False, "AUTH_REQUIRED")


async def test_token_of_another_org_is_refused_auth_wrong_org_over_grpc(
    tenant: Tenant, identity_stub: identity_pb2_grpc.IdentityServiceStub
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await identity_stub.WhoAmI(pb.WhoAmIRequest(), metadata=bearer(tenant.token, **{"x-loom-org": unique("org")}))
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    code, detail = error_info(info.value)
    assert (code, detail["reason"]) == ("AUTH_WRONG_ORG", "wrong_org")
