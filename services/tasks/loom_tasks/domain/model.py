"""The task inbox's values: statuses, a task row, an inbox row, a trust row (pure, no I/O).

Times are float seconds since the epoch (UTC); `None` is "not set". The store turns them into
ClickHouse DateTime64 columns and back; the handlers into RFC 3339 strings.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass, field
from typing import Any

TRIAGE = "triage"
TODO = "todo"
IN_PROGRESS = "in_progress"
DEFERRED = "deferred"
BLOCKED = "blocked"
DONE = "done"
FAILED = "failed"
WONT_DO = "wont_do"
CANCELLED = "cancelled"

STATUSES = (TRIAGE, TODO, IN_PROGRESS, DEFERRED, BLOCKED, DONE, FAILED, WONT_DO, CANCELLED)
#: A finished task answers every state change with 409 TASK_TERMINAL (task.reopen aside).
TERMINAL = frozenset({DONE, FAILED, WONT_DO, CANCELLED})
UNFINISHED = frozenset(STATUSES) - TERMINAL
#: task.reopen moves these back to todo.
REOPENABLE = frozenset({FAILED, WONT_DO, CANCELLED})

DISCLOSURES = ("confidential", "internal", "public_ok")
DEFAULT_DISCLOSURE = "internal"
BLOCKED_ON = ("sender", "human", "external")
MODES = ("deny", "review", "auto")

DEFAULT_PRIORITY = 3
MIN_PRIORITY, MAX_PRIORITY = 1, 5

# inbox.register defaults (spec 003, "Register an inbox").
DEFAULT_LEASE_SECONDS = 1800
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_MAX_DEFERS = 5
DEFAULT_TRIAGE_ESCALATE_AFTER_SECONDS = 4 * 3600
MAX_WAIT_SECONDS = 30


@dataclass(slots=True)
class TaskRow:
    """One task as stored: the current row of a ReplacingMergeTree(version) table."""

    org: str
    task_id: str
    inbox: str
    namespace: str
    kind: str
    title: str = ""
    brief: dict[str, Any] = field(default_factory=dict)
    status: str = TODO
    disclosure: str = DEFAULT_DISCLOSURE
    priority: int = DEFAULT_PRIORITY
    deadline: float | None = None
    not_before: float | None = None
    origin: str = ""
    parent_task_id: str = ""
    owner_agent: str = ""
    poster: str = ""
    poster_agent: str = ""
    poster_namespace: str = ""
    idempotency_key: str = ""
    reason: str = ""
    blocked_on: str = ""
    resume_at: float | None = None
    outcome: dict[str, Any] = field(default_factory=dict)
    claimed_by: str = ""
    claimed_agent: str = ""
    fence: int = 0
    lease_expires_at: float | None = None
    lease_seconds: int = 0
    attempts: int = 0
    defers: int = 0
    escalate_at: float | None = None
    escalated_at: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    version: int = 0
    #: The revision of the task's state on NATS this row was read at (0: not known). Not stored
    #: in the value: a value cannot carry the revision it is written at.
    rev: int = 0

    def copy(self, **changes: Any) -> TaskRow:
        # Positional construction from one C-level getter: a third of dataclasses.replace's cost
        # on this 35-field row, which every transition copies.
        new = TaskRow(*_all_fields(self))
        for name, value in changes.items():
            setattr(new, name, value)
        return new

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def held_by(self, subject: str, agent: str) -> bool:
        """The caller holds this task's lease: the subject and agent label that claimed it, while
        it is in progress. Only the holder is told the fence (a page reloaded after its claim
        still finishes the work); anyone else reads fence 0."""
        return self.status == IN_PROGRESS and self.claimed_by == subject and self.claimed_agent == agent

    def visible_to_pull(self, now: float) -> bool:
        """A todo task is claimable unless its not_before is still ahead."""
        return self.status == TODO and (self.not_before is None or self.not_before <= now)

    def pull_order(self, later: bool = False) -> tuple[int, float, bool, float, str]:
        """Pulls take the lowest priority number first, then the nearest deadline, then the oldest.
        `later`: within its priority and deadline the row goes after the others (a pull queue's
        row another replica just announced: service/wake.py `InboxQueue.ordered`)."""
        return (self.priority, self.deadline if self.deadline is not None else float("inf"), later, self.created_at, self.task_id)


#: Every field of TaskRow in declaration order, and one getter for all of them (TaskRow.copy).
TASK_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TaskRow))
_all_fields = operator.attrgetter(*TASK_FIELDS)
#: The fields a stored task holds (its state's value, its projection document, a wake-up), in
#: declaration order: all but `rev`, which names where a value is stored, not what it says.
STORED_FIELDS: tuple[str, ...] = tuple(f for f in TASK_FIELDS if f != "rev")
_STORED_FIELD_SET = frozenset(STORED_FIELDS)
stored_values = operator.attrgetter(*STORED_FIELDS)


def stored(row: TaskRow) -> dict[str, Any]:
    """The task as a dict of its STORED_FIELDS, in order (what `from_stored` reads back)."""
    return dict(zip(STORED_FIELDS, stored_values(row), strict=True))


def from_stored(d: dict[str, Any]) -> TaskRow:
    """A TaskRow from a stored dict (`stored`'s, decoded from JSON); keys this version does not
    know are left out, missing ones take their defaults. A dict holding exactly STORED_FIELDS in
    order (what every writer writes) is read positionally: keyword construction of this 35-field
    row from decoded JSON costs ~10 us (the keys are not interned, so each is matched by string
    comparison), positional well under 1 us, and the task plane decodes a row for every write."""
    if tuple(d) == STORED_FIELDS:
        return TaskRow(*d.values())
    return TaskRow(**{k: v for k, v in d.items() if k in _STORED_FIELD_SET})


@dataclass(slots=True)
class InboxRow:
    org: str
    name: str
    namespace: str
    owner_agent: str
    posters: tuple[str, ...] = ()
    accept_disclosure: tuple[str, ...] = DISCLOSURES
    default_lease_seconds: int = DEFAULT_LEASE_SECONDS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    max_defers: int = DEFAULT_MAX_DEFERS
    triage_escalate_after_seconds: int = DEFAULT_TRIAGE_ESCALATE_AFTER_SECONDS
    webhook_url: str = ""
    webhook_secret_ref: str = ""
    description: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    version: int = 0


@dataclass(frozen=True, slots=True)
class PolicyRow:
    """How far an inbox trusts one poster key for one kind ("*" matches any)."""

    inbox: str
    poster: str
    kind: str
    mode: str
    require_evidence: tuple[str, ...] = ()
    updated_at: float = 0.0
    updated_by: str = ""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who makes a call: the verified subject, the label it chose, and whether it may act as
    the inbox's owner (writer or above on the inbox's namespace: labels grant nothing)."""

    subject: str
    agent: str
    owner: bool
