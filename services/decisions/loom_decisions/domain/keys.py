"""A decision's key, derived from category + scenario as a record's identity key is.

Letters and digits of any script are kept (NFKC, case-folded); every other run of characters
becomes one `-`. A part with no letter or digit (punctuation, symbols or marks alone) has no
identity: the caller gets 400 MISSING_IDENTITY_FIELD. A long part is cut and suffixed with a
digest of the whole, so two scenarios sharing a long opening keep distinct keys.
"""

from __future__ import annotations

import hashlib
import unicodedata

KEY_PREFIX = "decision/"
PART_MAX = 96


class MissingIdentity(ValueError):
    def __init__(self, field_name: str) -> None:
        super().__init__(f"{field_name} has no letter or digit")
        self.field = field_name


def _slug(text: str) -> str:
    norm = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    dash = False
    for ch in norm:
        cat = unicodedata.category(ch)
        if cat[0] in ("L", "N"):
            out.append(ch)
            dash = False
        elif cat[0] == "M" and out and not dash:
            out.append(ch)  # a combining mark stays with its letter (Devanagari, Thai, ...)
        elif out and not dash:
            out.append("-")
            dash = True
    return "".join(out).strip("-")


def identity_part(field_name: str, text: str) -> str:
    slug = _slug(text)
    if not slug:
        raise MissingIdentity(field_name)
    if len(slug) > PART_MAX:
        digest = hashlib.sha256(slug.encode()).hexdigest()[:10]
        slug = slug[: PART_MAX - 11].rstrip("-") + "-" + digest
    return slug


def decision_key(category: str, scenario: str) -> str:
    """`decision/<category>/<scenario>` in slug form."""
    return f"{KEY_PREFIX}{identity_part('category', category)}/{identity_part('scenario', scenario)}"
