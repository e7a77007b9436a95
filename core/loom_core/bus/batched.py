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

Everything else is FastStream's: the handler gets a `NatsBatchMessage` (`raw_message` is the
list of nats-py messages, in stream order), the consumer's ack policy acks or naks the whole
fetch when the handler returns or raises, a cancelled handler acks nothing. Messages fetched as
the subscriber stops (the fetch ahead's included) are handed back (nak) instead of waiting out
their ack wait.

nats-py (pinned in requirements.lock) has no public "fetch what is ready" call: `fetch(n)` falls
back to a lingering request for n messages when nothing is ready and then waits for all n (or
its expiry). `take_ready` speaks the pull protocol on the pull subscription's own inbox, as
`fetch` does (`_nms`, `_deliver`, `_sub`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

from faststream.nats.subscriber.usecases.stream_pull_subscriber import BatchPullStreamSubscriber
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.client import JetStreamContext

if TYPE_CHECKING:
    from nats.aio.msg import Msg

log = logging.getLogger(__name__)

#: Longest a turn waits for the answer to a `no_wait` request (one round trip; a late answer
#: lands in the queue and is taken next turn). A consumer without a leader answers nothing.
READY_ANSWER_SECONDS = 1.0
#: Pause after a failed fetch (connection closed, consumer gone) before the next turn.
ERROR_PAUSE_SECONDS = 0.1


def _drain_queued(psub: Any, out: list[Msg], limit: int) -> None:
    """Move messages already in the subscription's queue (left by an earlier request) to `out`;
    status messages there answered earlier requests and are dropped."""
    sub = psub._sub
    queue = sub._pending_queue
    while len(out) < limit and not queue.empty():
        msg = queue.get_nowait()
        sub._pending_size -= len(msg.data)
        queue.task_done()
        if not JetStreamContext.is_status_msg(msg):
            out.append(msg)


async def take_ready(psub: Any, limit: int) -> list[Msg]:
    """Up to `limit` messages the consumer has ready now; [] when it has none. One `no_wait`
    pull request: the server sends what it has, then a status (404/408) when that was fewer."""
    msgs: list[Msg] = []
    _drain_queued(psub, msgs, limit)
    if len(msgs) >= limit:
        return msgs
    sub = psub._sub
    queue = sub._pending_queue
    try:
        await psub._nc.publish(psub._nms, json.dumps({"batch": limit - len(msgs), "no_wait": True}).encode(), psub._deliver)
        while len(msgs) < limit:
            if queue.empty():
                try:
                    msg = await sub.next_msg(timeout=READY_ANSWER_SECONDS)
                except NatsTimeoutError:
                    break
            else:
                msg = queue.get_nowait()
                sub._pending_size -= len(msg.data)
                queue.task_done()
            status = JetStreamContext.is_status_msg(msg)
            if status:
                if JetStreamContext._is_heartbeat(status):
                    continue
                break  # 404 no messages, 408 request done, 409 limits: this request is over
            msgs.append(msg)
    except asyncio.CancelledError:
        await _hand_back(msgs)  # taken off the queue: back to the consumer now, not after their ack wait
        raise
    return msgs


async def fetch_prompt(psub: Any, limit: int, wait: float) -> list[Msg]:
    """What is ready (up to `limit`); when nothing is, wait up to `wait` seconds for one message
    and take what else is ready with it. [] when `wait` passed with nothing."""
    msgs = await take_ready(psub, limit)
    if msgs:
        return msgs
    try:
        first: list[Msg] = await psub.fetch(1, timeout=wait)
    except NatsTimeoutError:
        return []
    if limit > 1:
        first += await take_ready(psub, limit - len(first))
    return first


class PromptBatchSubscriber(BatchPullStreamSubscriber):
    """FastStream's batch pull subscriber with `fetch_prompt` as its fetch loop (see the module doc).
    `Bus.consume` makes a batch consumer's subscriber one of these (same slots, same state)."""

    __slots__ = ()

    async def _consume_pull(self) -> None:
        assert self.subscription, "You should call `create_subscription` at first."
        psub = self.subscription
        limit = self.pull_sub.batch_size
        timeout = self.pull_sub.timeout or 5.0
        ahead: asyncio.Task[list[Msg]] | None = None
        try:
            while self.running:
                fetch, ahead = ahead, None
                try:
                    messages = await fetch if fetch is not None else []
                    if not messages:
                        messages = await fetch_prompt(psub, limit, timeout)
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
                ahead = asyncio.ensure_future(take_ready(psub, limit))
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

    def handler_failed(self) -> None:
        """Called by the handler's wrapper (bus/nats.py) when the handler raised on a fetch."""
        vars(self)[_FAILED] = True


_FAILED = "loom_handler_failed"


async def _hand_back(messages: list[Msg]) -> None:
    for m in messages:
        with contextlib.suppress(Exception):
            await m.nak()


async def _drop(fetch: asyncio.Task[list[Msg]]) -> None:
    """Stop a fetch made ahead and hand back what it took (a fetch cut off mid-way hands back its own)."""
    if not fetch.done():
        fetch.cancel()
    with contextlib.suppress(BaseException):
        await fetch
    if fetch.done() and not fetch.cancelled() and fetch.exception() is None:
        await _hand_back(fetch.result())
