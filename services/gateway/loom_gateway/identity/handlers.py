"""Handlers for the identity ops (auth.*, namespace.*, grants.*, sa.*, token.*), one per RPC
of identity.proto: proto in, proto out. Use cases in service/, rules in domain/ and core."""

from __future__ import annotations

from loom_api.identity.v1 import identity_pb2 as pb
from loom_core.chain import CallContext
from loom_core.identity.store import GrantRow, NamespaceRow

from .domain.times import rfc3339
from .service.access import AccessService
from .service.tokens import TokenService


def _namespace(row: NamespaceRow) -> pb.Namespace:
    return pb.Namespace(name=row["name"], description=row["description"], created_time=rfc3339(row["created_at"]))


def _grant(row: GrantRow) -> pb.Grant:
    return pb.Grant(subject=row["subject"], namespace=row["namespace"], role=row["role"], updated_time=rfc3339(row["updated_at"]))


class IdentityHandlers:
    def __init__(self, access: AccessService, tokens: TokenService) -> None:
        self._access = access
        self._tokens = tokens

    async def who_am_i(self, req: pb.WhoAmIRequest, ctx: CallContext) -> pb.WhoAmIResponse:
        p = ctx.principal
        role = await self._access.role_here(ctx)
        return pb.WhoAmIResponse(
            subject=p.sub,
            org=p.org,
            namespace=ctx.namespace,
            role=role.label if role else "none",
            token_roles=[pb.NamespaceRole(namespace=ns, role=r) for ns, r in sorted(p.roles.items())],
            token_id=p.jti,
            session_id=p.sid,
            consumer=p.consumer,
            parents=list(p.parents),
            expires_time=rfc3339(p.exp),
            agent=ctx.agent,
            user=ctx.user,
            session=ctx.session,
        )

    async def create_namespace(self, req: pb.CreateNamespaceRequest, ctx: CallContext) -> pb.CreateNamespaceResponse:
        row, created = await self._access.create_namespace(ctx, req.name, req.description)
        return pb.CreateNamespaceResponse(namespace=_namespace(row), created=created)

    async def list_namespaces(self, req: pb.ListNamespacesRequest, ctx: CallContext) -> pb.ListNamespacesResponse:
        return pb.ListNamespacesResponse(namespaces=[_namespace(r) for r in await self._access.visible_namespaces(ctx)])

    async def set_grant(self, req: pb.SetGrantRequest, ctx: CallContext) -> pb.SetGrantResponse:
        row = await self._access.set_grant(ctx, req.subject, req.role)
        return pb.SetGrantResponse(grant=_grant(row))

    async def list_grants(self, req: pb.ListGrantsRequest, ctx: CallContext) -> pb.ListGrantsResponse:
        return pb.ListGrantsResponse(grants=[_grant(r) for r in await self._access.grants_here(ctx)])

    async def create_service_account(self, req: pb.CreateServiceAccountRequest, ctx: CallContext) -> pb.CreateServiceAccountResponse:
        role = req.role or "writer"
        subject, created, row = await self._access.create_service_account(ctx, req.name, req.description, role)
        return pb.CreateServiceAccountResponse(subject=subject, created=created, grant=_grant(row))

    async def mint_token(self, req: pb.MintTokenRequest, ctx: CallContext) -> pb.MintTokenResponse:
        token, child = await self._tokens.mint(ctx, req)
        return pb.MintTokenResponse(
            token=token,
            token_id=child.jti,
            subject=child.sub,
            expires_time=rfc3339(child.exp),
            session_id=child.sid,
            roles=child.roles,
        )

    async def revoke_token(self, req: pb.RevokeTokenRequest, ctx: CallContext) -> pb.RevokeTokenResponse:
        return pb.RevokeTokenResponse(revoked=await self._tokens.revoke(ctx, req.token_id, req.subject, req.session_id))
