"""JetStream publishes on the hot paths: each answered with the stored message's sequence.

A JetStream publish is a NATS request to the stream's subject, answered by the server with a
small JSON document (`{"stream":..,"seq":N}` or `{"error":{"code":..,"err_code":..}}`). nats-py's
`JetStreamContext.publish` and `publish_async` wrap each in `asyncio.wait_for`, two random bytes
from the OS (`secrets.token_hex`) and a parse by the standard library into a PubAck dataclass:
about a third of the Python CPU of a task state write (measured with py-spy on bench/tasks.py),
and every task transition is one write and one event. `publish_many` sends on nats-py's own
response inbox (the connection's one wildcard subscription, its `_resp_map` of futures keyed by
the reply token; nats-py is pinned and tests/core/test_fast_paths.py checks this against a real
server), with one timer per turn of the loop and orjson for the answers. The messages' protocol frames are
written here, all of a call's as one chunk on nats-py's outgoing buffer, with the checks
`Client.publish` makes (subject, payload size, connection state); `Client.publish` built,
checked and queued each frame on its own (a quarter of a state write's CPU). A single `publish`
(each task state write) shares its answer's timer with every request started in the same turn of
the loop (`_Round`), and wakes nats-py's flusher only when no wake-up is queued already: a timer
and a flush coroutine per write had cost more than the rest of it (loop CPU per write 37-41 ->
14-16 us, 100 writes at a time, against a real server).

`publish_atomic` stores a list as one JetStream atomic batch (nats-server 2.12+, a stream with
`allow_atomic`): every message is stored or none is, and only the last one is answered.

A publish the stream refuses raises `Rejected` (its JetStream error code: a compare-and-set
that lost is 10071); no stream, no answer in time, or a broken connection raise `Unavailable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from nats import errors as nats_errors
from nats.aio.client import _HEADER_KEY_RE, _HEADER_VALUE_NEWLINES, _SUBJECT_INVALID_RE, Client
from nats.aio.msg import Msg

from .. import fastjson
from ..errors import ErrorCode, Unavailable

#: How long a publish waits for the stream's answer (nats-py's JetStream default).
TIMEOUT_SECONDS = 5.0
_NO_RESPONDERS = "503"
#: JetStream's limit on the messages of one atomic batch (nats-server's default).
ATOMIC_BATCH_MAX = 1000
_BATCH_ID = "Nats-Batch-Id"
_BATCH_SEQUENCE = "Nats-Batch-Sequence"
_BATCH_COMMIT = "Nats-Batch-Commit"
# Header keys already checked against nats-py's rule (a handful: the JetStream headers Loom sets).
_checked_keys: set[str] = set()
# Reply tokens of this module's publishes: "-" is not in the NUID alphabet of nats-py's own
# request tokens, and a counter is cheaper than a NUID.
_tokens = itertools.count()


class Rejected(Exception):
    """The stream answered with an error (`err_code`: JetStream's code, e.g. 10071)."""

    def __init__(self, subject: str, err_code: int, description: str) -> None:
        super().__init__(f"{subject}: {err_code} {description}")
        self.err_code = err_code


def unavailable() -> Unavailable:
    return Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the message stream (NATS JetStream) did not answer")


Publish = tuple[str, bytes, dict[str, str] | None]


async def publish(
    nc: Client, subject: str, data: bytes, headers: dict[str, str] | None = None, *, answer_within: float = TIMEOUT_SECONDS
) -> int:
    """Store one message; its stream sequence."""
    return _sequence(subject, await request(nc, subject, data, headers, answer_within=answer_within))


async def request(
    nc: Client, subject: str, data: bytes = b"", headers: dict[str, str] | None = None, *, answer_within: float = TIMEOUT_SECONDS
) -> Msg:
    """One request on the connection's response inbox, answered as `Client.request` answers it
    (a no-responders answer is returned, not raised). Every task state write is one (`publish`),
    and every read of a task's state (a direct get): written out flat (no lists, no context
    manager), its answer's timer shared with the requests the same turn of the loop starts
    (`_Round`). No answer within `answer_within`, or a broken connection: `Unavailable`."""
    prefix = nc._resp_sub_prefix or await _reply_prefix(nc)
    token = f"-{next(_tokens)}"
    frame = _frame(nc, subject, prefix.decode() + token, headers, data)
    rnd, future = _Round.join(answer_within)
    nc._resp_map[token] = future
    try:
        if todo := _queue(nc, frame, len(data)):
            await nc._flush_pending(force_flush=todo == _FORCE)
        return await future
    except Exception as exc:
        # the NATS adapter boundary: whatever the client raises (its errors, a timeout, a reset connection) is BACKEND_UNAVAILABLE
        raise unavailable() from exc
    finally:
        nc._resp_map.pop(token, None)  # gone already if the connection was reset meanwhile
        future.cancel()
        rnd.answered()


async def publish_many(nc: Client, messages: Sequence[Publish], *, answer_within: float = TIMEOUT_SECONDS) -> list[int]:
    """Store `messages` pipelined: all sent in order, then every answer awaited (JetStream stores
    one connection's publishes in the order sent). Their stream sequences, in order. The first
    refusal raises `Rejected` once every answer is in (a message sent after a refused one may be
    stored)."""
    prefix = (await _reply_prefix(nc)).decode()
    tokens = [f"-{next(_tokens)}" for _ in messages]
    with _answers_to(nc, tokens, answer_within) as futures:
        frames = [
            _frame(nc, subject, prefix + token, headers, data) for (subject, data, headers), token in zip(messages, tokens, strict=True)
        ]
        await _send(nc, frames, sum(len(data) for _, data, _ in messages))
        answers = [await future for future in futures]
    seqs: list[int] = []
    refusal: Rejected | None = None
    for (subject, _, _), answer in zip(messages, answers, strict=True):
        try:
            seqs.append(_sequence(subject, answer))
        except Rejected as exc:
            refusal = refusal or exc
            seqs.append(0)
    if refusal is not None:
        raise refusal
    return seqs


async def publish_atomic(nc: Client, messages: Sequence[Publish], *, answer_within: float = TIMEOUT_SECONDS) -> list[int]:
    """Store `messages` (at most ATOMIC_BATCH_MAX) as one atomic batch: all of them, in order and
    contiguous, or none (the stream must allow atomic publishes). Their stream sequences. A batch
    the stream refuses raises `Rejected` with nothing stored: e.g. one message's `Nats-Msg-Id`
    already stored (JetStream refuses the whole batch then) or the stream not allowing batches."""
    if not 0 < len(messages) <= ATOMIC_BATCH_MAX:
        raise ValueError(f"an atomic batch holds 1 to {ATOMIC_BATCH_MAX} messages, not {len(messages)}")
    prefix = (await _reply_prefix(nc)).decode()
    batch_id = nc._nuid.next().decode()
    token = f"-{next(_tokens)}"
    last = len(messages)
    with _answers_to(nc, [token], answer_within) as (future,):
        frames = []
        for n, (subject, data, headers) in enumerate(messages, 1):
            batch = {**(headers or {}), _BATCH_ID: batch_id, _BATCH_SEQUENCE: str(n)}
            if n == last:
                batch[_BATCH_COMMIT] = "1"
            # Only the commit asks for an answer: it reports the batch's fate, a refusal included.
            frames.append(_frame(nc, subject, prefix + token if n == last else "", batch, data))
        await _send(nc, frames, sum(len(data) for _, data, _ in messages))
        answer = await future
    seq = _sequence(messages[-1][0], answer)
    return list(range(seq - last + 1, seq + 1))


async def ack_all(nc: Client, msgs: Sequence[Msg]) -> None:
    """Acknowledge JetStream messages as `Msg.ack` does each (an empty message to its reply
    subject, no answer awaited), all of them written as one chunk: a batch consumer's fetch of a
    thousand cost a thousand `Client.publish` calls. Messages already acknowledged are skipped;
    one without a reply subject (not from JetStream) is refused as `Msg.ack` refuses it."""
    frames = []
    for m in msgs:
        if m._ackd:
            continue
        if not m.reply:
            raise nats_errors.NotJSMessageError
        frames.append(_frame(nc, m.reply, "", None, b""))
    if frames:
        await _send(nc, frames, 0)
    for m in msgs:
        m._ackd = True


async def _reply_prefix(nc: Client) -> bytearray:
    if not nc._resp_sub_prefix:
        await nc._init_request_sub()
    assert nc._resp_sub_prefix is not None  # set by _init_request_sub
    return nc._resp_sub_prefix


def _frame(nc: Client, subject: str, reply: str, headers: dict[str, str] | None, data: bytes) -> bytes:
    """One message's PUB / HPUB frame, checked and written as `Client.publish` does (the subject
    checked as `_validate_subject` does, header keys checked, header values trimmed and CR/LF
    made spaces: nothing a caller passes can end a line and inject protocol)."""
    if not subject or _SUBJECT_INVALID_RE.search(subject):
        raise nats_errors.BadSubjectError
    if len(data) > nc._max_payload:
        raise nats_errors.MaxPayloadError
    to = f"{subject} {reply}".encode() if reply else subject.encode()
    if not headers:
        return b"PUB %s %d\r\n%s\r\n" % (to, len(data), data)
    block = "NATS/1.0\r\n"
    for key, value in headers.items():
        if key not in _checked_keys:
            key = key.strip()
            if not key:
                continue
            if not _HEADER_KEY_RE.fullmatch(key):
                raise nats_errors.BadHeaderError(key)
            _checked_keys.add(key)
        value = value.strip()
        if "\r" in value or "\n" in value:
            value = value.translate(_HEADER_VALUE_NEWLINES)
        block += f"{key}: {value}\r\n"
    head = (block + "\r\n").encode()
    return b"HPUB %s %d %d\r\n%s%s\r\n" % (to, len(head), len(head) + len(data), head, data)


async def _send(nc: Client, frames: list[bytes], payload_bytes: int) -> None:
    """Queue `frames` on the connection's outgoing buffer as one chunk and wake its flusher, as
    `Client.publish` does for each (buffered while reconnecting, within the pending limit)."""
    if todo := _queue(nc, b"".join(frames), payload_bytes, len(frames)):
        await nc._flush_pending(force_flush=todo == _FORCE)


_KICK, _FORCE = 1, 2


def _queue(nc: Client, chunk: bytes, payload_bytes: int, count: int = 1) -> int:
    """Append `chunk` (`count` messages) to the connection's outgoing buffer. What the caller
    must then do, as `Client.publish` does: 0 nothing (a wake-up of nats-py's flusher is queued
    already: a whole turn of the loop's publishes share one), _KICK wake the flusher, _FORCE
    flush and wait for it (the buffer is past its pending limit)."""
    if nc.is_closed:
        raise nats_errors.ConnectionClosedError
    if nc.is_draining_pubs:
        raise nats_errors.ConnectionDrainingError
    if not nc.is_connected and (nc._max_pending_size <= 0 or len(chunk) + nc._pending_data_size > nc._max_pending_size):
        raise nats_errors.OutboundBufferLimitError
    stats = nc.stats
    stats["out_msgs"] += count
    stats["out_bytes"] += payload_bytes
    nc._pending.append(chunk)
    nc._pending_data_size += len(chunk)
    if nc._max_pending_size > 0 and nc._pending_data_size > nc._max_pending_size:
        return _FORCE
    return _KICK if nc._flush_queue is not None and nc._flush_queue.empty() else 0


class _Round:
    """The requests one turn of the loop starts, with one timer for their answers: a
    batch op's hundred state writes start in the same turn, and a timer each (`call_later`, then
    its cancel) cost more than the rest of the bookkeeping. The timer fails whatever is still
    unanswered `answer_within` seconds after the round began; the round closes at the end of
    the turn (`call_soon`), and its timer goes as soon as its last answer is in."""

    __slots__ = ("futures", "key", "left", "timer")
    _open: dict[tuple[asyncio.AbstractEventLoop, float], _Round] = {}

    def __init__(self, loop: asyncio.AbstractEventLoop, answer_within: float) -> None:
        self.futures: list[asyncio.Future[Msg]] = []
        self.key = (loop, answer_within)
        self.left = 0
        self.timer = loop.call_later(answer_within, self._expire)

    @classmethod
    def join(cls, answer_within: float) -> tuple[_Round, asyncio.Future[Msg]]:
        """The open round's (or a new round's) future for one more answer."""
        loop = asyncio.get_running_loop()
        key = (loop, answer_within)
        rnd = cls._open.get(key)
        if rnd is None:
            rnd = cls._open[key] = _Round(loop, answer_within)
            loop.call_soon(rnd._close)
        future: asyncio.Future[Msg] = loop.create_future()
        rnd.futures.append(future)
        rnd.left += 1
        return rnd, future

    def answered(self) -> None:
        """One of the round's publishes is over (answered, failed or cancelled)."""
        self.left -= 1
        if not self.left:
            # Over before the turn ended (a publish refused at once): the turn's later publishes
            # start a round of their own, with a timer of its own.
            self._close()
            self.timer.cancel()
            self.futures.clear()

    def _close(self) -> None:
        if self._open.get(self.key) is self:
            del self._open[self.key]

    def _expire(self) -> None:
        for future in self.futures:
            if not future.done():
                future.set_exception(TimeoutError("no answer from the stream"))


@contextlib.contextmanager
def _answers_to(nc: Client, tokens: list[str], answer_within: float) -> Iterator[list[asyncio.Future[Msg]]]:
    """A future for the answer to each reply token on nats-py's response inbox, in this turn's
    round (`_Round`: one timer for them all), gone when the block ends; anything the block
    raises (a broken connection, no answer in time) is `Unavailable`. `request` does the same
    for one token, written out flat (every state write is one)."""
    joined = [_Round.join(answer_within) for _ in tokens]
    for token, (_, future) in zip(tokens, joined, strict=True):
        nc._resp_map[token] = future
    try:
        yield [future for _, future in joined]
    except Exception as exc:
        # the NATS adapter boundary, as in the single publish
        raise unavailable() from exc
    finally:
        for token, (rnd, future) in zip(tokens, joined, strict=True):
            nc._resp_map.pop(token, None)
            future.cancel()
            rnd.answered()


def _sequence(subject: str, msg: Msg) -> int:
    if msg.headers and msg.headers.get("Status") == _NO_RESPONDERS:
        raise unavailable()  # no stream listens on the subject
    try:
        answer: Any = fastjson.loads(msg.data)
    except ValueError:
        raise unavailable() from None
    if isinstance(answer, dict):
        error = answer.get("error")
        if isinstance(error, dict):
            raise Rejected(subject, int(error.get("err_code") or 0), str(error.get("description") or ""))
        if "seq" in answer:
            return int(answer["seq"])
    raise unavailable()
