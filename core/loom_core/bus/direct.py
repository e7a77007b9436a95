"""Reading a stream after a sequence without a consumer: JetStream's batched direct get.

`$JS.API.DIRECT.GET.<stream>` with `{"seq": n, "next_by_subj": filter, "batch": k}` (nats-server
2.11+, a stream with `allow_direct`) answers with up to `k` messages on `filter` at or after `n`
(each with `Nats-Sequence` and `Nats-Subject` headers), then an end-of-batch status (204); when
nothing is there, a 404 status alone. Any replica of the stream answers, and nothing is created
on the server: a read from a cursor costs no consumer. Sent with nats-py's public API only (an
inbox subscribed for the one request).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from nats.errors import TimeoutError as NatsTimeoutError

from ..errors import ErrorCode, Unavailable
from .replicas import BusJetStream

SEQUENCE = "Nats-Sequence"
SUBJECT = "Nats-Subject"
_STATUS = "Status"
_END_OF_BATCH = "204"
_NOT_FOUND = "404"
#: Most subjects one `read_last` names (nats-server answers at most 1,024 messages a batched get).
MULTI_LAST = 1024


@dataclass(slots=True, frozen=True)
class Stored:
    """One stored message: its stream sequence, subject and body."""

    seq: int
    subject: str
    data: bytes


def unavailable() -> Unavailable:
    return Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the event stream did not answer")


async def read_after(js: BusJetStream, stream: str, subject_filter: str, after_seq: int, batch: int) -> list[Stored]:
    """Up to `batch` messages on `subject_filter` stored after `after_seq`, in stream order; []
    when there are none. A stream that does not answer within the context's timeout: `Unavailable`."""
    return await _batch_get(js, stream, {"seq": after_seq + 1, "next_by_subj": subject_filter, "batch": batch}, batch)


async def read_last(js: BusJetStream, stream: str, subjects: list[str]) -> dict[str, Stored]:
    """The last message of each subject (at most MULTI_LAST of them), by subject; a subject
    that holds nothing is left out. One request (`{"multi_last": subjects}`) for the lot instead
    of a direct get each."""
    if not subjects:
        return {}
    assert len(subjects) <= MULTI_LAST, "one multi_last request names at most MULTI_LAST subjects"
    got = await _batch_get(js, stream, {"multi_last": subjects, "batch": len(subjects)}, len(subjects))
    return {m.subject: m for m in got}


async def _batch_get(js: BusJetStream, stream: str, ask: dict[str, object], batch: int) -> list[Stored]:
    """Up to `batch` messages a batched direct get `ask` answers with, in the order sent."""
    nc = js.nc
    inbox = nc.new_inbox()
    try:
        sub = await nc.subscribe(inbox)
    except Exception as exc:
        # the NATS adapter boundary: a connection that cannot subscribe is a bus that does not answer
        raise unavailable() from exc
    out: list[Stored] = []
    try:
        await nc.publish(f"{js.api_prefix}.DIRECT.GET.{stream}", json.dumps(ask).encode(), inbox)
        while True:
            msg = await sub.next_msg(timeout=js.timeout)
            headers = msg.headers or {}
            status = headers.get(_STATUS)
            if status in (_END_OF_BATCH, _NOT_FOUND):
                return out
            if status or SEQUENCE not in headers:
                raise unavailable()  # 503 no stream, 408 or another refusal
            out.append(Stored(int(headers[SEQUENCE]), headers.get(SUBJECT, ""), msg.data))
            if len(out) >= batch:
                return out  # the end-of-batch status that follows goes with the inbox
    except NatsTimeoutError as exc:
        raise unavailable() from exc
    except Unavailable:
        raise
    except Exception as exc:
        # the NATS adapter boundary: any other client failure is BACKEND_UNAVAILABLE
        raise unavailable() from exc
    finally:
        try:
            await sub.unsubscribe()
        except Exception:  # noqa: BLE001 - a closed connection took the subscription with it
            pass
