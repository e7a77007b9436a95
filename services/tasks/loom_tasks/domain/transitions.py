"""The state machine, as spec 003 draws it (pure).

    [*] -> triage (review) | todo (auto)
    triage -> todo (accept) | wont_do
    todo -> in_progress (pull / claim)
    in_progress -> done | failed | deferred | blocked | todo (lease expired)
    deferred -> todo (resume_at / resume)
    blocked -> todo (unblock)
    failed | wont_do | cancelled -> todo (reopen)
    wont_do and cancel apply from any unfinished status.

Each function takes the current row and answers a `Change`: the next row (its version is the
caller's to set, from the task's lease row) and the event it makes. A refused move raises the
spec's error: 409 TASK_TERMINAL for a finished task, 409 PRECONDITION_FAILED for a move the
status does not allow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loom_core.errors import Conflict, ErrorCode, Forbidden

from . import model
from .model import Actor, TaskRow


@dataclass(slots=True)
class Change:
    row: TaskRow
    event: str
    data: dict[str, Any] = field(default_factory=dict)
    # Who made the move (empty for the sweep).
    actor: str = ""
    actor_agent: str = ""
    # This move's own reason (the event's `reason`), never one an earlier move left on the row.
    reason: str = ""


def terminal(row: TaskRow) -> Conflict:
    return Conflict(
        ErrorCode.TASK_TERMINAL, f"the task is {row.status}: finished tasks do not change", {"task_id": row.task_id, "status": row.status}
    )


def _expect(row: TaskRow, allowed: frozenset[str] | set[str], move: str) -> None:
    if row.status in allowed:
        return
    if row.terminal:
        raise terminal(row)
    raise Conflict(
        ErrorCode.PRECONDITION_FAILED,
        f"{move} needs a task in {' or '.join(sorted(allowed))}; this one is {row.status}",
        {"task_id": row.task_id, "status": row.status, "reason": "status"},
        retry=False,  # the same call finds the task in the same state
    )


def _moved(row: TaskRow, now: float, **changes: Any) -> TaskRow:
    return row.copy(updated_at=now, **changes)


def _released(**extra: Any) -> dict[str, Any]:
    """Fields that end a claim (the claimant stays recorded in claimed_by / claimed_agent)."""
    return {"fence": 0, "lease_expires_at": None, **extra}


def _by(actor: Actor | None) -> dict[str, str]:
    return {"actor": actor.subject, "actor_agent": actor.agent} if actor else {}


# --- created ---------------------------------------------------------------------------------


def created(row: TaskRow, actor: Actor) -> Change:
    return Change(row, "created", {}, **_by(actor))


# --- triage ------------------------------------------------------------------------------------


def accept(row: TaskRow, actor: Actor, reason: str, now: float) -> Change:
    _expect(row, {model.TRIAGE}, "task.accept")
    if actor.subject == row.poster:
        raise Forbidden(ErrorCode.TASK_SELF_ACCEPT, "a poster may not accept its own task", {"task_id": row.task_id})
    return Change(_moved(row, now, status=model.TODO, reason=reason), "accepted", {}, **_by(actor), reason=reason)


def wont_do(row: TaskRow, actor: Actor, reason: str, now: float) -> Change:
    _expect(row, model.UNFINISHED, "task.wont_do")
    return Change(_moved(row, now, status=model.WONT_DO, reason=reason, **_released()), "wont_do", {}, **_by(actor), reason=reason)


def cancel(row: TaskRow, actor: Actor, reason: str, now: float) -> Change:
    """The owner, or the poster while nobody holds the task."""
    if row.terminal:
        raise terminal(row)
    if not actor.owner:
        if actor.subject != row.poster:
            raise Forbidden(
                ErrorCode.AUTH_INSUFFICIENT, "only the inbox's owner or the task's poster may cancel it", {"task_id": row.task_id}
            )
        if row.status == model.IN_PROGRESS:
            # Not retryable: the same call succeeds only once the holder lets the task go.
            raise Conflict(
                ErrorCode.PRECONDITION_FAILED,
                f"the task is held by {row.claimed_by} (agent {row.claimed_agent or '-'}): only the inbox's owner may cancel it now",
                {
                    "task_id": row.task_id,
                    "status": row.status,
                    "reason": "claimed",
                    "claimed_by": row.claimed_by,
                    "claimed_agent": row.claimed_agent,
                },
                retry=False,
            )
    return Change(_moved(row, now, status=model.CANCELLED, reason=reason, **_released()), "cancelled", {}, **_by(actor), reason=reason)


# --- claims ------------------------------------------------------------------------------------


def claim(row: TaskRow, actor: Actor, fence: int, lease_seconds: int, now: float) -> Change:
    _expect(row, {model.TODO}, "a claim")
    nxt = _moved(
        row,
        now,
        status=model.IN_PROGRESS,
        reason="",  # a claim gives none; the row's reason is always its last move's
        claimed_by=actor.subject,
        claimed_agent=actor.agent,
        fence=fence,
        lease_seconds=lease_seconds,
        lease_expires_at=now + lease_seconds,
        resume_at=None,
    )
    # The fence stays out of the event: it is the claimant's alone.
    return Change(nxt, "claimed", {"lease_seconds": lease_seconds}, **_by(actor))


def complete(row: TaskRow, actor: Actor, outcome: dict[str, Any], now: float, reason: str = "") -> Change:
    _expect(row, {model.IN_PROGRESS}, "task.complete")
    nxt = _moved(row, now, status=model.DONE, outcome=outcome, reason=reason, **_released())
    return Change(nxt, "done", {"outcome": outcome}, **_by(actor), reason=reason)


def fail(row: TaskRow, actor: Actor, reason: str, now: float) -> Change:
    _expect(row, {model.IN_PROGRESS}, "task.fail")
    return Change(_moved(row, now, status=model.FAILED, reason=reason, **_released()), "failed", {}, **_by(actor), reason=reason)


def defer(row: TaskRow, actor: Actor, resume_at: float, reason: str, max_defers: int, now: float) -> Change:
    """Defers count; the max_defers-th one blocks the task on a person instead."""
    _expect(row, {model.IN_PROGRESS}, "task.defer")
    defers = row.defers + 1
    if defers >= max_defers:
        why = (
            f"deferred {defers} times (max_defers {max_defers}): {reason}"
            if reason
            else f"deferred {defers} times (max_defers {max_defers})"
        )
        nxt = _moved(row, now, status=model.BLOCKED, blocked_on="human", reason=why, defers=defers, resume_at=None, **_released())
        return Change(nxt, "blocked", {"blocked_on": "human", "max_defers": max_defers}, **_by(actor), reason=why)
    nxt = _moved(row, now, status=model.DEFERRED, resume_at=resume_at, reason=reason, defers=defers, **_released())
    return Change(nxt, "deferred", {"resume_at": resume_at}, **_by(actor), reason=reason)


def block(row: TaskRow, actor: Actor, blocked_on: str, reason: str, now: float) -> Change:
    _expect(row, {model.IN_PROGRESS}, "task.block")
    nxt = _moved(row, now, status=model.BLOCKED, blocked_on=blocked_on, reason=reason, **_released())
    return Change(nxt, "blocked", {"blocked_on": blocked_on}, **_by(actor), reason=reason)


def expire(row: TaskRow, max_attempts: int, now: float) -> Change:
    """The lease sweep: an expired lease returns the task to todo; the max_attempts-th expiry
    blocks it on a person."""
    _expect(row, {model.IN_PROGRESS}, "a lease expiry")
    attempts = row.attempts + 1
    if attempts >= max_attempts:
        why = f"lease expired {attempts} times (max_attempts {max_attempts})"
        nxt = _moved(row, now, status=model.BLOCKED, blocked_on="human", reason=why, attempts=attempts, **_released())
        return Change(nxt, "blocked", {"blocked_on": "human", "max_attempts": max_attempts}, reason=why)
    why = f"lease expired (attempt {attempts} of {max_attempts})"
    nxt = _moved(row, now, status=model.TODO, reason=why, attempts=attempts, **_released())
    return Change(nxt, "released", {"attempts": attempts}, reason=why)


# --- repair ------------------------------------------------------------------------------------


def unblock(row: TaskRow, actor: Actor, reason: str, now: float) -> Change:
    _expect(row, {model.BLOCKED}, "task.unblock")
    # A person looked at it: the expiry and defer counts start again.
    nxt = _moved(row, now, status=model.TODO, blocked_on="", reason=reason, attempts=0, defers=0)
    return Change(nxt, "unblocked", {}, **_by(actor), reason=reason)


def resume(row: TaskRow, actor: Actor | None, reason: str, now: float) -> Change:
    _expect(row, {model.DEFERRED}, "task.resume")
    nxt = _moved(row, now, status=model.TODO, resume_at=None, reason=reason)
    return Change(nxt, "resumed", {}, **_by(actor), reason=reason)


def reopen(row: TaskRow, actor: Actor, reason: str, now: float) -> Change:
    if row.status == model.DONE:
        raise terminal(row)  # done is final: only failed, wont_do and cancelled reopen
    if row.status not in model.REOPENABLE:
        raise Conflict(
            ErrorCode.PRECONDITION_FAILED,
            f"task.reopen needs a failed, wont_do or cancelled task; this one is {row.status}",
            {"task_id": row.task_id, "status": row.status, "reason": "status"},
            retry=False,
        )
    nxt = _moved(row, now, status=model.TODO, reason=reason, attempts=0, defers=0, blocked_on="", outcome={}, **_released())
    return Change(nxt, "reopened", {}, **_by(actor), reason=reason)


def escalate(row: TaskRow, now: float) -> Change | None:
    """An unanswered triage item is escalated once; it stays in triage (nothing auto-accepts)."""
    if row.status != model.TRIAGE or row.escalated_at is not None:
        return None
    return Change(_moved(row, now, escalated_at=now), "escalated", {"age_seconds": round(now - row.created_at, 3)})


def update(row: TaskRow, actor: Actor, if_match_version: int, changes: dict[str, Any], now: float) -> Change:
    if row.terminal:
        raise terminal(row)
    if if_match_version != row.version:
        raise Conflict(
            ErrorCode.PRECONDITION_FAILED,
            f"the task is at version {row.version}, not {if_match_version}",
            {"task_id": row.task_id, "version": row.version, "if_match_version": if_match_version, "reason": "version"},
            retry=False,  # the same call names the same stale version: read the task again
        )
    return Change(_moved(row, now, **changes), "updated", {"fields": sorted(changes)}, **_by(actor))


def reassign(row: TaskRow, actor: Actor, inbox: model.InboxRow, status: str, reason: str, now: float) -> Change:
    if row.terminal:
        raise terminal(row)
    nxt = _moved(
        row,
        now,
        inbox=inbox.name,
        namespace=inbox.namespace,
        owner_agent=inbox.owner_agent,
        status=status,
        reason=reason,
        blocked_on="",
        resume_at=None,
        attempts=0,
        defers=0,
        escalated_at=None,
        escalate_at=now + inbox.triage_escalate_after_seconds if status == model.TRIAGE else None,
        **_released(),
    )
    return Change(nxt, "reassigned", {"from_inbox": row.inbox, "from_namespace": row.namespace}, **_by(actor), reason=reason)
