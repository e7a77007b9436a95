"""The hot-path replacements give what they replace: compact JSON, a JetStream message's
position, a compare-and-set write's answer, JetStream publishes and their answers."""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import secrets

import pytest
from loom_core import fastjson
from loom_core.bus import Bus, NatsServer, kv
from loom_core.bus.position import delivery, position, stream_seq
from loom_core.errors import Unavailable
from nats.aio.msg import Msg
from nats.errors import NotJSMessageError
from nats.js.api import StreamConfig


class Colour(str, enum.Enum):  # noqa: UP042 - the mixin form, whose str() is not its value
    RED = "red"


VALUES = [
    {"a": 1, "b": [1.5, None, True, "x"], "c": {"d": -3}},
    {"when": datetime.datetime(2026, 11, 30, 22, 0, 1)},
    {"colour": Colour.RED},
    {"big": 2**70},
    {1: "non-string key"},
    {"text": "café ☃"},
]


@pytest.mark.parametrize("value", VALUES)
def test_fastjson_reads_back_as_the_standard_library_writes(value: object) -> None:
    ours = fastjson.dumps(value)
    theirs = json.dumps(value, separators=(",", ":"), default=str)
    assert json.loads(ours) == json.loads(theirs)
    assert fastjson.loads(ours) == json.loads(theirs)


# --- a JetStream message's position (loom_core/bus/position.py) against nats-py's Msg.metadata

ACK_SUBJECTS = [
    "$JS.ACK.LOOM_TASK_STATE.loom-task-projector.1.42.3.1764547200000000000.7",  # v1
    "$JS.ACK._.ACCHASH.LOOM_TASK_STATE.proj.2.43.9.1764547200000000000.0.r4nd0m",  # v2, no domain
    "$JS.ACK.hub.ACCHASH.S.C.1.18446744073709551615.9.1764547200000000000.12",  # v2 without the random token
]


@pytest.mark.parametrize("reply", ACK_SUBJECTS)
def test_position_reads_what_nats_py_metadata_reads(reply: str) -> None:
    msg = Msg(_client=None, reply=reply)  # type: ignore[arg-type]
    assert position(msg) == (msg.metadata.sequence.stream, msg.metadata.num_pending)
    assert delivery(msg) == (msg.metadata.sequence.stream, msg.metadata.sequence.consumer)


@pytest.mark.parametrize("reply", ["", "_INBOX.abc.def", "$JS.ACK.S.C.1.2", "$JS.API.S.C.1.42.3.1764547200000000000.7"])
def test_position_refuses_what_nats_py_refuses(reply: str) -> None:
    msg = Msg(_client=None, reply=reply)  # type: ignore[arg-type]
    with pytest.raises(NotJSMessageError):
        position(msg)
    with pytest.raises(NotJSMessageError):
        delivery(msg)
    with pytest.raises(NotJSMessageError):
        _ = msg.metadata


async def test_position_of_real_deliveries(bus: Bus) -> None:
    stream = f"POS_{secrets.token_hex(4)}"
    await bus.js.add_stream(name=stream, subjects=[f"{stream.lower()}.>"])
    try:
        for i in range(5):
            await bus.js.publish(f"{stream.lower()}.{i}", b"x")
        sub = await bus.js.pull_subscribe(f"{stream.lower()}.>", durable="pos", stream=stream)
        msgs = await sub.fetch(5, timeout=5)
        assert [position(m) for m in msgs] == [(m.metadata.sequence.stream, m.metadata.num_pending) for m in msgs]
        assert [delivery(m) for m in msgs] == [(m.metadata.sequence.stream, m.metadata.sequence.consumer) for m in msgs]
        assert [stream_seq(m) for m in msgs] == [1, 2, 3, 4, 5]
    finally:
        await bus.js.delete_stream(stream)


# --- a compare-and-set write's answer, read by loom_core/bus/kv.py itself


async def test_compare_and_set_answers_as_jetstream_decides(bus: Bus) -> None:
    stream = f"CAS_{secrets.token_hex(4)}"
    subject = f"{stream.lower()}.key"
    await kv.ensure_stream(
        bus.js, StreamConfig(name=stream, subjects=[f"{stream.lower()}.>"], allow_msg_ttl=True, allow_rollup_hdrs=True, allow_direct=True)
    )
    try:
        first = await kv.update_at(bus.js, subject, b"1", 0)
        with pytest.raises(kv.WrongRevision):
            await kv.update_at(bus.js, subject, b"again", 0)  # create-if-absent over a value
        second = await kv.update_at(bus.js, subject, b"2", first)
        with pytest.raises(kv.WrongRevision):
            await kv.update_at(bus.js, subject, b"stale", first)
        assert second > first
        entry = await kv.read(bus.js, stream, subject)
        assert entry is not None and (entry.data, entry.revision) == (b"2", second)
        # a TTL and a rollup ride along as headers; the server honours them
        third = await kv.update_at(bus.js, subject, b"3", second, ttl=60, headers={kv.ROLLUP: "sub"})
        info = await bus.js.stream_info(stream)
        assert (info.state.messages, info.state.last_seq) == (1, third)
        with pytest.raises(Unavailable):
            await kv.update_at(bus.js, "no.stream.listens.here", b"x", 0)  # no responders
    finally:
        await bus.js.delete_stream(stream)


