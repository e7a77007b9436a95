"""JetStream publishes on the hot paths: each answered with the stored message's sequence.

A JetStream publish is a NATS request to the stream's subject, answered by the server with a
small JSON document (`{"stream":..,"seq":N}` or `{"error":{"code":..,"err_code":..}}`). nats-py's
`JetStreamContext.publish` and `publish_async` wrap each in `asyncio.wait_for`, two random bytes
from the OS (`secrets.token_hex`) and a parse by the standard library into a PubAck dataclass:
about a third of the Python CPU of a task state write (measured with py-spy on bench/tasks.py),
and every task transition is one write and one event. `publish_many` sends on nats-py's own
response inbox (the connection's one wildcard subscription, its `_resp_map` of futures keyed by
the reply token; nats-py is pinned and tests/core/test_fast_paths.py checks this against a real
server), with one timer per call and orjson for the answers.

A publish the stream refuses raises `Rejected` (its JetStream error code: a compare-and-set
that lost is 10071); no stream, no answer in time, or a broken connection raise `Unavailable`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from .. import fastjson
from ..errors import ErrorCode, Unavailable

#: How long a publish waits for the stream's answer (nats-py's JetStream default).
TIMEOUT_SECONDS = 5.0
_NO_RESPONDERS = "503"


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
    return (await publish_many(nc, [(subject, data, headers)], answer_within=answer_within))[0]


async def publish_many(nc: Client, messages: Sequence[Publish], *, answer_within: float = TIMEOUT_SECONDS) -> list[int]:
    """Store `messages` pipelined: all sent in order, then every answer awaited (JetStream stores
    one connection's publishes in the order sent). Their stream sequences, in order. The first
    refusal raises `Rejected` once every answer is in (a message sent after a refused one may be
    stored)."""
    if not nc._resp_sub_prefix:
        await nc._init_request_sub()
    assert nc._resp_sub_prefix is not None  # set by _init_request_sub
    prefix = nc._resp_sub_prefix.decode()
    loop = asyncio.get_running_loop()
    pending: list[tuple[str, asyncio.Future[Msg]]] = []
    timer = loop.call_later(answer_within, _expire, pending)
    try:
        for subject, data, headers in messages:
            # The NUID alone is unique for this connection's life (nats-py adds two random bytes).
            token = nc._nuid.next().decode()
            future: asyncio.Future[Msg] = loop.create_future()
            nc._resp_map[token] = future
            pending.append((token, future))
            await nc.publish(subject, data, reply=prefix + token, headers=headers)
        answers = [await future for _, future in pending]
    except Exception as exc:
        raise unavailable() from exc
    finally:
        timer.cancel()
        for token, future in pending:
            nc._resp_map.pop(token, None)
            future.cancel()
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


def _expire(pending: list[tuple[str, asyncio.Future[Msg]]]) -> None:
    for _, future in pending:
        if not future.done():
            future.set_exception(TimeoutError("no answer from the stream"))


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
