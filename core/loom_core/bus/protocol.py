"""A faster NATS protocol parser for the runtime's connection.

Every message the tasks plane reads (a state write's answer, each delivery to the projector,
the sweep watch and the webhook deliverer, each event publish's answer: about fifteen per task
lifecycle) goes through nats-py's `Parser.parse`, which tries a `MSG` and then an `HMSG` regular
expression on the front of its buffer and deletes each message from the buffer as it goes.
`FastParser` reads the same `MSG` / `HMSG` control lines by splitting them on whitespace, walks
the buffer by offset and trims it once per read; anything else (`PING`, `PONG`, `+OK`, `-ERR`,
`INFO`, a malformed line) is handed to nats-py's parser as it stands, so those keep nats-py's
behaviour exactly. `_process_msg` gets the same arguments in the same order
(tests/core/test_fast_paths.py feeds both parsers the same streams, split at every offset).
"""

from __future__ import annotations

from typing import Any

from nats.errors import ProtocolError
from nats.protocol.parser import AWAITING_CONTROL_LINE, AWAITING_MSG_PAYLOAD, Parser

_CRLF = b"\r\n"
_MSG = b"MSG"
_HMSG = b"HMSG"


class FastParser(Parser):
    async def parse(self, data: bytes = b"") -> None:
        buf = self.buf
        buf.extend(data)
        pos = 0
        try:
            while True:
                if self.state == AWAITING_CONTROL_LINE:
                    end = buf.find(_CRLF, pos)
                    if end < 0:
                        break
                    parts = bytes(buf[pos:end]).split()
                    op = parts[0] if parts else b""
                    if op == _HMSG and len(parts) in (5, 6):
                        subject, sid = parts[1], parts[2]
                        reply = parts[3] if len(parts) == 6 else b""
                        header_size, total = parts[-2], parts[-1]
                        if not (sid.isdigit() and header_size.isdigit() and total.isdigit()):
                            raise ProtocolError("nats: malformed MSG")
                        self.header_needed = int(header_size)
                    elif op == _MSG and len(parts) in (4, 5):
                        subject, sid = parts[1], parts[2]
                        reply = parts[3] if len(parts) == 5 else b""
                        total = parts[-1]
                        if not (sid.isdigit() and total.isdigit()):
                            raise ProtocolError("nats: malformed MSG")
                    else:
                        # Not a message: nats-py's parser takes the buffer from here.
                        del buf[:pos]
                        pos = 0
                        await super().parse()
                        return
                    self.msg_arg["subject"] = subject
                    self.msg_arg["sid"] = int(sid)
                    self.msg_arg["reply"] = reply
                    self.needed = int(total)
                    pos = end + 2
                    self.state = AWAITING_MSG_PAYLOAD
                else:
                    needed = self.needed
                    if len(buf) - pos < needed + 2:
                        break
                    header_needed = self.header_needed
                    if header_needed > 0:
                        hdr: bytes | None = bytes(buf[pos : pos + header_needed])
                        payload = bytes(buf[pos + header_needed : pos + needed])
                        self.header_needed = 0
                    else:
                        hdr = None
                        payload = bytes(buf[pos : pos + needed])
                    pos += needed + 2
                    self.state = AWAITING_CONTROL_LINE
                    arg = self.msg_arg
                    await self.nc._process_msg(arg["sid"], arg["subject"], arg["reply"], payload, hdr)
                    if self.buf is not buf:
                        return  # the connection was reset meanwhile: this buffer is gone
        finally:
            if pos:
                del buf[:pos]


def install(nc: Any) -> None:
    """Parse this connection's protocol with FastParser (nats-py keeps its parser in `_ps`).

    The connection is already reading (a cluster's server sends INFO updates right after the
    handshake), so the parser object is kept, with whatever it holds (a partial line or
    message, its state), and only its class changes: a new parser would lose those bytes and
    read the rest of the stream from the middle of a message."""
    ps = getattr(nc, "_ps", None)
    if type(ps) is Parser:
        ps.__class__ = FastParser
