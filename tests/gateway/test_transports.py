"""One chain, two transports: the gateway's relay reaches a plane in its own process through
the interceptor chain in process, and a plane elsewhere over gRPC: on its relay streams, or a
unary call each (`streams=0`). Whatever the transport, a call meets the same metadata, errors,
ledger row, deadline and message-size limit. (Every test using `stack` already runs on both
transports; these compare them side by side.)"""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor as F
from google.protobuf.message import Message
from loom_core.catalog import load_catalog, message_to_json, message_to_json_reference
from loom_core.errors import LoomError
from loom_gateway.relay import Relay
from loom_runner.embedded import Instance

from tests.conftest import Tenant


def relays(stack: Instance, timeout: float = 60.0) -> dict[str, Relay]:
    catalog = stack.runtime.catalog
    return {
        "inproc": Relay(catalog, stack.addresses, timeout=timeout, local=dict(stack.servers)),
        "grpc": Relay(catalog, stack.addresses, timeout=timeout),
        "unary": Relay(catalog, stack.addresses, timeout=timeout, streams=0),
    }


async def ledger_row(stack: Instance, request_id: str) -> dict[str, Any]:
    """The call's ledger row, once it has landed (a background flush may be writing it)."""
    rows: list[dict[str, Any]] = []
    for _ in range(100):
        await stack.runtime.ledger.flush()
        rows = await stack.runtime.store.query(
            "SELECT * EXCEPT (ts, latency_ms) FROM {db}.agent_events WHERE request_id = {r:String}", {"r": request_id}
        )
        if rows:
            break
        await asyncio.sleep(0.05)
    assert len(rows) == 1, rows
    return rows[0]


async def test_both_transports_answer_the_same_json_and_write_the_same_ledger_row(stack: Instance, tenant: Tenant) -> None:
    answers, rows = {}, {}
    for name, relay in relays(stack).items():
        rid = uuid.uuid4().hex
        headers = {"authorization": f"Bearer {tenant.token}", "x-loom-agent": "twin", "x-loom-run-id": "run-1", "x-loom-request-id": rid}
        try:
            answers[name] = await relay.call("auth.whoami", {}, headers, "rest")
            rows[name] = await ledger_row(stack, rid)
        finally:
            await relay.close()
    assert answers["inproc"] == answers["grpc"] == answers["unary"]
    assert answers["inproc"]["agent"] == "twin"
    for row in rows.values():
        row.pop("request_id")
    assert rows["inproc"] == rows["grpc"] == rows["unary"]
    assert rows["inproc"]["transport"] == "rest" and rows["inproc"]["ok"] is True


async def test_both_transports_refuse_with_the_same_error_and_ledger_row(stack: Instance, tenant: Tenant) -> None:
    errors, rows = {}, {}
    for name, relay in relays(stack).items():
        rid = uuid.uuid4().hex
        headers = {"authorization": f"Bearer {tenant.token}", "x-loom-org": "another-org", "x-loom-request-id": rid}
        try:
            with pytest.raises(LoomError) as caught:
                await relay.call("auth.whoami", {}, headers, "rest")
            errors[name] = caught.value.to_payload()
            rows[name] = await ledger_row(stack, rid)
        finally:
            await relay.close()
    assert errors["inproc"] == errors["grpc"] == errors["unary"]
    assert errors["inproc"]["code"] == "AUTH_WRONG_ORG"
    for row in rows.values():
        row.pop("request_id")
    assert rows["inproc"] == rows["grpc"] == rows["unary"] and rows["inproc"]["ok"] is False


async def test_both_transports_end_a_call_past_its_deadline_the_same_way(stack: Instance, tenant: Tenant) -> None:
    headers = {"authorization": f"Bearer {tenant.token}", "x-loom-namespace": tenant.namespace, "x-loom-agent": "slow-box"}
    setup = relays(stack)["inproc"]
    await setup.call("inbox.register", {"inbox": "slow-box"}, headers, "rest")
    errors = {}
    for name, relay in relays(stack, timeout=0.3).items():
        try:
            with pytest.raises(LoomError) as caught:
                # A long poll on an empty inbox outlives the relay's deadline.
                await relay.call("task.pull", {"inbox": "slow-box", "wait_seconds": 20}, headers, "rest")
            errors[name] = caught.value.to_payload()
        finally:
            await relay.close()
    assert errors["inproc"] == errors["grpc"] == errors["unary"]
    assert errors["inproc"]["code"] == "OVERLOADED" and errors["inproc"]["retryable"] is True


