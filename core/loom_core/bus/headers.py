"""A faster NATS header parser for the runtime's connection.

Every JetStream message Loom reads back carries headers (a task state write's
`Nats-Expected-Last-Subject-Sequence`, an event's `Nats-Msg-Id`, a direct get's `Nats-Sequence`
…), and nats-py 2.16 checks each header name for whitespace with a Python generator, one step
per character: about a tenth of the tasks plane's CPU in `bench/tasks.py`. `parse_header_lines`
returns exactly what nats-py's `Client._parse_header_lines` returns (same skips, same decoding),
with the whitespace check done by `str.split` in C. `install` puts it on one connection.
"""

from __future__ import annotations

from typing import Any

_CRLF = b"\r\n"


def parse_header_lines(raw: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in raw.split(_CRLF):
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        try:
            key = name.strip().decode("ascii")
        except UnicodeDecodeError:
            continue
        if key and len(key.split()) != 1:
            continue  # whitespace inside a name: nats-py skips the line
        out[key] = value.strip().decode("utf-8", "replace")
    return out


def install(nc: Any) -> None:
    """Use `parse_header_lines` on this connection (nats-py calls `self._parse_header_lines`)."""
    if hasattr(type(nc), "_parse_header_lines"):
        nc._parse_header_lines = parse_header_lines
