"""Rules of minted tokens that are the identity ops' own (core's delegation decides the rest)."""

from __future__ import annotations

from loom_core.errors import invalid_field

# Token id prefixes Loom itself gives meaning to (an assistant answer's token is told by its id).
RESERVED_PREFIXES = ("assistant-answer-", "bootstrap-")


def check_prefix(prefix: str) -> str:
    if prefix and (len(prefix) > 40 or not prefix.replace("-", "").replace("_", "").isalnum()):
        raise invalid_field("token_id_prefix", "letters, digits, '-' and '_', at most 40")
    if prefix.startswith(RESERVED_PREFIXES):
        raise invalid_field("token_id_prefix", "this prefix is reserved")
    return prefix
