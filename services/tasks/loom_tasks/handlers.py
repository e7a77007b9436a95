"""gRPC in, proto out: one thin handler per RPC of tasks.proto, named after the RPC in snake_case
(`CreateTask` -> `create_task`) and bound to its op by `loom_core.plane.bind_handlers` (rules in
domain/, orchestration in service/)."""

from __future__ import annotations

from collections.abc import Mapping

from loom_api.tasks.v1 import tasks_pb2 as pb
from loom_core.catalog import dataclass_from, dict_to_struct, message_from, struct_to_dict
from loom_core.chain import CallContext
from loom_core.chain.ledger import ledger_args
from loom_core.errors import LoomError

from .domain.events import TEXT_FIELDS, TaskEvent
from .domain.model import InboxRow, PolicyRow, TaskRow
from .domain.validate import format_time
from .service.deps import Deps
from .service.inboxes import InboxOps
from .service.posting import NewTask, PostingOps
from .service.reading import ReadingOps
from .service.repair import RepairOps
from .service.watching import WatchingOps
from .service.working import WorkingOps


def task_pb(row: TaskRow, *, fence: bool = False, lease_expires_at: float | None = None) -> pb.Task:
    """The fence only for the claimer; the lease's expiry as just renewed where given."""
    return message_from(
        pb.Task,
        row,
        deadline=format_time(row.deadline),
        not_before=format_time(row.not_before),
        resume_at=format_time(row.resume_at),
        fence=row.fence if fence else 0,
        lease_expires_time=format_time(lease_expires_at if lease_expires_at is not None else row.lease_expires_at),
        created_time=format_time(row.created_at),
        updated_time=format_time(row.updated_at),
        escalated_time=format_time(row.escalated_at),
    )


def event_pb(e: TaskEvent) -> pb.TaskEvent:
    """`e` as read off the stream, taken defensively (a field it lacks is empty)."""
    at = e.get("at")
    fields: Mapping[str, object] = e
    return pb.TaskEvent(
        seq=int(e.get("seq") or 0),
        at=format_time(at) if isinstance(at, (int, float)) else str(at or ""),
        version=int(e.get("version") or 0),
        data=dict_to_struct(e.get("data") or {}),
        **{name: str(fields.get(name, "")) for name in TEXT_FIELDS},
    )


def inbox_pb(row: InboxRow, *, admin: bool, counts: dict[str, int] | None = None) -> pb.Inbox:
    """The webhook's address and secret only for an admin."""
    return message_from(
        pb.Inbox,
        row,
        inbox=row.name,
        webhook_url=row.webhook_url if admin else "",
        webhook_secret_ref=row.webhook_secret_ref if admin else "",
        created_time=format_time(row.created_at),
        updated_time=format_time(row.updated_at),
        counts=counts or {},
    )


def policy_pb(row: PolicyRow) -> pb.InboxPolicy:
    return message_from(pb.InboxPolicy, row, updated_time=format_time(row.updated_at))


def _new_task(req: pb.CreateTaskRequest) -> NewTask:
    return dataclass_from(NewTask, req)


def _item_error(err: LoomError | None) -> pb.ItemError:
    if err is None:
        return pb.ItemError()
    return pb.ItemError(code=str(err.code), message=err.message, http_status=err.http_status)


