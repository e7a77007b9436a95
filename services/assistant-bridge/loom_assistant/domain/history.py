"""What step 3 sends LibreChat of the caller's messages: only user and assistant text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_TURNS = 50
MAX_CHARS = 20_000


class HistoryError(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a list (images and files dropped)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def clean_messages(messages: Sequence[Any], context_line: str | None) -> list[dict[str, str]]:
    """User and assistant text only (no system message, files or images), at most MAX_TURNS of
    at most MAX_CHARS each, ending with a user question; the context line goes last in it."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise HistoryError("messages", "a non-empty list is required")
    out: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise HistoryError(f"messages[{i}]", "must be an object")
        role = m.get("role")
        if role not in ("user", "assistant"):
            continue
        text = text_of(m.get("content"))
        if len(text) > MAX_CHARS:
            raise HistoryError(f"messages[{i}].content", f"at most {MAX_CHARS} characters")
        if text.strip():
            out.append({"role": str(role), "content": text})
    if not out or out[-1]["role"] != "user":
        raise HistoryError("messages", "the last message must be the user's question")
    if len(out) > MAX_TURNS:
        raise HistoryError("messages", f"at most {MAX_TURNS} turns")
    if context_line:
        out[-1] = {"role": "user", "content": out[-1]["content"] + "\n\n" + context_line}
    return out
