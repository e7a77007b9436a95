"""Identity rules (pure)."""

from __future__ import annotations

import re

from loom_core.errors import invalid_field

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_SUBJECT = re.compile(r"^(user|sa):[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
ROLES = ("viewer", "writer", "admin")


def check_name(field: str, value: str) -> str:
    if not _NAME.match(value):
        raise invalid_field(field, "lower-case letters, digits, '-' and '_', starting with a letter or digit, at most 63")
    return value


def check_subject(field: str, value: str) -> str:
    if not _SUBJECT.match(value):
        raise invalid_field(field, "a subject is user:<id> or sa:<name>")
    return value


def check_role(field: str, value: str, allow_none: bool = False) -> str:
    if value in ROLES or (allow_none and value == "none"):
        return value
    accepted = ", ".join((*ROLES, "none") if allow_none else ROLES)
    raise invalid_field(field, f"one of {accepted}")
