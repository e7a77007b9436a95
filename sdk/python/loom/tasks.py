"""``agent.tasks``: the task inbox (spec 003, "Task inbox").

Register an inbox and set trust (an admin of the owner namespace)::

    await a.tasks.register_inbox("private-bot", owner_agent="private-bot", posters=["sa:public-bot"])
    await a.tasks.set_policy("private-bot", poster="sa:public-bot", kind="security_finding", mode="review")

Post a task, and follow its outcome with a cursor (a sender)::

    out = await a.tasks.create("private-bot", kind="security_finding", title="…", brief={…}, idempotency_key="f-77")
    upd = await a.tasks.updates(since_seq=cursor, wait_seconds=30)

Pull, work, finish (the owner)::

    async for task in a.tasks.stream("private-bot", kinds=["security_finding"]):
        await a.tasks.complete(task["task_id"], fence=task["fence"], outcome={...})

Every method calls one op through ``Agent.call`` and returns its JSON answer; ``None`` arguments
are left out so the op's default applies. Times may be given as ``datetime`` objects (a naive
one is taken as UTC) or RFC 3339 strings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, overload

from ._ops import (
    AcceptTaskResponse,
    BlockTaskResponse,
    CancelTaskResponse,
    ClaimTaskResponse,
    CompleteTaskResponse,
    CompleteTasksResponse,
    CountTasksResponse,
    CreateTaskResponse,
    CreateTasksResponse,
    DeferTaskResponse,
    FailTaskResponse,
    GetTaskHistoryResponse,
    GetTaskResponse,
    HeartbeatTaskResponse,
    ListInboxDeliveriesResponse,
    ListInboxesResponse,
    ListInboxPoliciesResponse,
    ListInboxPrincipalsResponse,
    ListTasksResponse,
    ListTaskUpdatesResponse,
    Ops,
    PullTasksResponse,
    ReassignTaskResponse,
    RegisterInboxResponse,
    ReopenTaskResponse,
    ReportTaskProgressResponse,
    ResumeTaskResponse,
    SetInboxPolicyResponse,
    Task,
    TaskEvent,
    UnblockTaskResponse,
    UpdateTaskResponse,
    WatchTaskResponse,
    WontDoTaskResponse,
)

if TYPE_CHECKING:
    from ._client import OpCaller

__all__ = ["TasksClient"]

Time = datetime | str | None


@overload
def _time(value: datetime | str) -> str: ...
@overload
def _time(value: None) -> None: ...
def _time(value: Time) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _list(values: Sequence[str] | None) -> list[str] | None:
    return None if values is None else list(values)


class TasksClient:
    """Helpers for the task inbox ops (``inbox.*``, ``task.*``), reached as ``agent.tasks``."""

    def __init__(self, agent: OpCaller) -> None:
        self._ops = Ops(agent)

    # --- inbox setup (admin) and reading ------------------------------------------------------

    async def register_inbox(
        self,
        inbox: str,
        *,
        owner_agent: str | None = None,
        posters: Sequence[str] | None = None,
        accept_disclosure: Sequence[str] | None = None,
        default_lease_seconds: int | None = None,
        max_attempts: int | None = None,
        max_defers: int | None = None,
        triage_escalate_after_seconds: int | None = None,
        webhook_url: str | None = None,
        webhook_secret_ref: str | None = None,
        description: str | None = None,
        namespace: str | None = None,
    ) -> RegisterInboxResponse:
        """Register (or re-register) an inbox in the namespace (``inbox.register``, admin).

        Args:
            inbox: The inbox's name, unique in the org.
            owner_agent: The agent label that works it (default: the inbox's name).
            posters: Subjects (``sa:<name>``, ``user:<id>``) that may post without holding the namespace.
            accept_disclosure: Disclosure levels the inbox takes (default: all three).
            default_lease_seconds: A claim's lease unless the pull asks for another (default 1800).
            max_attempts: Expired leases before the task is blocked on a person (default 3).
            max_defers: Defers before the task is blocked on a person (default 5).
            triage_escalate_after_seconds: Age at which an unanswered triage item is escalated, once (default 14400).
            webhook_url: Receives a signed wake-up notice when the inbox has new events.
            webhook_secret_ref: The org's ``LOOM_WEBHOOK_SECRET_<ORG>__<NAME>`` variable holding the signing secret.
            description: Free text.
            namespace: The owner namespace (default: the agent's).
        """
        return await self._ops.inbox.register(
            inbox=inbox,
            owner_agent=owner_agent,
            posters=_list(posters),
            accept_disclosure=_list(accept_disclosure),
            default_lease_seconds=default_lease_seconds,
            max_attempts=max_attempts,
            max_defers=max_defers,
            triage_escalate_after_seconds=triage_escalate_after_seconds,
            webhook_url=webhook_url,
            webhook_secret_ref=webhook_secret_ref,
            description=description,
            namespace=namespace,
        )

    async def set_policy(
        self,
        inbox: str,
        *,
        poster: str,
        kind: str = "*",
        mode: str | None = None,
        require_evidence: Sequence[str] | None = None,
        remove: bool | None = None,
        namespace: str | None = None,
    ) -> SetInboxPolicyResponse:
        """Set how far the inbox trusts ``poster`` for ``kind`` (``inbox.policy_set``, admin).

        Args:
            inbox: The inbox.
            poster: A subject (``sa:<name>``, ``user:<id>``), an agent label, or ``*``.
            kind: A task kind or ``*`` (any).
            mode: ``deny``, ``review`` or ``auto``.
            require_evidence: Dotted brief paths a create must carry (a 422 names the missing ones).
            remove: Remove the row instead.
            namespace: The namespace to call in (default: the agent's).
        """
        return await self._ops.inbox.policy_set(
            inbox=inbox,
            poster=poster,
            kind=kind,
            mode=mode,
            require_evidence=_list(require_evidence),
            remove=remove,
            namespace=namespace,
        )

    async def principals(self, *, namespace: str | None = None) -> ListInboxPrincipalsResponse:
        """The identities Loom knows in the org, to pick posters from (``inbox.principals``, admin)."""
        return await self._ops.inbox.principals(namespace=namespace)

    async def inboxes(self, *, namespace: str | None = None) -> ListInboxesResponse:
        """The namespace's inboxes with their open task counts (``inbox.list``)."""
        return await self._ops.inbox.list(namespace=namespace)

    async def policies(self, inbox: str, *, namespace: str | None = None) -> ListInboxPoliciesResponse:
        """The inbox's trust rows (``inbox.policy_list``)."""
        return await self._ops.inbox.policy_list(inbox=inbox, namespace=namespace)

    async def deliveries(self, inbox: str, *, limit: int | None = None, namespace: str | None = None) -> ListInboxDeliveriesResponse:
        """The inbox's webhook delivery log, newest first (``inbox.deliveries``, admin)."""
        return await self._ops.inbox.deliveries(inbox=inbox, limit=limit, namespace=namespace)

    # --- posting ------------------------------------------------------------------------------

    async def create(
        self,
        inbox: str,
        *,
        kind: str,
        title: str | None = None,
        brief: dict[str, Any] | None = None,
        disclosure: str | None = None,
        priority: int | None = None,
        deadline: Time = None,
        not_before: Time = None,
        origin: str | None = None,
        parent_task_id: str | None = None,
        idempotency_key: str | None = None,
        namespace: str | None = None,
    ) -> CreateTaskResponse:
        """Post a task to ``inbox`` (``task.create``); answers ``{"task": …, "created": bool}``.

        The task lands in ``triage`` or ``todo`` by the owner's trust for this poster and kind.

        Args:
            inbox: The target inbox (named in the org; the agent's namespace is the poster's own).
            kind: The task's kind.
            title: One line.
            brief: What the owner needs (free-form JSON).
            disclosure: ``confidential``, ``internal`` (default) or ``public_ok``.
            priority: 1 (most urgent) to 5; default 3.
            deadline: When it is due (pulls take nearer deadlines first).
            not_before: Hidden from pull until then.
            origin: Where the task came from (free text).
            parent_task_id: A task this one belongs to.
            idempotency_key: A retried create with this key lands once.
            namespace: The poster's namespace (default: the agent's).
        """
        return await self._ops.task.create(
            inbox=inbox,
            kind=kind,
            title=title,
            brief=brief,
            disclosure=disclosure,
            priority=priority,
            deadline=_time(deadline),
            not_before=_time(not_before),
            origin=origin,
            parent_task_id=parent_task_id,
            idempotency_key=idempotency_key,
            namespace=namespace,
        )

    async def updates(
        self, *, since_seq: int = 0, wait_seconds: int | None = None, limit: int | None = None, namespace: str | None = None
    ) -> ListTaskUpdatesResponse:
        """Events of the tasks this agent's subject posted, after ``since_seq`` (``task.updates``).

        Answers ``{"events": [...], "next_seq": n}``. Save ``next_seq`` only after handling the
        events: a replay from an older cursor returns the same events again.

        Args:
            since_seq: The cursor (0: from the start).
            wait_seconds: Long poll: wait up to this many seconds (at most 30) for an event.
            limit: Most events in one answer (default 100).
            namespace: The namespace to call in (default: the agent's).
        """
        return await self._ops.task.updates(since_seq=since_seq, wait_seconds=wait_seconds, limit=limit, namespace=namespace)

    async def watch(
        self,
        *,
        task_id: str | None = None,
        inbox: str | None = None,
        since_seq: int = 0,
        wait_seconds: int | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> WatchTaskResponse:
        """One task's or one inbox's events after ``since_seq`` (``task.watch``); name exactly one
        of ``task_id`` and ``inbox``. Answers ``{"events": [...], "next_seq": n}`` as ``updates``.

        A task's events: its poster, or a reader of its inbox. An inbox's: a reader sees every
        task's; a listed poster who may not read it, its own tasks'.
        """
        return await self._ops.task.watch(
            task_id=task_id,
            inbox=inbox,
            since_seq=since_seq,
            wait_seconds=wait_seconds,
            limit=limit,
            namespace=namespace,
        )

    async def follow(
        self,
        *,
        task_id: str | None = None,
        inbox: str | None = None,
        since_seq: int = 0,
        wait_seconds: int = 30,
        namespace: str | None = None,
    ) -> AsyncIterator[TaskEvent]:
        """One task's or one inbox's events from ``since_seq`` on, for as long as the loop runs.

        Long-polls ``task.watch`` and yields each event; each carries its ``seq``, the cursor to
        resume from (``since_seq=event["seq"]``). Break out of the loop (or cancel it) to stop.
        """
        cursor = since_seq
        while True:
            out = await self.watch(task_id=task_id, inbox=inbox, since_seq=cursor, wait_seconds=wait_seconds, namespace=namespace)
            for event in out.get("events", []):
                yield event
            cursor = int(out.get("next_seq") or cursor)

    async def cancel(self, task_id: str, *, reason: str, namespace: str | None = None) -> CancelTaskResponse:
        """Cancel an unfinished task: the owner, or its poster while nobody holds it (``task.cancel``)."""
        return await self._ops.task.cancel(task_id=task_id, reason=reason, namespace=namespace)

    # --- working (owner) ----------------------------------------------------------------------

    async def create_many(self, tasks: Sequence[dict[str, Any]], *, namespace: str | None = None) -> CreateTasksResponse:
        """Post up to 100 tasks in one call (``task.create_many``); answers ``{"results": [...]}``,
        one per item in order: ``{"task": …, "created": bool}`` or ``{"error": {"code", "message",
        "http_status"}}``. Each item takes ``task.create``'s arguments (``inbox``, ``kind``,
        ``title``, ``brief``, …, its own ``idempotency_key``); times may be datetimes."""
        items = [{k: (_time(v) if k in ("deadline", "not_before") else v) for k, v in t.items() if v is not None} for t in tasks]
        return await self._ops.task.create_many(tasks=items, namespace=namespace)

    async def pull(
        self,
        inbox: str,
        *,
        kinds: Sequence[str] | None = None,
        status: str | None = None,
        wait_seconds: int | None = None,
        lease_seconds: int | None = None,
        max_tasks: int | None = None,
        namespace: str | None = None,
    ) -> PullTasksResponse:
        """Claim the next todo tasks of ``inbox`` (``task.pull``); answers ``{"tasks": [...]}``.

        Each task carries its ``fence``, which every owner write presents.

        Args:
            inbox: The inbox.
            kinds: Only these kinds.
            status: ``todo`` (default: claim) or ``triage`` (list review items, unclaimed).
            wait_seconds: Long poll: wait up to this many seconds (at most 30) for a task.
            lease_seconds: The claim's lease (default: the inbox's).
            max_tasks: Tasks to claim at once (default 1).
            namespace: The namespace to call in (default: the agent's).
        """
        return await self._ops.task.pull(
            inbox=inbox,
            kinds=_list(kinds),
            status=status,
            wait_seconds=wait_seconds,
            lease_seconds=lease_seconds,
            max_tasks=max_tasks,
            namespace=namespace,
        )

    async def stream(
        self,
        inbox: str,
        *,
        kinds: Sequence[str] | None = None,
        wait_seconds: int = 30,
        lease_seconds: int | None = None,
        batch: int = 1,
        namespace: str | None = None,
    ) -> AsyncIterator[Task]:
        """Claimed tasks of ``inbox``, one at a time, for as long as the loop runs.

        Long-polls ``task.pull`` (``wait_seconds`` each) and yields every task it claims; a
        create wakes a waiting pull at once. Break out of the loop (or cancel it) to stop.

        Args:
            inbox: The inbox.
            kinds: Only these kinds.
            wait_seconds: Each pull's long poll (at most 30).
            lease_seconds: Each claim's lease (default: the inbox's).
            batch: Tasks to claim per pull.
            namespace: The namespace to call in (default: the agent's).
        """
        while True:
            out = await self.pull(
                inbox, kinds=kinds, wait_seconds=wait_seconds, lease_seconds=lease_seconds, max_tasks=batch, namespace=namespace
            )
            for task in out.get("tasks", []):
                yield task

    async def claim(self, task_id: str, *, lease_seconds: int | None = None, namespace: str | None = None) -> ClaimTaskResponse:
        """Claim one named todo task (``task.claim``); answers ``{"task": …}`` with its fence."""
        return await self._ops.task.claim(task_id=task_id, lease_seconds=lease_seconds, namespace=namespace)

    async def heartbeat(
        self, task_id: str, *, fence: int, lease_seconds: int | None = None, namespace: str | None = None
    ) -> HeartbeatTaskResponse:
        """Extend the lease of a task you hold (``task.heartbeat``)."""
        return await self._ops.task.heartbeat(task_id=task_id, fence=fence, lease_seconds=lease_seconds, namespace=namespace)

    async def progress(
        self, task_id: str, *, fence: int, note: str, percent: int | None = None, namespace: str | None = None
    ) -> ReportTaskProgressResponse:
        """Record a progress note on a task you hold; no state change (``task.progress``)."""
        return await self._ops.task.progress(task_id=task_id, fence=fence, note=note, percent=percent, namespace=namespace)

    async def complete(
        self,
        task_id: str,
        *,
        fence: int,
        outcome: dict[str, Any] | None = None,
        reason: str | None = None,
        namespace: str | None = None,
    ) -> CompleteTaskResponse:
        """Finish a task you hold with its outcome, and optionally why: in_progress -> done (``task.complete``)."""
        return await self._ops.task.complete(task_id=task_id, fence=fence, outcome=outcome, reason=reason, namespace=namespace)

    async def complete_many(self, items: Sequence[dict[str, Any]], *, namespace: str | None = None) -> CompleteTasksResponse:
        """Finish up to 100 tasks you hold in one call (``task.complete_many``): each item is
        ``{"task_id", "fence", "outcome", "reason"}``; answers ``{"results": [...]}``, one per item in order:
        ``{"task": …}`` or ``{"error": {"code", "message", "http_status"}}``."""
        return await self._ops.task.complete_many(tasks=[dict(i) for i in items], namespace=namespace)

    async def fail(self, task_id: str, *, fence: int, reason: str, namespace: str | None = None) -> FailTaskResponse:
        """Give up on a task you hold, with a reason: in_progress -> failed (``task.fail``)."""
        return await self._ops.task.fail(task_id=task_id, fence=fence, reason=reason, namespace=namespace)

    async def defer(
        self, task_id: str, *, fence: int, resume_at: datetime | str, reason: str, namespace: str | None = None
    ) -> DeferTaskResponse:
        """Put a task you hold aside until ``resume_at``, with a reason (``task.defer``)."""
        return await self._ops.task.defer(task_id=task_id, fence=fence, resume_at=_time(resume_at), reason=reason, namespace=namespace)

    async def block(self, task_id: str, *, fence: int, blocked_on: str, reason: str, namespace: str | None = None) -> BlockTaskResponse:
        """Mark a task you hold blocked on ``sender``, ``human`` or ``external`` (``task.block``)."""
        return await self._ops.task.block(task_id=task_id, fence=fence, blocked_on=blocked_on, reason=reason, namespace=namespace)

    # --- triage and repair (owner) ------------------------------------------------------------

    async def accept(self, task_id: str, *, reason: str | None = None, namespace: str | None = None) -> AcceptTaskResponse:
        """Accept a triaged task: triage -> todo (``task.accept``; never the poster's own)."""
        return await self._ops.task.accept(task_id=task_id, reason=reason, namespace=namespace)

    async def wont_do(self, task_id: str, *, reason: str, namespace: str | None = None) -> WontDoTaskResponse:
        """Decline an unfinished task, with a reason (``task.wont_do``)."""
        return await self._ops.task.wont_do(task_id=task_id, reason=reason, namespace=namespace)

    async def unblock(self, task_id: str, *, reason: str | None = None, namespace: str | None = None) -> UnblockTaskResponse:
        """Return a blocked task to todo (``task.unblock``)."""
        return await self._ops.task.unblock(task_id=task_id, reason=reason, namespace=namespace)

    async def resume(self, task_id: str, *, reason: str | None = None, namespace: str | None = None) -> ResumeTaskResponse:
        """Return a deferred task to todo before its resume_at (``task.resume``)."""
        return await self._ops.task.resume(task_id=task_id, reason=reason, namespace=namespace)

    async def reopen(self, task_id: str, *, reason: str | None = None, namespace: str | None = None) -> ReopenTaskResponse:
        """Move a failed, wont_do or cancelled task back to todo (``task.reopen``)."""
        return await self._ops.task.reopen(task_id=task_id, reason=reason, namespace=namespace)

    async def update(
        self,
        task_id: str,
        *,
        if_match_version: int,
        title: str | None = None,
        brief: dict[str, Any] | None = None,
        priority: int | None = None,
        deadline: Time = None,
        not_before: Time = None,
        namespace: str | None = None,
    ) -> UpdateTaskResponse:
        """Edit an unfinished task if it is still at ``if_match_version`` (``task.update``)."""
        return await self._ops.task.update(
            task_id=task_id,
            if_match_version=if_match_version,
            title=title,
            brief=brief,
            priority=priority,
            deadline=_time(deadline),
            not_before=_time(not_before),
            namespace=namespace,
        )

    async def reassign(self, task_id: str, *, to_inbox: str, reason: str, namespace: str | None = None) -> ReassignTaskResponse:
        """Hand an unfinished task to another inbox of the org (``task.reassign``)."""
        return await self._ops.task.reassign(task_id=task_id, to_inbox=to_inbox, reason=reason, namespace=namespace)

    # --- reading ------------------------------------------------------------------------------

    async def get(self, task_id: str, *, namespace: str | None = None) -> GetTaskResponse:
        """One task (``task.get``)."""
        return await self._ops.task.get(task_id=task_id, namespace=namespace)

    async def list(
        self,
        inbox: str | None = None,
        *,
        status: Sequence[str] | None = None,
        kind: Sequence[str] | None = None,
        poster: str | None = None,
        mine: bool | None = None,
        limit: int | None = None,
        page_token: str | None = None,
        namespace: str | None = None,
    ) -> ListTasksResponse:
        """Tasks, newest first, filtered and paged (``task.list``); ``next_page_token`` pages on."""
        return await self._ops.task.list(
            inbox=inbox,
            status=_list(status),
            kind=_list(kind),
            poster=poster,
            mine=mine,
            limit=limit,
            page_token=page_token,
            namespace=namespace,
        )

    async def counts(self, inbox: str | None = None, *, namespace: str | None = None) -> CountTasksResponse:
        """Task counts by status for an inbox or the namespace's inboxes (``task.counts``)."""
        return await self._ops.task.counts(inbox=inbox, namespace=namespace)

    async def history(self, task_id: str, *, limit: int | None = None, namespace: str | None = None) -> GetTaskHistoryResponse:
        """A task's events, oldest first (``task.history``)."""
        return await self._ops.task.history(task_id=task_id, limit=limit, namespace=namespace)
