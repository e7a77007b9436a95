"""Inbox setup (admin of the owner namespace) and reading (viewer)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from loom_api.tasks.v1 import tasks_pb2 as pb
from loom_core.chain import CallContext
from loom_core.errors import Conflict, ErrorCode, Forbidden, LoomError, count_or_default
from loom_core.roles import Role

from ..domain import model
from ..domain import validate as v
from ..domain.model import InboxRow, PolicyRow
from ..webhooks import Attempt, list_deliveries, validate_webhook_config
from .deps import Deps

REGISTER_LEASE_SECONDS = 15.0


def _check_webhook(org: str, url: str, secret_ref: str) -> None:
    """The webhook rules (spec 003), kept in the webhook module."""
    if not url and not secret_ref:
        return
    validate_webhook_config(org, url, secret_ref)


@dataclass(slots=True)
class InboxOps:
    d: Deps

    async def register(self, ctx: CallContext, req: pb.RegisterInboxRequest) -> tuple[InboxRow, bool]:
        name = req.inbox
        v.inbox_name(name)
        if ctx.role < Role.ADMIN:
            raise Forbidden(ErrorCode.AUTH_INSUFFICIENT, "inbox.register needs the admin role", {"reason": "role", "needed": "admin"})
        owner_agent = v.text(req.owner_agent, "owner_agent", 128) or name
        posters = v.posters(req.posters)
        accept = v.disclosure_levels(req.accept_disclosure)
        lease = v.lease_seconds(req.default_lease_seconds, model.DEFAULT_LEASE_SECONDS, "default_lease_seconds")
        attempts = count_or_default("max_attempts", req.max_attempts, model.DEFAULT_MAX_ATTEMPTS, 1000)
        defers = count_or_default("max_defers", req.max_defers, model.DEFAULT_MAX_DEFERS, 1000)
        escalate = count_or_default(
            "triage_escalate_after_seconds", req.triage_escalate_after_seconds, model.DEFAULT_TRIAGE_ESCALATE_AFTER_SECONDS, 365 * 86400
        )
        _check_webhook(ctx.org, req.webhook_url, req.webhook_secret_ref)
        description = v.text(req.description, "description", 2000)
        # Inbox names are unique in the org: one registration of a name at a time.
        lease_key = f"tasks.inbox.{ctx.org}.{name}"
        lease_obj = await self.d.leases.wait_acquire(lease_key, ctx.request_id, REGISTER_LEASE_SECONDS, timeout=10.0)
        try:
            existing = await self.d.inboxes.get(ctx.org, name)
            if existing is not None and existing.namespace != ctx.namespace:
                raise Conflict(ErrorCode.ALREADY_EXISTS, f"inbox {name!r} is registered in another namespace", {"inbox": name})
            now = time.time()
            row = InboxRow(
                org=ctx.org,
                name=name,
                namespace=ctx.namespace,
                owner_agent=owner_agent,
                posters=posters,
                accept_disclosure=accept,
                default_lease_seconds=lease,
                max_attempts=attempts,
                max_defers=defers,
                triage_escalate_after_seconds=escalate,
                webhook_url=req.webhook_url,
                webhook_secret_ref=req.webhook_secret_ref,
                description=description,
                created_at=existing.created_at if existing else now,
                updated_at=now,
                version=time.time_ns(),
            )
            await self.d.inboxes.put(row)
        finally:
            with contextlib.suppress(LoomError):  # it expires by itself
                await self.d.leases.release(lease_obj)
        await self.d.directory.changed(ctx.org, name)
        return row, existing is None

    async def set_policy(
        self, ctx: CallContext, inbox: str, poster: str, kind: str, mode: str, require_evidence: list[str], remove: bool
    ) -> tuple[PolicyRow, bool]:
        v.inbox_name(inbox)
        row = await self.d.access.inbox(ctx, inbox, Role.ADMIN)
        poster = v.poster_key(poster)
        kind = v.kind(kind or "*", allow_any=True)
        paths = v.evidence_paths(require_evidence)
        if not remove:
            v.mode(mode)
        policy = PolicyRow(row.name, poster, kind, mode if not remove else "", paths, time.time(), ctx.subject)
        await self.d.inboxes.put_policy(ctx.org, policy, removed=remove, version=time.time_ns())
        await self.d.directory.changed(ctx.org, row.name)
        return policy, remove

    async def principals(self, ctx: CallContext) -> list[tuple[str, str]]:
        if ctx.role < Role.ADMIN:
            raise Forbidden(ErrorCode.AUTH_INSUFFICIENT, "inbox.principals needs the admin role", {"reason": "role", "needed": "admin"})
        subjects = await self.d.identity.principals(ctx.org)
        return [(s, s.split(":", 1)[0]) for s in subjects if s.startswith(("sa:", "user:"))]

    async def list_inboxes(self, ctx: CallContext) -> tuple[list[InboxRow], dict[str, dict[str, int]], bool]:
        rows = await self.d.inboxes.in_namespace(ctx.org, ctx.namespace)
        if rows:
            # Read-your-writes, as task.counts: the open counts come from the projection.
            await self.d.projected()
        counts = await self.d.tasks.open_counts_by_inbox(ctx.org, ctx.namespace) if rows else {}
        return rows, counts, ctx.role >= Role.ADMIN

    async def policies(self, ctx: CallContext, inbox: str) -> list[PolicyRow]:
        v.inbox_name(inbox)
        row = await self.d.access.inbox(ctx, inbox, Role.VIEWER)
        return await self.d.directory.inboxes.policies(ctx.org, row.name)

    async def deliveries(self, ctx: CallContext, inbox: str, limit: int) -> list[Attempt]:
        v.inbox_name(inbox)
        row = await self.d.access.inbox(ctx, inbox, Role.ADMIN)
        return await list_deliveries(self.d.store, ctx.org, row.name, limit or 100)