async def test_a_batch_of_compare_and_set_writes_stores_all_or_none(bus: Bus) -> None:
    """kv.update_many_at: every write its own compare-and-set, stored together at consecutive
    revisions; one write that lost its race refuses the batch, and nothing of it is stored."""
    stream = f"CASB_{secrets.token_hex(4)}"
    a, b, c = (f"{stream.lower()}.{k}" for k in "abc")
    await kv.ensure_stream(bus.js, StreamConfig(name=stream, subjects=[f"{stream.lower()}.>"], allow_direct=True, allow_atomic=True))
    try:
        first = await kv.update_at(bus.js, a, b"a1", 0)
        revs = await kv.update_many_at(bus.js, [(a, b"a2", first), (b, b"b1", 0)])
        assert revs == [first + 1, first + 2]
        with pytest.raises(kv.BatchRefused):
            await kv.update_many_at(bus.js, [(c, b"c1", 0), (a, b"a stale", first), (b, b"b2", revs[1])])
        assert await kv.read(bus.js, stream, c) is None
        assert await kv.read(bus.js, stream, a) == kv.Entry(b"a2", revs[0])
        assert await kv.read(bus.js, stream, b) == kv.Entry(b"b1", revs[1])
    finally:
        await bus.js.delete_stream(stream)


async def test_a_direct_read_answers_as_nats_pys_get_msg_does(bus: Bus) -> None:
    """kv.read's own direct get against nats-py's `get_msg(direct=True)` and its leader read:
    the same value and revision for a value, a delete marker and a subject that holds nothing;
    a stream that is not there is Unavailable."""
    stream = f"RD_{secrets.token_hex(4)}"
    await kv.ensure_stream(bus.js, StreamConfig(name=stream, subjects=[f"{stream.lower()}.>"], allow_direct=True))
    value, deleted, empty = (f"{stream.lower()}.{k}" for k in ("value", "deleted", "empty"))
    try:
        rev = await kv.update_at(bus.js, value, b'{"v":1}', 0, headers={"X-Loom-Note": "kept"})
        await kv.update_at(bus.js, deleted, b"gone soon", 0)
        marker = await kv.update_at(bus.js, deleted, b"", rev + 1, headers={kv.KV_OPERATION: "DEL"})
        for direct in (True, False):
            assert await kv.read(bus.js, stream, value, direct=direct) == kv.Entry(b'{"v":1}', rev)
            assert await kv.read(bus.js, stream, deleted, direct=direct) == kv.Entry(None, marker)
            assert await kv.read(bus.js, stream, empty, direct=direct) is None
        raw = await bus.js.get_msg(stream, subject=value, direct=True)
        assert (raw.data, raw.seq) == (b'{"v":1}', rev)
        with pytest.raises(Unavailable):
            await kv.read(bus.js, f"NOPE_{secrets.token_hex(4)}", value)
    finally:
        await bus.js.delete_stream(stream)


# --- JetStream publishes (loom_core/bus/jspublish.py): hand-written frames, atomic batches


_PUBLISH_CASES: list[tuple[str, dict[str, str] | None, bytes]] = [
    ("plain", None, b"hello"),
    ("empty", None, b""),
    ("headers", {"Nats-Msg-Id": "abc", "X-Two": " padded "}, b"x\r\ny"),
    ("crlf", {"Nats-Expected-Last-Subject-Sequence": "0", "X-Crlf": "a\r\nPUB evil 1\r\n"}, b"\x00\xff"),
]


