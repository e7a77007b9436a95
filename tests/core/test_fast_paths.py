"""The hot-path replacements give what they replace: NATS header parsing and compact JSON."""

from __future__ import annotations

import datetime
import enum
import json

import pytest
from loom_core import fastjson
from loom_core.bus.headers import parse_header_lines
from nats.aio.client import Client

HEADER_BLOCKS = [
    b"Nats-Expected-Last-Subject-Sequence: 12\r\n\r\n",
    b"Nats-Stream: LOOM_TASK_STATE\r\nNats-Subject: loom.task_state.o.t\r\nNats-Sequence: 7\r\nNats-Time-Stamp: 2026-11-30T22:00:00Z\r\n\r\n",
    b"Name:Value\r\nOther:\tspaced value  \r\n",
    b"Bad Name: skipped\r\nGood: kept\r\n",
    b"no colon here\r\n: empty name\r\n",
    b"Caf\xc3\xa9: non-ascii name skipped\r\nV: caf\xc3\xa9 \xff\r\n",
    b"",
]


@pytest.mark.parametrize("raw", HEADER_BLOCKS)
def test_header_parser_returns_what_nats_py_returns(raw: bytes) -> None:
    assert parse_header_lines(raw) == Client._parse_header_lines(raw)


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
