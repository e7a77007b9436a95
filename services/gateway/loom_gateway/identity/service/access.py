"""Namespaces, grants and service accounts: who may do what where."""

from __future__ import annotations

from loom_core.chain import CallContext
from loom_core.errors import ErrorCode, Forbidden, NotFound
from loom_core.identity import Authenticator
from loom_core.identity.store import GrantRow, IdentityStore, NamespaceRow, WrittenGrant
from loom_core.names import check_name, check_role, check_subject
from loom_core.roles import Role


async def require_org_admin(auth: Authenticator, ctx: CallContext) -> None:
    if await auth.org_role(ctx.principal) < Role.ADMIN:
        raise Forbidden(ErrorCode.AUTH_INSUFFICIENT, "this needs an org-wide admin token", {"reason": "org_admin", "needed": "admin"})


class AccessService:
    def __init__(self, identity: IdentityStore, auth: Authenticator) -> None:
        self.identity = identity
        self.auth = auth

    async def role_here(self, ctx: CallContext) -> Role:
        if not ctx.namespace:
            return Role.NONE
        if ctx.namespace_role is not None:
            return ctx.namespace_role  # the chain read it for this call
        return await self.auth.role_in(ctx.principal, ctx.namespace)

    async def create_namespace(self, ctx: CallContext, name: str, description: str) -> tuple[NamespaceRow, bool]:
        await require_org_admin(self.auth, ctx)
        check_name("name", name)
        return await self.identity.create_namespace(ctx.org, name, description)

    async def visible_namespaces(self, ctx: CallContext) -> list[NamespaceRow]:
        rows = await self.identity.list_namespaces(ctx.org)
        org_role = await self.auth.org_role(ctx.principal)
        return [r for r in rows if org_role >= Role.VIEWER or await self.auth.role_in(ctx.principal, r["name"]) >= Role.VIEWER]

    async def set_grant(self, ctx: CallContext, subject: str, role: str) -> WrittenGrant:
        check_subject("subject", subject)
        check_role("role", role, allow_none=True)
        if not await self.identity.get_namespace(ctx.org, ctx.namespace):
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, f"no namespace {ctx.namespace!r} in this org", {"namespace": ctx.namespace})
        row = await self.identity.set_grant(ctx.org, ctx.namespace, subject, role)
        await self.auth.publish_grant_change(ctx.org, subject)
        return row

    async def grants_here(self, ctx: CallContext) -> list[GrantRow]:
        return await self.identity.grants_in(ctx.org, ctx.namespace)

    async def create_service_account(self, ctx: CallContext, name: str, description: str, role: str) -> tuple[str, bool, WrittenGrant]:
        check_name("name", name)
        check_role("role", role)
        if Role.parse(role) > ctx.role:
            raise Forbidden(ErrorCode.AUTH_INSUFFICIENT, "a grant may not exceed the granter's role", {"reason": "wider_than_parent"})
        created = await self.identity.create_service_account(ctx.org, name, description)
        subject = f"sa:{name}"
        row = await self.identity.set_grant(ctx.org, ctx.namespace, subject, role)
        await self.auth.publish_grant_change(ctx.org, subject)
        return subject, created, row
