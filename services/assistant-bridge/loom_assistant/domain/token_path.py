"""Whether the answer's token reaches Loom through LibreChat (ASSISTANT_UNAVAILABLE `auth_off`).

The agent's tools authenticate with the token LibreChat puts in the MCP server's Authorization
header ({{LIBRECHAT_BODY_PARENTMESSAGEID}}). When that path is off (a LibreChat that leaves the
placeholder empty, as v0.8.7's agents API does, or a configuration without the header), every
tool call reaches Loom without the answer's token: each is refused, and the answer reads
nothing. The bridge sees it from the ledger: LibreChat reported tool calls, and none of them
landed under the answer's token. After MISSES such answers in a row the assistant answers
`auth_off` (and its health check says so) for HOLD_S; the next answer after that is let through
as a probe, and one miss then is enough to hold again. One answer whose calls landed under its
token clears it all.
"""

from __future__ import annotations

from dataclasses import dataclass

MISSES = 2
HOLD_S = 60.0


@dataclass(slots=True)
class TokenPath:
    misses: int = 0
    tripped: bool = False
    off_until: float = 0.0

    def observe(self, *, tool_calls: int, rows_under_token: int, now: float) -> None:
        """One finished answer: LibreChat's count of its tool calls and the ledger rows its
        token made."""
        if tool_calls <= 0:
            return  # an answer with no tool call says nothing about the path
        if rows_under_token > 0:
            self.misses, self.tripped, self.off_until = 0, False, 0.0
            return
        self.misses += 1
        if self.tripped or self.misses >= MISSES:
            self.tripped, self.misses, self.off_until = True, 0, now + HOLD_S

    def off(self, now: float) -> bool:
        return now < self.off_until

    def reset(self) -> None:
        self.misses, self.tripped, self.off_until = 0, False, 0.0