async def test_the_in_process_deadline_ends_each_overdue_call_and_no_other(stack: Instance, tenant: Tenant) -> None:
    """One timer keeps every in-process call's deadline: calls that start together and one that
    starts after the first expired all end OVERLOADED, and a quick call between them answers."""
    headers = {"authorization": f"Bearer {tenant.token}", "x-loom-namespace": tenant.namespace, "x-loom-agent": "late-box"}
    relay = relays(stack, timeout=2.0)["inproc"]  # long enough for the quick call on a busy machine
    try:
        await relay.call("inbox.register", {"inbox": "late-box"}, headers, "rest")
        poll = {"inbox": "late-box", "wait_seconds": 20}
        first = [asyncio.ensure_future(relay.call("task.pull", poll, headers, "rest")) for _ in range(2)]
        assert (await relay.call("auth.whoami", {}, headers, "rest"))["agent"] == "late-box"
        outcomes = await asyncio.gather(*first, return_exceptions=True)
        later = await asyncio.gather(relay.call("task.pull", poll, headers, "rest"), return_exceptions=True)
        for outcome in [*outcomes, *later]:
            assert isinstance(outcome, LoomError) and outcome.code == "OVERLOADED", outcome
        assert (await relay.call("auth.whoami", {}, headers, "rest"))["agent"] == "late-box"
    finally:
        await relay.close()


async def test_both_transports_refuse_a_request_over_the_message_limit(stack: Instance, tenant: Tenant) -> None:
    huge = "x" * (17 * 1024 * 1024)
    headers = {"authorization": f"Bearer {tenant.token}"}
    errors = {}
    for name, relay in relays(stack).items():
        try:
            with pytest.raises(LoomError) as caught:
                await relay.call("namespace.create", {"name": "big", "description": huge}, headers, "rest")
            errors[name] = caught.value.to_payload()
        finally:
            await relay.close()
    assert errors["inproc"] == errors["grpc"] == errors["unary"]
    assert errors["inproc"]["code"] == "REQUEST_TOO_LARGE" and errors["inproc"]["detail"]["reason"] == "too large"


async def test_a_cancelled_call_cancels_the_handler_in_process(stack: Instance, tenant: Tenant) -> None:
    headers = {"authorization": f"Bearer {tenant.token}", "x-loom-namespace": tenant.namespace, "x-loom-agent": "cancel-box"}
    relay = relays(stack)["inproc"]
    await relay.call("inbox.register", {"inbox": "cancel-box"}, headers, "rest")
    call = asyncio.ensure_future(relay.call("task.pull", {"inbox": "cancel-box", "wait_seconds": 20}, headers, "rest"))
    await asyncio.sleep(0.2)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


# --- the descriptor-built JSON converter -------------------------------------------------------


def _value(f: Any, rnd: random.Random) -> Any:
    t = f.type
    if t == F.TYPE_STRING:
        return rnd.choice(["", "abc", "é ü"])
    if t == F.TYPE_BOOL:
        return rnd.choice([True, False])
    if t == F.TYPE_ENUM:
        return rnd.choice([v.number for v in f.enum_type.values])
    if t in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        return rnd.choice([0.0, 1.5, 3.0, -2.25])
    if t == F.TYPE_BYTES:
        return b"\x00ab"
    if t in (F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64):
        return rnd.choice([0, 1, -5, 2**40])
    return rnd.choice([0, 1, 7])


def _fill(msg: Message, rnd: random.Random, depth: int = 0) -> None:
    for f in msg.DESCRIPTOR.fields:
        if rnd.random() < 0.3:
            continue
        target = getattr(msg, f.name)
        if f.message_type is not None:
            if f.message_type.GetOptions().map_entry:
                key_f, val_f = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
                for i in range(2):
                    key = f"k{i}" if key_f.type == F.TYPE_STRING else i
                    if val_f.message_type is None:
                        target[key] = _value(val_f, rnd)
                    else:
                        _fill(target[key], rnd, depth + 1)
            elif f.message_type.full_name == "google.protobuf.Struct":
                (target.add() if f.is_repeated else target).update({"a": 1, "b": [1.5, "x", None, True], "c": {"d": 2}})
            elif depth < 3 and f.is_repeated:
                for _ in range(2):
                    _fill(target.add(), rnd, depth + 1)
            elif depth < 3:
                target.SetInParent()
                _fill(target, rnd, depth + 1)
        elif f.is_repeated:
            target.extend([_value(f, rnd), _value(f, rnd)])
        else:
            setattr(msg, f.name, _value(f, rnd))


def test_compiled_json_converter_matches_protobufs_printer_for_every_op_message() -> None:
    rnd = random.Random(7)
    checked = 0
    for op in load_catalog().ops.values():
        for cls in (op.request_cls, op.response_cls):
            for i in range(20):
                msg = cls()
                if i:
                    _fill(msg, rnd)
                assert message_to_json(msg) == message_to_json_reference(msg), cls.DESCRIPTOR.full_name
                checked += 1
    assert checked > 100


def test_sparse_json_converter_matches_message_to_dict_for_every_request_message() -> None:
    """What a direct gRPC caller's request is checked as: MessageToDict (defaults left out) with
    64-bit ints as numbers, through the converter compiled from the descriptor."""
    from google.protobuf import json_format
    from loom_core.catalog import message_to_sparse_json
    from loom_core.catalog.to_json import ints_back

    rnd = random.Random(11)
    checked = 0
    for op in load_catalog().ops.values():
        for i in range(20):
            msg = op.request_cls()
            if i:
                _fill(msg, rnd)
            want = json_format.MessageToDict(msg, preserving_proto_field_name=True)
            ints_back(msg.DESCRIPTOR, want)
            assert message_to_sparse_json(msg) == want, op.name
            checked += 1
    assert checked > 100
