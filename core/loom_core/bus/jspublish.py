"""JetStream publishes on the hot paths: each answered with the stored message's sequence.

A JetStream publish is a NATS request to the stream's subject, answered by the server with a
small JSON document (`{"stream":..,"seq":N}` or `{"error":{"code":..,"err_code":..}}`). nats-py's
`JetStreamContext.publish` and `publish_async` wrap each in `asyncio.wait_for`, two random bytes
from the OS (`secrets.token_hex`) and a parse by the standard library into a PubAck dataclass:
about a third of the Python CPU of a task state write (measured with py-spy on bench/tasks.py),
and every task transition is one write and one event. This module does what nats.go's
`PublishAsync` does, with nats-py's public API only: one wildcard inbox subscription per
connection (`<inbox>.*`, `nc.subscribe`), each publish sent by `Client.publish` with the reply
subject `<inbox>.<token>` (a counter), its answer handed to the future waiting on that token, one
timer per turn of the loop for every answer started in it (`_Round`) and orjson for the answers.
nats-py resubscribes the inbox after a reconnect; an answer that comes after its publish gave up
finds no future and is dropped.

Why not FastStream's publish: its JetStream publish is nats-py's `js.publish` (above), and its
core publish with `reply_to=<inbox>.<token>` (the matching here, kept) builds a publish command
per message, runs it through the broker's middlewares and codec, and adds two headers to every
stored message (`correlation_id`, a fresh uuid4, and an empty `content-type`). Measured with
`bench/publish_path.py` (alternating round by round, load average 69-73 on 2 cores), CPU per
publish through nats-py -> through FastStream: 159.8 -> 194.9 us one at a time (3,112 -> 2,897
publishes/s), 45.4 -> 79.0 us 64 at once (9,150 -> 4,132 publishes/s); every
task transition is one of these, so the publishes stay on nats-py's public `Client.publish`.

`publish_atomic` stores a list as one JetStream atomic batch (nats-server 2.12+, a stream with
`allow_atomic`): every message is stored or none is, and only the last one is answered.

A publish the stream refuses raises `Rejected` (its JetStream error code: a compare-and-set
that lost is 10071); no stream, no answer in time, or a broken connection raise `Unavailable`.
A subject, header or payload `Client.publish` refuses raises nats-py's own error, as it does.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from nats import errors as nats_errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.nuid import NUID

from .. import fastjson
from ..errors import ErrorCode, Unavailable

#: How long a publish waits for the stream's answer (nats-py's JetStream default).
TIMEOUT_SECONDS = 5.0
_NO_RESPONDERS = "503"
#: JetStream's limit on the messages of one atomic batch (nats-server's default).
ATOMIC_BATCH_MAX = 1000
#: The first nats-server with atomic batch publishes (a stream's `allow_atomic`).
ATOMIC_SINCE = (2, 12)
_BATCH_ID = "Nats-Batch-Id"
_BATCH_SEQUENCE = "Nats-Batch-Sequence"
_BATCH_COMMIT = "Nats-Batch-Commit"
#: What `Client.publish` refuses before sending anything: the caller's mistake, raised as it is.
_REFUSED = (nats_errors.BadSubjectError, nats_errors.BadHeaderError, nats_errors.MaxPayloadError)
# Reply tokens: a counter is cheaper than a NUID, and the inbox is this module's alone.
_tokens = itertools.count()
_batch_ids = NUID()


class Rejected(Exception):
    """The stream answered with an error (`err_code`: JetStream's code, e.g. 10071)."""

    def __init__(self, subject: str, err_code: int, description: str) -> None:
        super().__init__(f"{subject}: {err_code} {description}")
        self.err_code = err_code


def server_takes_atomic(nc: Client) -> bool:
    """The connected nats-server knows atomic batches (a stream may then set `allow_atomic`)."""
    version = nc.connected_server_version
    return (version.major, version.minor) >= ATOMIC_SINCE


def unavailable() -> Unavailable:
    return Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the message stream (NATS JetStream) did not answer")


Publish = tuple[str, bytes, dict[str, str] | None]


class Replies:
    """One connection's inbox for this module's requests: `<inbox>.*`, one subscription, each
    answer handed to the future waiting on its token."""

    __slots__ = ("opened", "prefix", "waiting")

    def __init__(self, nc: Client) -> None:
        self.prefix = nc.new_inbox() + "."
        self.waiting: dict[str, asyncio.Future[Msg]] = {}
        self.opened = asyncio.ensure_future(nc.subscribe(self.prefix + "*", cb=self._arrived))

    async def _arrived(self, msg: Msg) -> None:
        future = self.waiting.pop(msg.subject[len(self.prefix) :], None)
        if future is not None and not future.done():
            future.set_result(msg)


_replies: weakref.WeakKeyDictionary[Client, Replies] = weakref.WeakKeyDictionary()


async def replies(nc: Client) -> Replies:
    """The connection's `Replies`, subscribed (the first call on a connection subscribes)."""
    r = _replies.get(nc)
    if r is None:
        r = _replies[nc] = Replies(nc)
    if not r.opened.done():
        try:
            await asyncio.shield(r.opened)
        except Exception as exc:
            # the NATS adapter boundary: an inbox that cannot be subscribed is a bus that does not answer
            _replies.pop(nc, None)
            raise unavailable() from exc
    elif r.opened.exception() is not None:
        _replies.pop(nc, None)
        raise unavailable()
    return r


async def publish(
    nc: Client, subject: str, data: bytes, headers: dict[str, str] | None = None, *, answer_within: float = TIMEOUT_SECONDS
) -> int:
    """Store one message; its stream sequence."""
    return _sequence(subject, await request(nc, subject, data, headers, answer_within=answer_within))


async def request(
    nc: Client, subject: str, data: bytes = b"", headers: dict[str, str] | None = None, *, answer_within: float = TIMEOUT_SECONDS
) -> Msg:
    """One request on the connection's `Replies` inbox, answered as `Client.request` answers it
    (a no-responders answer is returned, not raised). Every task state write is one (`publish`),
    and every read of a task's state (a direct get): written out flat (no lists, no context
    manager), its answer's timer shared with the requests the same turn of the loop starts
    (`_Round`). No answer within `answer_within`, or a broken connection: `Unavailable`."""
    r = _replies.get(nc)
    if r is None or not r.opened.done():
        r = await replies(nc)
    token = str(next(_tokens))
    rnd, future = _Round.join(answer_within)
    r.waiting[token] = future
    try:
        await nc.publish(subject, data, r.prefix + token, headers)
        return await future
    except _REFUSED:
        raise
    except Exception as exc:
        # the NATS adapter boundary: whatever the client raises (its errors, a timeout, a reset connection) is BACKEND_UNAVAILABLE
        raise unavailable() from exc
    finally:
        r.waiting.pop(token, None)
        future.cancel()
        rnd.answered()


async def publish_many(nc: Client, messages: Sequence[Publish], *, answer_within: float = TIMEOUT_SECONDS) -> list[int]:
    """Store `messages` pipelined: all sent in order, then every answer awaited (JetStream stores
    one connection's publishes in the order sent). Their stream sequences, in order. The first
    refusal raises `Rejected` once every answer is in (a message sent after a refused one may be
    stored)."""
    r = await replies(nc)
    tokens = [str(next(_tokens)) for _ in messages]
    with _answers_to(r, tokens, answer_within) as futures:
        for (subject, data, headers), token in zip(messages, tokens, strict=True):
            await nc.publish(subject, data, r.prefix + token, headers)
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
    r = await replies(nc)
    batch_id = _batch_ids.next().decode()
    token = str(next(_tokens))
    last = len(messages)
    with _answers_to(r, [token], answer_within) as (future,):
        for n, (subject, data, headers) in enumerate(messages, 1):
            batch = {**(headers or {}), _BATCH_ID: batch_id, _BATCH_SEQUENCE: str(n)}
            if n == last:
                batch[_BATCH_COMMIT] = "1"
            # Only the commit asks for an answer: it reports the batch's fate, a refusal included.
            await nc.publish(subject, data, r.prefix + token if n == last else "", batch)
        answer = await future
    seq = _sequence(messages[-1][0], answer)
    return list(range(seq - last + 1, seq + 1))


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
def _answers_to(r: Replies, tokens: list[str], answer_within: float) -> Iterator[list[asyncio.Future[Msg]]]:
    """A future for the answer to each reply token on the connection's `Replies` inbox, in this
    turn's round (`_Round`: one timer for them all), gone when the block ends; anything the block
    raises (a broken connection, no answer in time) is `Unavailable`, but for what
    `Client.publish` refuses. `request` does the same for one token, written out flat (every
    state write is one)."""
    joined = [_Round.join(answer_within) for _ in tokens]
    for token, (_, future) in zip(tokens, joined, strict=True):
        r.waiting[token] = future
    try:
        yield [future for _, future in joined]
    except _REFUSED:
        raise
    except Exception as exc:
        # the NATS adapter boundary, as in the single publish
        raise unavailable() from exc
    finally:
        for token, (rnd, future) in zip(tokens, joined, strict=True):
            r.waiting.pop(token, None)
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
