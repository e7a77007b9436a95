"""A streamed answer's tool calls, merged from OpenAI-style deltas (pure).

The OpenAI chat-completions stream sends each tool call in pieces: the first delta of a call
carries its `index`, `id`, `type` and function `name`; later deltas carry only the `index` and
a fragment of `arguments`. LibreChat's agents API streams its MCP calls that way, and a later
model step may use the same indices again for its own calls. So a delta with an `id` starts a
call at its index and a delta without one continues the call open at its index: each call is
counted once, however many deltas it took.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class ToolCall:
    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(slots=True)
class ToolCalls:
    calls: list[ToolCall] = field(default_factory=list)
    _open: dict[int, ToolCall] = field(default_factory=dict)

    def add(self, delta: Mapping[str, Any]) -> None:
        """One element of a chunk's `delta.tool_calls`."""
        raw_index = delta.get("index")
        index = raw_index if isinstance(raw_index, int) and not isinstance(raw_index, bool) else len(self.calls)
        fn = delta.get("function")
        fn = fn if isinstance(fn, Mapping) else {}
        call_id = delta.get("id")
        current = self._open.get(index)
        if (isinstance(call_id, str) and call_id and (current is None or current.id != call_id)) or current is None:
            current = ToolCall(index, call_id if isinstance(call_id, str) else "")
            self._open[index] = current
            self.calls.append(current)
        if isinstance(fn.get("name"), str) and fn["name"]:
            current.name = current.name or fn["name"]
        if isinstance(fn.get("arguments"), str):
            current.arguments += fn["arguments"]

    def add_chunk(self, chunk: Mapping[str, Any]) -> None:
        """Every tool-call delta of one streamed chunk."""
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, Mapping):
                continue
            delta = choice.get("delta")
            for tc in (delta.get("tool_calls") if isinstance(delta, Mapping) else None) or []:
                if isinstance(tc, Mapping):
                    self.add(tc)

    def __len__(self) -> int:
        return len(self.calls)