async def test_a_publish_is_stored_as_sent_and_answered_with_its_sequence(bus: Bus) -> None:
    from loom_core.bus import jspublish

    stream = f"FPS{secrets.token_hex(3).upper()}"
    await bus.js.add_stream(StreamConfig(name=stream, subjects=[f"{stream.lower()}.>"]))
    try:
        for n, (name, headers, data) in enumerate(_PUBLISH_CASES, 1):
            assert await jspublish.publish(bus.nc, f"{stream.lower()}.{name}", data, dict(headers) if headers else None) == n
            stored = await bus.js.get_msg(stream, n)
            assert (stored.subject, stored.data or b"") == (f"{stream.lower()}.{name}", data)
            for key in headers or {}:
                assert stored.headers and stored.headers[key] == headers[key].strip().replace("\r", " ").replace("\n", " ")
        # the Nats-Msg-Id dedupe holds: the same id again is answered with the first one's sequence
        assert await jspublish.publish(bus.nc, f"{stream.lower()}.headers", b"again", {"Nats-Msg-Id": "abc"}) == 3
        assert (await bus.js.stream_info(stream)).state.messages == len(_PUBLISH_CASES)
    finally:
        await bus.js.delete_stream(stream)


@pytest.mark.parametrize(
    ("subject", "headers", "data"),
    [("fp.with space", None, b""), ("fp.crlf\r\nPUB x 0", None, b""), ("", None, b""), ("fp.ok", {"Bad Key": "v"}, b"")],
)
async def test_a_publish_refuses_what_nats_py_refuses(bus: Bus, subject: str, headers: dict[str, str] | None, data: bytes) -> None:
    from loom_core.bus import jspublish

    with pytest.raises(Exception) as theirs:
        await bus.nc.publish(subject, data, headers=headers)
    with pytest.raises(type(theirs.value)):
        await jspublish.publish(bus.nc, subject, data, headers)


async def test_a_publish_over_the_servers_payload_limit_is_refused(bus: Bus) -> None:
    from loom_core.bus import jspublish
    from nats.errors import MaxPayloadError

    with pytest.raises(MaxPayloadError):
        await jspublish.publish(bus.nc, "fp.big", b"x" * (bus.nc.max_payload + 1))


async def test_an_atomic_batch_is_stored_whole_and_contiguous_or_not_at_all(bus: Bus) -> None:
    from loom_core.bus import jspublish

    stream = f"ATOMIC_{secrets.token_hex(4)}"
    subject = stream.lower()
    await bus.ensure_stream(StreamConfig(name=stream, subjects=[f"{subject}.>"], allow_atomic=True, duplicate_window=60))
    plain = f"PLAIN_{secrets.token_hex(4)}"
    await bus.ensure_stream(StreamConfig(name=plain, subjects=[f"{plain.lower()}.>"]))
    try:
        await bus.js.publish(f"{subject}.a", b"before", headers={"Nats-Msg-Id": "m-0"})
        batch = [(f"{subject}.{i % 3}", f"v{i}".encode(), {"Nats-Msg-Id": f"m-{i}"}) for i in range(1, 251)]
        seqs = await jspublish.publish_atomic(bus.nc, batch)
        assert seqs == list(range(2, 252))
        stored = await bus.js.get_msg(stream, 251)
        assert (stored.data, stored.headers and stored.headers.get("Nats-Msg-Id")) == (b"v250", "m-250")
        # one message already stored (by its Nats-Msg-Id): JetStream refuses the whole batch
        with pytest.raises(jspublish.Rejected):
            await jspublish.publish_atomic(
                bus.nc, [(f"{subject}.a", b"new", {"Nats-Msg-Id": "m-300"}), (f"{subject}.a", b"again", {"Nats-Msg-Id": "m-7"})]
            )
        # a stream that does not allow batches refuses them
        with pytest.raises(jspublish.Rejected):
            await jspublish.publish_atomic(bus.nc, [(f"{plain.lower()}.a", b"x", None), (f"{plain.lower()}.a", b"y", None)])
        assert (await bus.js.stream_info(stream)).state.messages == 251
        assert (await bus.js.stream_info(plain)).state.messages == 0
        with pytest.raises(ValueError):
            await jspublish.publish_atomic(bus.nc, [])
        # the refused batch goes in one by one: the stored message dropped as a duplicate
        again = [(f"{subject}.a", b"new", {"Nats-Msg-Id": "m-300"}), (f"{subject}.a", b"again", {"Nats-Msg-Id": "m-7"})]
        assert await jspublish.publish_many(bus.nc, again) == [252, 8]
        assert (await bus.js.stream_info(stream)).state.messages == 252
    finally:
        await bus.js.delete_stream(stream)
        await bus.js.delete_stream(plain)