class Handlers:
    def __init__(self, deps: Deps) -> None:
        self.inboxes = InboxOps(deps)
        self.posting = PostingOps(deps)
        self.working = WorkingOps(deps)
        self.repair = RepairOps(deps)
        self.reading = ReadingOps(deps)
        self.watching = WatchingOps(deps)

    # --- inbox setup

    async def register_inbox(self, req: pb.RegisterInboxRequest, ctx: CallContext) -> pb.RegisterInboxResponse:
        row, created = await self.inboxes.register(ctx, req)
        return pb.RegisterInboxResponse(inbox=inbox_pb(row, admin=True), created=created)

    async def set_inbox_policy(self, req: pb.SetInboxPolicyRequest, ctx: CallContext) -> pb.SetInboxPolicyResponse:
        row, removed = await self.inboxes.set_policy(ctx, req.inbox, req.poster, req.kind, req.mode, list(req.require_evidence), req.remove)
        return pb.SetInboxPolicyResponse(policy=policy_pb(row), removed=removed)

    async def list_inbox_principals(self, req: pb.ListInboxPrincipalsRequest, ctx: CallContext) -> pb.ListInboxPrincipalsResponse:
        rows = await self.inboxes.principals(ctx)
        return pb.ListInboxPrincipalsResponse(principals=[pb.InboxPrincipal(subject=s, type=t) for s, t in rows])

    async def list_inboxes(self, req: pb.ListInboxesRequest, ctx: CallContext) -> pb.ListInboxesResponse:
        rows, counts, admin = await self.inboxes.list_inboxes(ctx)
        return pb.ListInboxesResponse(inboxes=[inbox_pb(r, admin=admin, counts=counts.get(r.name)) for r in rows])

    async def list_inbox_policies(self, req: pb.ListInboxPoliciesRequest, ctx: CallContext) -> pb.ListInboxPoliciesResponse:
        rows = await self.inboxes.policies(ctx, req.inbox)
        return pb.ListInboxPoliciesResponse(policies=[policy_pb(r) for r in rows])

    async def list_inbox_deliveries(self, req: pb.ListInboxDeliveriesRequest, ctx: CallContext) -> pb.ListInboxDeliveriesResponse:
        attempts = await self.inboxes.deliveries(ctx, req.inbox, req.limit)
        return pb.ListInboxDeliveriesResponse(deliveries=[message_from(pb.Delivery, a, attempted_time=a.attempted_at) for a in attempts])

    # --- posting

    async def create_task(self, req: pb.CreateTaskRequest, ctx: CallContext) -> pb.CreateTaskResponse:
        row, created = await self.posting.create(ctx, _new_task(req))
        return pb.CreateTaskResponse(task=task_pb(row), created=created)

    async def create_tasks(self, req: pb.CreateTasksRequest, ctx: CallContext) -> pb.CreateTasksResponse:
        items = [_new_task(r) for r in req.tasks]
        results = await self.posting.create_many(ctx, items)
        ctx.item_rows = [("task.create", ledger_args(r), e.code if e else "") for r, (_, _, e) in zip(req.tasks, results, strict=True)]
        return pb.CreateTasksResponse(
            results=[
                pb.CreateTaskResult(task=task_pb(row), created=created) if row is not None else pb.CreateTaskResult(error=_item_error(err))
                for row, created, err in results
            ]
        )

    async def list_task_updates(self, req: pb.ListTaskUpdatesRequest, ctx: CallContext) -> pb.ListTaskUpdatesResponse:
        events, next_seq = await self.watching.updates(ctx, req.since_seq, req.wait_seconds, req.limit)
        return pb.ListTaskUpdatesResponse(events=[event_pb(e) for e in events], next_seq=next_seq)

    async def watch_task(self, req: pb.WatchTaskRequest, ctx: CallContext) -> pb.WatchTaskResponse:
        events, next_seq = await self.watching.watch(ctx, req.task_id, req.inbox, req.since_seq, req.wait_seconds, req.limit)
        return pb.WatchTaskResponse(events=[event_pb(e) for e in events], next_seq=next_seq)

    async def cancel_task(self, req: pb.CancelTaskRequest, ctx: CallContext) -> pb.CancelTaskResponse:
        return pb.CancelTaskResponse(task=task_pb(await self.posting.cancel(ctx, req.task_id, req.reason)))

    # --- working

    async def pull_tasks(self, req: pb.PullTasksRequest, ctx: CallContext) -> pb.PullTasksResponse:
        rows = await self.working.pull(ctx, req.inbox, list(req.kinds), req.status, req.wait_seconds, req.lease_seconds, req.max_tasks)
        return pb.PullTasksResponse(tasks=[task_pb(r, fence=True) for r in rows])

    async def claim_task(self, req: pb.ClaimTaskRequest, ctx: CallContext) -> pb.ClaimTaskResponse:
        return pb.ClaimTaskResponse(task=task_pb(await self.working.claim(ctx, req.task_id, req.lease_seconds), fence=True))

    async def heartbeat_task(self, req: pb.HeartbeatTaskRequest, ctx: CallContext) -> pb.HeartbeatTaskResponse:
        fence, expires = await self.working.heartbeat(ctx, req.task_id, req.fence, req.lease_seconds)
        return pb.HeartbeatTaskResponse(task_id=req.task_id, fence=fence, lease_expires_time=format_time(expires))

    async def report_task_progress(self, req: pb.ReportTaskProgressRequest, ctx: CallContext) -> pb.ReportTaskProgressResponse:
        eid = await self.working.progress(ctx, req.task_id, req.fence, req.note, req.percent)
        return pb.ReportTaskProgressResponse(task_id=req.task_id, event_id=eid)

    async def complete_task(self, req: pb.CompleteTaskRequest, ctx: CallContext) -> pb.CompleteTaskResponse:
        done = await self.working.complete(ctx, req.task_id, req.fence, struct_to_dict(req.outcome), req.reason)
        return pb.CompleteTaskResponse(task=task_pb(done))

    async def complete_tasks(self, req: pb.CompleteTasksRequest, ctx: CallContext) -> pb.CompleteTasksResponse:
        items = [(r.task_id, r.fence, struct_to_dict(r.outcome), r.reason) for r in req.tasks]
        results = await self.working.complete_many(ctx, items)
        ctx.item_rows = [("task.complete", ledger_args(r), e.code if e else "") for r, (_, e) in zip(req.tasks, results, strict=True)]
        return pb.CompleteTasksResponse(
            results=[
                pb.CompleteTaskResult(task=task_pb(row)) if row is not None else pb.CompleteTaskResult(error=_item_error(err))
                for row, err in results
            ]
        )

    async def fail_task(self, req: pb.FailTaskRequest, ctx: CallContext) -> pb.FailTaskResponse:
        return pb.FailTaskResponse(task=task_pb(await self.working.fail(ctx, req.task_id, req.fence, req.reason)))

    async def defer_task(self, req: pb.DeferTaskRequest, ctx: CallContext) -> pb.DeferTaskResponse:
        return pb.DeferTaskResponse(task=task_pb(await self.working.defer(ctx, req.task_id, req.fence, req.resume_at, req.reason)))

    async def block_task(self, req: pb.BlockTaskRequest, ctx: CallContext) -> pb.BlockTaskResponse:
        return pb.BlockTaskResponse(task=task_pb(await self.working.block(ctx, req.task_id, req.fence, req.blocked_on, req.reason)))

    # --- triage and repair

    async def accept_task(self, req: pb.AcceptTaskRequest, ctx: CallContext) -> pb.AcceptTaskResponse:
        return pb.AcceptTaskResponse(task=task_pb(await self.repair.reasoned_move(ctx, "accept", req.task_id, req.reason)))

    async def wont_do_task(self, req: pb.WontDoTaskRequest, ctx: CallContext) -> pb.WontDoTaskResponse:
        return pb.WontDoTaskResponse(task=task_pb(await self.repair.reasoned_move(ctx, "wont_do", req.task_id, req.reason)))

    async def unblock_task(self, req: pb.UnblockTaskRequest, ctx: CallContext) -> pb.UnblockTaskResponse:
        return pb.UnblockTaskResponse(task=task_pb(await self.repair.reasoned_move(ctx, "unblock", req.task_id, req.reason)))

    async def resume_task(self, req: pb.ResumeTaskRequest, ctx: CallContext) -> pb.ResumeTaskResponse:
        return pb.ResumeTaskResponse(task=task_pb(await self.repair.reasoned_move(ctx, "resume", req.task_id, req.reason)))

    async def reopen_task(self, req: pb.ReopenTaskRequest, ctx: CallContext) -> pb.ReopenTaskResponse:
        return pb.ReopenTaskResponse(task=task_pb(await self.repair.reasoned_move(ctx, "reopen", req.task_id, req.reason)))

    async def update_task(self, req: pb.UpdateTaskRequest, ctx: CallContext) -> pb.UpdateTaskResponse:
        row = await self.repair.update(
            ctx,
            req.task_id,
            req.if_match_version,
            title=req.title if req.HasField("title") else None,
            brief=struct_to_dict(req.brief) if req.HasField("brief") else None,
            priority=req.priority if req.HasField("priority") else None,
            deadline=req.deadline if req.HasField("deadline") else None,
            not_before=req.not_before if req.HasField("not_before") else None,
        )
        return pb.UpdateTaskResponse(task=task_pb(row))

    async def reassign_task(self, req: pb.ReassignTaskRequest, ctx: CallContext) -> pb.ReassignTaskResponse:
        return pb.ReassignTaskResponse(task=task_pb(await self.repair.reassign(ctx, req.task_id, req.to_inbox, req.reason)))

    # --- reading

    async def get_task(self, req: pb.GetTaskRequest, ctx: CallContext) -> pb.GetTaskResponse:
        row = await self.reading.get(ctx, req.task_id)
        return pb.GetTaskResponse(task=task_pb(row, fence=row.held_by(ctx.subject, ctx.agent_label)))

    async def list_tasks(self, req: pb.ListTasksRequest, ctx: CallContext) -> pb.ListTasksResponse:
        rows, token = await self.reading.list_tasks(
            ctx, req.inbox, list(req.status), list(req.kind), req.poster, req.mine, req.limit, req.page_token
        )
        return pb.ListTasksResponse(tasks=[task_pb(r, fence=r.held_by(ctx.subject, ctx.agent_label)) for r in rows], next_page_token=token)

    async def count_tasks(self, req: pb.CountTasksRequest, ctx: CallContext) -> pb.CountTasksResponse:
        counts = await self.reading.counts(ctx, req.inbox)
        return pb.CountTasksResponse(counts=counts, total=sum(counts.values()))

    async def get_task_history(self, req: pb.GetTaskHistoryRequest, ctx: CallContext) -> pb.GetTaskHistoryResponse:
        events = await self.reading.history(ctx, req.task_id, req.limit)
        return pb.GetTaskHistoryResponse(events=[event_pb(e) for e in events])
