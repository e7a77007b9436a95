"""Compare-and-set on one JetStream subject: the one place Loom writes "a key" on NATS.

A key is a subject of a stream; its value is the subject's last message and its revision that
message's stream sequence (revisions only grow, stream-wide). Writes are publishes carrying
`Nats-Expected-Last-Subject-Sequence`:

- `create_if_absent(subject, data)`: expected 0 (the subject holds nothing), or over a delete /
  purge marker at its sequence;
- `update_at(subject, data, last)`: only while the subject's last message is still `last`;
- `read(subject)`: the last message by direct get (any replica of the stream answers).

A lost race raises `WrongRevision`; a bus that does not answer, `Unavailable`. `ensure_stream`
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

EXPECTED_LAST = "Nats-Expected-Last-Subject-Sequence"
KV_OPERATION = "KV-Operation"
ROLLUP = "Nats-Rollup"
MSG_TTL = "Nats-TTL"
#: JetStream "wrong last sequence" error codes (JSStreamWrongLastSequenceErr and its constant form).
WRONG_LAST_SEQUENCE = (10071, 10164)


class WrongRevision(Exception):
    """The key moved since it was read (or exists, for a create): read again."""


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


async def read(js: JetStreamContext, stream: str, subject: str, *, direct: bool = True) -> Entry | None:
    """The subject's last message, or None when the subject holds none. `direct`: any replica
    answers (the stream must allow direct gets); else the stream's leader."""
    try:
        msg = await js.get_msg(stream, subject=subject, direct=direct)
    except nats.js.errors.NotFoundError:
        return None
    except Exception as exc:
        raise unavailable() from exc
    seq = int(msg.seq or 0)
    if msg.headers and msg.headers.get(KV_OPERATION) in ("DEL", "PURGE"):
        return Entry(None, seq)
    return Entry(msg.data or None, seq)


async def update_at(
    js: JetStreamContext, subject: str, data: bytes, last: int, *, ttl: float | None = None, headers: dict[str, str] | None = None
) -> int:
    """Write at revision `last` (0: the subject must hold nothing); the new revision."""
    h = {EXPECTED_LAST: str(last), **(headers or {})}
    if ttl is not None:
        h[MSG_TTL] = str(int(ttl))
    try:
        return await jspublish.publish(js._nc, subject, data, h, answer_within=js._timeout)
    except jspublish.Rejected as exc:
        if exc.err_code in WRONG_LAST_SEQUENCE:
            raise WrongRevision(subject) from None
        raise unavailable() from exc


async def create_if_absent(
    js: JetStreamContext, stream: str, subject: str, data: bytes, *, ttl: float | None = None, direct: bool = True
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
