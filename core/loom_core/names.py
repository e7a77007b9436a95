"""The grammar of Loom's names, once: org, namespace, inbox and service-account names,
subjects (`user:<id>`, `sa:<name>`), agent labels, and the grantable roles. Every plane
validates with these (identity's ops, tasks' inboxes and posters, ...)."""

from __future__ import annotations

import re

from .errors import invalid_field

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
SUBJECT = re.compile(r"^(user|sa):[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
ROLES: tuple[str, ...] = ("viewer", "writer", "admin")

NAME_RULE = "lower-case letters, digits, '-' and '_', starting with a letter or digit, at most 63"
SUBJECT_RULE = "a subject is user:<id> or sa:<name>"


def is_name(value: str) -> bool:
    return NAME.match(value) is not None


def is_subject(value: str) -> bool:
    return SUBJECT.match(value) is not None


def is_label(value: str) -> bool:
    return LABEL.match(value) is not None


def check_name(field: str, value: str) -> str:
    """An org, namespace, inbox or service-account name (422 naming `field` otherwise)."""
    if not is_name(value):
        raise invalid_field(field, NAME_RULE)
    return value


def check_subject(field: str, value: str) -> str:
    if not is_subject(value):
        raise invalid_field(field, SUBJECT_RULE)
    return value


def check_role(field: str, value: str, allow_none: bool = False) -> str:
    if value in ROLES or (allow_none and value == "none"):
        return value
    accepted = ", ".join((*ROLES, "none") if allow_none else ROLES)
    raise invalid_field(field, f"one of {accepted}")
