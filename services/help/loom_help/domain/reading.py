"""Reads: a page or one section, at most MAX_READ characters from an offset; a cut read names
the offset its rest starts at."""

from __future__ import annotations

from dataclasses import dataclass

MAX_READ = 16_000


@dataclass(frozen=True, slots=True)
class Cut:
    text: str
    # The offset the rest starts at, or None when the read reached the end.
    next_offset: int | None


def cut(text: str, offset: int, limit: int = MAX_READ) -> Cut:
    """text[offset:] up to `limit` characters, ending at a line break where one falls in the
    second half of the window, so the next read starts on a fresh line."""
    start = max(0, min(offset, len(text)))
    end = start + limit
    if end >= len(text):
        return Cut(text[start:], None)
    newline = text.rfind("\n", start + limit // 2, end)
    if newline != -1:
        end = newline + 1
    return Cut(text[start:end], end)
