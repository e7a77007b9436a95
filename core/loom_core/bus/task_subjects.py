"""The task-event subject layout, the one place it is written.

Every task event is published on

    loom.tasks.<org>.<namespace>.<inbox>.<kind>

exactly four tokens after `loom.tasks`: the org, the inbox's owner namespace, the inbox, and
the event kind. Org, namespace and inbox names are `[a-z0-9_-]` and kinds `[a-z_]`, so no name
holds a `.` or a wildcard. The tasks plane publishes on it (and its stream, webhook deliverer
and notes consumer filter by it); the NATS auth callout lets a subscriber read a namespace's
part of it; the AsyncAPI document names it. Do not add a token.
"""

from __future__ import annotations

PREFIX = "loom.tasks"
#: Every task event (the stream's subjects; what the auth callout's account exports).
ALL = f"{PREFIX}.>"


def event_subject(org: str, namespace: str, inbox: str, kind: str) -> str:
    """`loom.tasks.<org>.<namespace>.<inbox>.<kind>`."""
    return f"{PREFIX}.{org}.{namespace}.{inbox}.{kind}"


def org_filter(org: str) -> str:
    """Every task event of an org."""
    return f"{PREFIX}.{org}.>"


def namespace_filter(org: str, namespace: str) -> str:
    """Every task event of the inboxes owned by one namespace (what a reader may subscribe to)."""
    return f"{PREFIX}.{org}.{namespace}.>"


def inbox_filter(org: str, inbox: str) -> str:
    """Every task event of one inbox, whichever namespace owns it."""
    return f"{PREFIX}.{org}.*.{inbox}.*"


def kind_filter(kind: str) -> str:
    """Every task event of one kind, in every org."""
    return f"{PREFIX}.*.*.*.{kind}"


def parse_subject(subject: str) -> tuple[str, str, str, str] | None:
    """(org, namespace, inbox, kind) of an event subject, or None."""
    parts = subject.split(".")
    if len(parts) != 6 or parts[0] != "loom" or parts[1] != "tasks":
        return None
    return parts[2], parts[3], parts[4], parts[5]
