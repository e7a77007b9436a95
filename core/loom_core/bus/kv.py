"""Compare-and-set on one JetStream subject: the one place Loom writes "a key" on NATS.

A key is a subject of a stream; its value is the subject's last message and its revision that
message's stream sequence (revisions only grow, stream-wide). Writes are publishes carrying
`Nats-Expected-Last-Subject-Sequence`:

- `create_if_absent(subject, data)`: expected 0 (the subject holds nothing), or over a delete /
  purge marker at its sequence;
- `update_at(subject, data, last)`: only while the subject's last message is still `last`;
- `update_many_at([(subject, data, last), ...])`: several such writes as one JetStream atomic
  batch (nats-server 2.12+, a stream with `allow_atomic`): all stored, or none;
- `read(subject)`: the last message by direct get (any replica of the stream answers).

A lost race raises `WrongRevision` (`BatchRefused` for a batch: which write lost is not said);
a bus that does not answer, `Unavailable`. `ensure_stream`
creates a stream or updates its config (the same call on every replica).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import nats.js.errors
from nats.js.api import StreamConfig
from nats.js.client import JetStreamContext

from .. import fastjson
from ..errors import ErrorCode, Unavailable
from . import jspublish
from .replicas import BusJetStream

EXPECTED_LAST = "Nats-Expected-Last-Subject-Sequence"
KV_OPERATION = "KV-Operation"
ROLLUP = "Nats-Rollup"
NATS_SEQUENCE = "Nats-Sequence"  # a direct get's answer: the message's stream sequence
STATUS = "Status"  # nats-py's key for an answer's status line
NOT_FOUND = "404"
MSG_TTL = "Nats-TTL"
#: JetStream "wrong last sequence" error codes (JSStreamWrongLastSequenceErr and its constant form).
WRONG_LAST_SEQUENCE = (10071, 10164)


class WrongRevision(Exception):
    """The key moved since it was read (or exists, for a create): read again."""


class BatchRefused(Exception):
    """An atomic batch of writes was refused whole (a write in it lost its race, or the stream
    takes no batch now): nothing of it is stored; write them one by one."""


@dataclass(slots=True)
class Entry:
    """A key's last message: `data` is None for a delete / purge marker."""

    data: bytes | None
    revision: int


def unavailable() -> Unavailable:
    return Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the state store (NATS JetStream) did not answer")


async def ensure_stream(js: JetStreamContext, config: StreamConfig) -> None:
    try:
        await js.stream_info(str(config.name))
    except nats.js.errors.NotFoundError:
        try:
            await js.add_stream(config)
            return
        except nats.js.errors.BadRequestError:
            pass  # another replica created it first
    await js.update_stream(config)


async def read(js: BusJetStream, stream: str, subject: str, *, direct: bool = True) -> Entry | None:
    """The subject's last message, or None when the subject holds none. `direct`: any replica
    answers (the stream must allow direct gets: `$JS.API.DIRECT.GET.<stream>.<subject>`, as
    nats-py's `get_msg(direct=True)` asks, through `jspublish.request`); else the stream's leader."""
    if direct:
        try:
            msg = await jspublish.request(js.nc, f"{js.api_prefix}.DIRECT.GET.{stream}.{subject}", answer_within=js.timeout)
        except Unavailable:
            raise unavailable() from None
        headers = msg.headers or {}
        status = headers.get(STATUS)
        if status == NOT_FOUND:
            return None
        if status or NATS_SEQUENCE not in headers:
            raise unavailable()  # no stream answers (503), or it refused the request
        return _entry(msg.data, int(headers[NATS_SEQUENCE]), headers)
    try:
        raw = await js.get_msg(stream, subject=subject)
    except nats.js.errors.NotFoundError:
        return None
    except Exception as exc:
        # the NATS adapter boundary: any other client failure is BACKEND_UNAVAILABLE
        raise unavailable() from exc
    return _entry(raw.data, int(raw.seq or 0), raw.headers)


def _entry(data: bytes | None, seq: int, headers: dict[str, str] | None) -> Entry:
    if headers and headers.get(KV_OPERATION) in ("DEL", "PURGE"):
        return Entry(None, seq)
    return Entry(data or None, seq)


async def update_at(
    js: BusJetStream, subject: str, data: bytes, last: int, *, ttl: float | None = None, headers: dict[str, str] | None = None
) -> int:
    """Write at revision `last` (0: the subject must hold nothing); the new revision."""
    try:
        return await jspublish.publish(js.nc, subject, data, _write_headers(last, ttl, headers), answer_within=js.timeout)
    except jspublish.Rejected as exc:
        if exc.err_code in WRONG_LAST_SEQUENCE:
            raise WrongRevision(subject) from None
        raise unavailable() from exc


def _write_headers(last: int, ttl: float | None, headers: dict[str, str] | None) -> dict[str, str]:
    """A write's headers: at revision `last`, with `headers` and, when given, its own TTL."""
    h = {EXPECTED_LAST: str(last), **(headers or {})}
    if ttl is not None:
        h[MSG_TTL] = str(int(ttl))
    return h


async def update_many_at(
    js: BusJetStream, writes: list[tuple[str, bytes, int]], *, ttls: list[float] | None = None, headers: dict[str, str] | None = None
) -> list[int]:
    """Each (subject, data, last) written at its revision `last` (0: the subject holds nothing),
    all in one atomic batch (at most `jspublish.ATOMIC_BATCH_MAX`): their new revisions, in order.
    One answer for the lot instead of one each. `ttls` (one a write) and `headers` (every write's)
    as `update_at` takes them. `BatchRefused` stores nothing."""
    messages: list[jspublish.Publish] = [
        (subject, data, _write_headers(last, ttls[i] if ttls is not None else None, headers))
        for i, (subject, data, last) in enumerate(writes)
    ]
    try:
        return await jspublish.publish_atomic(js.nc, messages, answer_within=js.timeout)
    except jspublish.Rejected as exc:
        raise BatchRefused(exc.err_code) from None


async def create_if_absent(
    js: BusJetStream, stream: str, subject: str, data: bytes, *, ttl: float | None = None, direct: bool = True
) -> int:
    """Write only when the subject holds no live value (nothing, or a delete marker)."""
    try:
        return await update_at(js, subject, data, 0, ttl=ttl)
    except WrongRevision:
        entry = await read(js, stream, subject, direct=direct)
        if entry is None or entry.data is not None:
            raise
        return await update_at(js, subject, data, entry.revision, ttl=ttl)


def dumps(value: Any) -> bytes:
    return fastjson.dumps(value)