async def test_a_publish_no_one_answers_is_unavailable_within_its_bound_and_leaves_no_waiter(bus: Bus) -> None:
    """A subscriber that never replies stands in for a stream that does not answer in time."""
    from loom_core.bus import jspublish

    subject = f"fp.silent.{secrets.token_hex(4)}"
    silent = await bus.nc.subscribe(subject)
    replies = await jspublish.replies(bus.nc)
    try:
        waiting = set(replies.waiting)
        for publish in (jspublish.publish_many, jspublish.publish_atomic):
            started = asyncio.get_running_loop().time()
            with pytest.raises(Unavailable):
                await publish(bus.nc, [(subject, b"a", None), (subject, b"b", None)], answer_within=0.2)
            assert 0.2 <= asyncio.get_running_loop().time() - started < 5  # its own bound, not the 5 s default
            assert set(replies.waiting) == waiting
        started = asyncio.get_running_loop().time()
        with pytest.raises(Unavailable):
            await jspublish.publish(bus.nc, subject, b"c", answer_within=0.2)
        assert 0.2 <= asyncio.get_running_loop().time() - started < 5
        assert set(replies.waiting) == waiting
    finally:
        await silent.unsubscribe()


async def test_single_publishes_of_one_turn_share_a_timer_and_each_gets_its_own_answer(bus: Bus) -> None:
    """The publishes one turn of the loop starts share one round (one timer): the answered ones
    return their own sequences at once, the one nobody answers fails at the bound, and the
    round's timer goes once the last of them is over."""
    from loom_core.bus import jspublish

    stream = f"FPR{secrets.token_hex(3).upper()}"
    await bus.js.add_stream(StreamConfig(name=stream, subjects=[f"{stream.lower()}.>"]))
    silent_subject = f"fp.silent.{secrets.token_hex(4)}"
    silent = await bus.nc.subscribe(silent_subject)
    replies = await jspublish.replies(bus.nc)
    try:
        waiting = set(replies.waiting)
        loop = asyncio.get_running_loop()
        started = loop.time()
        # The bound leaves the answered ones room on a loaded machine (they took 0.62 s once in
        # a full run): what is checked is that they end while the silent one still waits.
        within = 3.0
        stored = [asyncio.ensure_future(jspublish.publish(bus.nc, f"{stream.lower()}.{i}", b"x", answer_within=within)) for i in range(50)]
        lost = asyncio.ensure_future(jspublish.publish(bus.nc, silent_subject, b"y", answer_within=within))
        await asyncio.sleep(0)  # every publish has started, in this one turn
        rounds = [r for (lp, bound), r in jspublish._Round._open.items() if lp is loop and bound == within]
        assert len(rounds) == 1 and rounds[0].left == 51
        the_round = rounds[0]
        assert sorted(await asyncio.gather(*stored)) == list(range(1, 51))
        # Answered ones did not wait for the silent one.
        assert not lost.done() and the_round.left == 1 and not the_round.timer.cancelled()
        with pytest.raises(Unavailable):
            await lost
        assert loop.time() - started >= within  # it failed at the bound, not before
        assert the_round.left == 0 and not the_round.futures
        assert set(replies.waiting) == waiting
        assert not [r for (lp, _), r in jspublish._Round._open.items() if lp is loop]
    finally:
        await silent.unsubscribe()
        await bus.js.delete_stream(stream)


async def test_a_round_over_before_its_turn_ends_leaves_the_turns_later_publishes_a_timer(bus: Bus) -> None:
    """A round whose only publish ended in the same turn (refused at once) is closed: a publish
    started later in that turn gets a new round whose timer still bounds its answer."""
    from loom_core.bus import jspublish

    first, _ = jspublish._Round.join(0.3)
    first.answered()
    assert first.timer.cancelled()
    second, future = jspublish._Round.join(0.3)
    assert second is not first and not second.timer.cancelled()
    with pytest.raises(TimeoutError):
        await future
    second.answered()


async def test_publishes_past_the_pending_limit_are_stored(nats_server: NatsServer) -> None:
    """Over the connection's pending limit `Client.publish` flushes at once and waits for it;
    every publish still gets its answer."""
    import nats
    from loom_core.bus import jspublish

    nc = await nats.connect(nats_server.url, pending_size=1024)
    try:
        stream = f"FPP{secrets.token_hex(3).upper()}"
        await nc.jetstream().add_stream(StreamConfig(name=stream, subjects=[f"{stream.lower()}.>"]))
        big = b"x" * 4096
        seqs = await asyncio.gather(*(jspublish.publish(nc, f"{stream.lower()}.{i}", big) for i in range(5)))
        assert sorted(seqs) == [1, 2, 3, 4, 5]
        assert await jspublish.publish_many(nc, [(f"{stream.lower()}.m", big, None)] * 3) == [6, 7, 8]
        assert (await nc.jetstream().stream_info(stream)).state.messages == 8
        await nc.jetstream().delete_stream(stream)
    finally:
        await nc.close()
