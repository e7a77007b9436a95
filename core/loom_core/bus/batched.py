"""A durable pull consumer whose handler gets each fetch whole, as soon as it holds anything.

FastStream's batch pull subscriber (`PullSub(batch=True)`, one handler call per fetch instead of
one per message) keeps fetching until the batch is full or its timeout passes, so a lone write
would wait the whole timeout before its handler saw it. `PromptBatchSubscriber` replaces only
that loop: each turn takes what the consumer has ready right now (one `no_wait` pull request,
answered at once by the server), and only when nothing is ready waits on one lingering pull
request for a single message (an idle consumer sends one request per `timeout`: no fetch storm),
then takes what else is ready with it. So a busy consumer hands over up to `batch_size` messages
per call, and a lone message reaches its handler one round trip after it was stored. While the
handler applies a fetch, what is ready is taken ahead (one `no_wait` request, never a lingering
one) and handed over after it; a fetch whose handler raises hands the one ahead back too, after
its own, so the redeliveries keep stream order. Measured on the task projector under load, a
fetch of 1,000 writes took 10-90 ms of a ~250 ms turn, now hidden behind the handler.

FastStream (0.7.8) has no public way to this: its public options are `PullSub(batch_size,
timeout, batch=True)`, whose loop fetches until the batch is full or `timeout` passes (a lone
message waits the timeout out; a short timeout makes an idle consumer ask every `timeout`
seconds), and the fetch loop has no public extension point, so this class replaces FastStream's
`_consume_pull` (FastStream's method, not nats-py's). Measured with `bench/prompt_batch.py`, a
lone message's publish -> handler at load average 56-68 on 2 cores: this loop p50 1.6 ms, p90
2.4 ms; `PullSub(batch=True, timeout=0.5)` p50 202 ms, p90 341 ms; `timeout=0.05` p50 46 ms but
p90 30 s (a message delivered to a fetch that nats-py had already given up on waits out its ack
wait).

Everything else is FastStream's: the handler gets a `NatsBatchMessage` (`raw_message` is the
list of nats-py messages, in stream order), the consumer's ack policy acks or naks the whole
fetch through FastStream's message API when the handler returns or raises, a cancelled handler
acks nothing. Messages fetched as the subscriber stops (the fetch ahead's included) are handed
back (nak) instead of waiting out their ack wait.

nats-py (pinned in requirements.lock) has no public "fetch what is ready" call, and its public
`fetch(1)` hands a lone message over tens of milliseconds after it came. JetStream's pull is a
public wire protocol, spoken here with nats-py's public API only (`Puller`): a pull request
(`{"batch": n, "no_wait": true}` or `{"batch": 1, "expires": ns}`) is published to
`$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>` with a reply subject on an inbox subscribed
with `Client.subscribe` (`<inbox>.<token>`, one token per request); the server delivers the
messages there as it has them, and ends a request it could not fill with a header-only status
message (404 nothing ready, 408 expired, 409 limits or leadership, 503 no consumer).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections import deque
from typing import TYPE_CHECKING

from faststream.nats.message import NatsBatchMessage
from faststream.nats.subscriber.usecases.stream_pull_subscriber import BatchPullStreamSubscriber
from nats.js.api import DEFAULT_PREFIX
from nats.js.client import JetStreamContext

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg
    from nats.aio.subscription import Subscription

log = logging.getLogger(__name__)

#: Longest a turn waits for the answer to a `no_wait` request (one round trip; a late answer
#: lands in the inbox and is taken next turn). A consumer without a leader answers nothing.
READY_ANSWER_SECONDS = 1.0
#: How much longer than its own expiry a lingering request is waited for (its 408 may be late).
EXPIRY_GRACE_SECONDS = 1.0
#: Pause after a failed fetch (connection closed, consumer gone) before the next turn.
ERROR_PAUSE_SECONDS = 0.1
_EXPIRED = "408"
_HEARTBEAT = "100"


class Puller:
    """Pull requests on one consumer, answered on an inbox of its own (`<inbox>.*`): delivered
    messages queue in `ready` (in the order the server sent them, whichever request fetched
    them); a status ends the request its token names."""

    def __init__(self, nc: Client, stream: str, consumer: str) -> None:
        self.nc = nc
        self.next_subject = f"{DEFAULT_PREFIX}.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self.prefix = nc.new_inbox() + "."
        self.ready: deque[Msg] = deque()
        #: The requests being waited on, and the status that ended each (None while open).
        self.waiting: dict[str, str | None] = {}
        self.arrived = asyncio.Event()
        self.sub: Subscription | None = None
        self._tokens = itertools.count()

    async def open(self) -> None:
        self.sub = await self.nc.subscribe(self.prefix + "*", cb=self._arrived)

    async def close(self) -> None:
        """Unsubscribe, and hand back what was delivered and not taken."""
        sub, self.sub = self.sub, None
        if sub is not None:
            with contextlib.suppress(Exception):  # the connection may be closed already
                await sub.unsubscribe()
        left = list(self.ready)
        self.ready.clear()
        await _hand_back(left)

    async def _arrived(self, msg: Msg) -> None:
        status = JetStreamContext.is_status_msg(msg)
        if status and not msg.reply:
            token = msg.subject[len(self.prefix) :]
            if status != _HEARTBEAT and token in self.waiting:
                self.waiting[token] = status
        else:
            self.ready.append(msg)
        self.arrived.set()

    async def request(self, batch: int, *, expires: float = 0.0) -> str:
        """Send one pull request (`no_wait` unless it `expires` after that many seconds); its token."""
        token = str(next(self._tokens))
        self.waiting[token] = None
        ask: dict[str, object] = {"batch": batch, "expires": int(expires * 1e9)} if expires else {"batch": batch, "no_wait": True}
        await self.nc.publish(self.next_subject, json.dumps(ask).encode(), self.prefix + token)
        return token

    def take(self, out: list[Msg], limit: int) -> None:
        ready = self.ready
        while ready and len(out) < limit:
            out.append(ready.popleft())

    async def wait(self, within: float) -> bool:
        """Until something arrives or `within` seconds pass; False when they passed."""
        self.arrived.clear()
        try:
            await asyncio.wait_for(self.arrived.wait(), within)
        except TimeoutError:
            return False
        return True


async def take_ready(puller: Puller, limit: int) -> list[Msg]:
    """Up to `limit` messages the consumer has ready now; [] when it has none. One `no_wait`
    pull request: the server sends what it has, then a status (404/408) when that was fewer."""
    msgs: list[Msg] = []
    puller.take(msgs, limit)  # left by an earlier request
    if len(msgs) >= limit:
        return msgs
    token = ""
    try:
        token = await puller.request(limit - len(msgs))
        deadline = asyncio.get_running_loop().time() + READY_ANSWER_SECONDS
        while True:
            puller.take(msgs, limit)
            # The request's messages come before its status (one inbox, in order).
            if len(msgs) >= limit or puller.waiting[token] is not None:
                break
            if puller.ready:
                continue
            if not await puller.wait(deadline - asyncio.get_running_loop().time()):
                break
    except asyncio.CancelledError:
        await _hand_back(msgs)  # taken off the inbox: back to the consumer now, not after their ack wait
        raise
    finally:
        puller.waiting.pop(token, None)
    return msgs


async def fetch_prompt(puller: Puller, limit: int, wait: float) -> list[Msg]:
    """What is ready (up to `limit`); when nothing is, wait up to `wait` seconds for one message
    and take what else is ready with it. [] when `wait` passed with nothing."""
    msgs = await take_ready(puller, limit)
    if msgs:
        return msgs
    token = await puller.request(1, expires=wait)
    try:
        deadline = asyncio.get_running_loop().time() + wait + EXPIRY_GRACE_SECONDS
        while not puller.ready:
            status = puller.waiting[token]
            if status is not None:
                if status != _EXPIRED:  # 409 or 503: the consumer or its leader is gone for now
                    log.debug("bus: pull request ended with status %s", status)
                    await asyncio.sleep(ERROR_PAUSE_SECONDS)
                return []
            if not await puller.wait(deadline - asyncio.get_running_loop().time()):
                return []
    finally:
        puller.waiting.pop(token, None)
    puller.take(msgs, 1)
    if limit > 1:
        msgs += await take_ready(puller, limit - len(msgs))
    return msgs


class PromptBatchSubscriber(BatchPullStreamSubscriber):
    """FastStream's batch pull subscriber with `fetch_prompt` as its fetch loop (see the module doc).
    `Bus.consume` makes a batch consumer's subscriber one of these (same slots, same state)."""

    __slots__ = ()

    async def _consume_pull(self) -> None:
        assert self.subscription, "You should call `create_subscription` at first."
        limit = self.pull_sub.batch_size
        timeout = self.pull_sub.timeout or 5.0
        puller: Puller | None = None
        ahead: asyncio.Task[list[Msg]] | None = None
        try:
            while self.running:
                fetch, ahead = ahead, None
                try:
                    if puller is None:
                        info = await self.subscription.consumer_info()
                        puller = Puller(self.connection, info.stream_name, info.name)
                        await puller.open()
                    messages = await fetch if fetch is not None else []
                    if not messages:
                        messages = await fetch_prompt(puller, limit, timeout)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - connection closed, consumer gone: try again shortly
                    log.debug("bus: batch fetch failed: %s", type(exc).__name__)
                    await asyncio.sleep(ERROR_PAUSE_SECONDS)
                    continue
                if not messages:
                    continue
                if not self.running:  # stopping: hand them back now rather than after their ack wait
                    await _hand_back(messages)
                    return
                # What is ready now is taken while the handler applies this fetch (the handler
                # still gets one fetch at a time, in order): a busy consumer's next batch is here
                # when the handler returns, instead of a fetch's round trips later.
                ahead = asyncio.ensure_future(take_ready(puller, limit))
                vars(self)[_FAILED] = False
                await self.consume(messages)
                if vars(self)[_FAILED]:
                    # The fetch failed and its ack policy handed it back: so does the fetch
                    # ahead, after it, so the redeliveries come in stream order.
                    await _drop(ahead)
                    ahead = None
        finally:
            if ahead is not None:
                await _drop(ahead)
            if puller is not None:
                await puller.close()

    def handler_failed(self) -> None:
        """Called by the handler's wrapper (bus/nats.py) when the handler raised on a fetch."""
        vars(self)[_FAILED] = True


_FAILED = "loom_handler_failed"


async def _hand_back(messages: list[Msg]) -> None:
    """Nak what was fetched and not handed to the handler, through FastStream's message API."""
    if messages:
        with contextlib.suppress(Exception):  # the connection may be closed: they come back after their ack wait
            await NatsBatchMessage(messages, [m.data for m in messages]).nack()


async def _drop(fetch: asyncio.Task[list[Msg]]) -> None:
    """Stop a fetch made ahead and hand back what it took (a fetch cut off mid-way hands back its own)."""
    if not fetch.done():
        fetch.cancel()
    with contextlib.suppress(BaseException):
        await fetch
    if fetch.done() and not fetch.cancelled() and fetch.exception() is None:
        await _hand_back(fetch.result())
