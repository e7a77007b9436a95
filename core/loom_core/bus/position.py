"""Where a JetStream message sits in its stream, read straight from its ack subject.

nats-py's `Msg.metadata` parses the ack subject into frozen dataclasses and a timezone-aware
datetime, about 10 us a message; the tasks plane's consumers read the stream sequence of every
message they get (several per task lifecycle). `position` reads the same two tokens nats-py
does, from either ack subject version, and raises what nats-py raises for a message that is no
JetStream delivery.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from nats.aio.msg import Msg
from nats.errors import NotJSMessageError

# $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
_V1_TOKENS = 9
_V1_STREAM_SEQ, _V1_CONSUMER_SEQ, _V1_PENDING = 5, 6, 8
# $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>[.<random>]
_V2_MIN_TOKENS = 11


class Position(NamedTuple):
    stream_seq: int
    pending: int  # messages after this one the consumer has yet to deliver


class Delivery(NamedTuple):
    stream_seq: int
    consumer_seq: int  # the delivery's number on its consumer (each redelivery takes the next one too)


def _ack_tokens(msg: Any) -> tuple[list[str], bool]:
    """The ack subject's tokens, and whether it is the first version's (no domain, no account)."""
    tokens = (msg.reply or "").split(".")
    if len(tokens) >= 2 and tokens[0] == Msg.Ack.Prefix0 and tokens[1] == Msg.Ack.Prefix1:
        if len(tokens) == _V1_TOKENS:
            return tokens, True
        if len(tokens) >= _V2_MIN_TOKENS:
            return tokens, False
    raise NotJSMessageError


def position(msg: Any) -> Position:
    """The message's stream sequence and its consumer's pending count (nats-py's
    `msg.metadata.sequence.stream` and `msg.metadata.num_pending`)."""
    tokens, v1 = _ack_tokens(msg)
    if v1:
        return Position(int(tokens[_V1_STREAM_SEQ]), int(tokens[_V1_PENDING]))
    return Position(int(tokens[Msg.Ack.StreamSeq]), int(tokens[Msg.Ack.NumPending]))


def delivery(msg: Any) -> Delivery:
    """The message's stream sequence and consumer sequence (nats-py's `msg.metadata.sequence`)."""
    tokens, v1 = _ack_tokens(msg)
    if v1:
        return Delivery(int(tokens[_V1_STREAM_SEQ]), int(tokens[_V1_CONSUMER_SEQ]))
    return Delivery(int(tokens[Msg.Ack.StreamSeq]), int(tokens[Msg.Ack.ConsumerSeq]))


def stream_seq(msg: Any) -> int:
    return position(msg).stream_seq
