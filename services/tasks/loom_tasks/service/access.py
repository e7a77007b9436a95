"""Who may do what with an inbox and its tasks.

The chain has checked the op's minimum role on the call's namespace. An inbox lives in its
owner namespace, which is often another one (a poster posts from its own), so each op checks
the caller's role there too:

- inbox setup (register, policy_set, principals, deliveries): admin on the owner namespace;
- owner ops (pull, claim, heartbeat, progress, complete, fail, defer, block, accept, wont_do,
  unblock, resume, reopen, update, reassign): writer on the owner namespace. The inbox's
  owner_agent is a label the caller picks, so it grants nothing by itself: acting as the owner
  is holding writer there, whatever the label (the dashboard's loom-ui included);
- reading an inbox's tasks: viewer on the owner namespace, or being the task's poster;
- posting: writer on the owner namespace, or a subject listed in the inbox's posters.

What a caller may not even read is answered like something that does not exist (404).
"""

from __future__ import annotations

from dataclasses import dataclass

from loom_core.chain import CallContext
from loom_core.errors import ErrorCode, Forbidden, NotFound
from loom_core.identity import Authenticator
from loom_core.roles import Role

from ..directory import Directory
from ..domain.model import Actor, InboxRow, TaskRow


def no_inbox(name: str) -> NotFound:
    return NotFound(ErrorCode.RESOURCE_NOT_FOUND, f"no inbox {name!r} in this org", {"inbox": name})


def no_task(task_id: str) -> NotFound:
    return NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no such task", {"task_id": task_id})


@dataclass(slots=True)
class Access:
    auth: Authenticator
    directory: Directory

    async def role_on(self, ctx: CallContext, namespace: str) -> Role:
        if namespace == ctx.namespace:
            return ctx.role
        return await self.auth.role_in(ctx.principal, namespace)

    async def actor(self, ctx: CallContext, namespace: str) -> Actor:
        role = await self.role_on(ctx, namespace)
        return Actor(ctx.subject, ctx.agent_label, owner=role >= Role.WRITER)

    async def inbox(self, ctx: CallContext, name: str, need: Role) -> InboxRow:
        """The named inbox of the caller's org, if the caller holds `need` on its namespace."""
        row = await self.directory.inbox(ctx.org, name)
        if row is None:
            raise no_inbox(name)
        role = await self.role_on(ctx, row.namespace)
        if role < Role.VIEWER:
            raise no_inbox(name)
        if role < need:
            raise Forbidden(
                ErrorCode.AUTH_INSUFFICIENT,
                f"this needs the {need.label} role in {row.namespace!r}, the inbox's namespace",
                {"reason": "role", "needed": need.label, "role": role.label, "namespace": row.namespace, "inbox": name},
            )
        return row

    async def owner(self, ctx: CallContext, row: TaskRow) -> Actor:
        """The caller as the task's owner (writer on its inbox's namespace), else 403/404."""
        role = await self.role_on(ctx, row.namespace)
        if role < Role.VIEWER and row.poster != ctx.subject:
            raise no_task(row.task_id)
        if role < Role.WRITER:
            raise Forbidden(
                ErrorCode.AUTH_INSUFFICIENT,
                f"this needs the writer role in {row.namespace!r}, the inbox's namespace",
                {"reason": "role", "needed": "writer", "role": role.label, "namespace": row.namespace, "task_id": row.task_id},
            )
        return Actor(ctx.subject, ctx.agent_label, owner=True)

    async def reader(self, ctx: CallContext, row: TaskRow) -> None:
        if row.poster == ctx.subject:
            return
        if await self.role_on(ctx, row.namespace) < Role.VIEWER:
            raise no_task(row.task_id)
