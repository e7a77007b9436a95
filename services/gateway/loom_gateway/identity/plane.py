"""Handlers for the identity ops (thin: proto in, rules in domain/core, SQL in the store)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from loom_api.identity.v1 import identity_pb2 as pb
from loom_core.chain import CallContext
from loom_core.errors import Forbidden, NotFound, invalid_field
from loom_core.identity.delegation import delegate
from loom_core.identity.store import IdentityStore
from loom_core.identity.tokens import Principal, TokenCodec, new_token_id
from loom_core.roles import Role
from loom_core.runtime import Handler, Runtime
from loom_core.store import Migration

from .domain import check_name, check_role, check_subject


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


async def bootstrap_org(
    identity: IdentityStore, codec: TokenCodec, org: str, namespace: str, ttl_seconds: int, subject: str = "user:admin"
) -> tuple[str, Principal]:
    """Create the org and its first namespace, make `subject` org-wide admin, and mint its token."""
    check_name("org", org)
    check_name("namespace", namespace)
    await identity.ensure_org(org)
    await identity.create_namespace(org, namespace, "")
    await identity.set_grant(org, "*", subject, "admin")
    now = int(time.time())
    principal = Principal(
        jti=new_token_id("bootstrap-"),
        sub=subject,
        org=org,
        roles={"*": "admin"},
        iat=now,
        exp=now + ttl_seconds,
        default_namespace=namespace,
    )
    return codec.encode(principal), principal


class IdentityPlane:
    name = "identity"
    migrations: Sequence[Migration] = ()  # core owns the identity tables (every plane's chain reads them)

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.ids = runtime.identity

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def handlers(self) -> dict[str, Handler]:
        return {
            "auth.whoami": self.whoami,
            "namespace.create": self.create_namespace,
            "namespace.list": self.list_namespaces,
            "grants.set": self.set_grant,
            "grants.list": self.list_grants,
            "sa.create": self.create_sa,
            "token.mint": self.mint,
            "token.revoke": self.revoke,
        }

    async def _org_admin(self, ctx: CallContext) -> None:
        if await self.rt.auth.org_role(ctx.principal) < Role.ADMIN:
            raise Forbidden("AUTH_INSUFFICIENT", "this needs an org-wide admin token", {"reason": "org_admin", "needed": "admin"})

    async def whoami(self, req: pb.WhoAmIRequest, ctx: CallContext) -> pb.WhoAmIResponse:
        p = ctx.principal
        role = await self.rt.auth.role_in(p, ctx.namespace) if ctx.namespace else Role.NONE
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
            expires_time=_iso(p.exp),
            agent=ctx.agent,
            user=ctx.user,
            session=ctx.session,
        )

    async def create_namespace(self, req: pb.CreateNamespaceRequest, ctx: CallContext) -> pb.CreateNamespaceResponse:
        await self._org_admin(ctx)
        check_name("name", req.name)
        row, created = await self.ids.create_namespace(ctx.org, req.name, req.description)
        return pb.CreateNamespaceResponse(
            namespace=pb.Namespace(name=row["name"], description=row["description"], created_time=str(row["created_at"])), created=created
        )

    async def list_namespaces(self, req: pb.ListNamespacesRequest, ctx: CallContext) -> pb.ListNamespacesResponse:
        rows = await self.ids.list_namespaces(ctx.org)
        org_role = await self.rt.auth.org_role(ctx.principal)
        out = []
        for r in rows:
            if org_role >= Role.VIEWER or await self.rt.auth.role_in(ctx.principal, r["name"]) >= Role.VIEWER:
                out.append(pb.Namespace(name=r["name"], description=r["description"], created_time=str(r["created_at"])))
        return pb.ListNamespacesResponse(namespaces=out)

    async def set_grant(self, req: pb.SetGrantRequest, ctx: CallContext) -> pb.SetGrantResponse:
        check_subject("subject", req.subject)
        check_role("role", req.role, allow_none=True)
        if not await self.ids.get_namespace(ctx.org, ctx.namespace):
            raise NotFound("RESOURCE_NOT_FOUND", f"no namespace {ctx.namespace!r} in this org", {"namespace": ctx.namespace})
        row = await self.ids.set_grant(ctx.org, ctx.namespace, req.subject, req.role)
        await self.rt.auth.publish_grant_change(ctx.org, req.subject)
        return pb.SetGrantResponse(
            grant=pb.Grant(subject=req.subject, namespace=ctx.namespace, role=req.role, updated_time=row["updated_at"])
        )

    async def list_grants(self, req: pb.ListGrantsRequest, ctx: CallContext) -> pb.ListGrantsResponse:
        rows = await self.ids.grants_in(ctx.org, ctx.namespace)
        return pb.ListGrantsResponse(
            grants=[pb.Grant(subject=r["subject"], namespace=r["namespace"], role=r["role"], updated_time=r["updated_at"]) for r in rows]
        )

    async def create_sa(self, req: pb.CreateServiceAccountRequest, ctx: CallContext) -> pb.CreateServiceAccountResponse:
        check_name("name", req.name)
        check_role("role", req.role or "writer")
        role = req.role or "writer"
        if Role.parse(role) > ctx.role:
            raise Forbidden("AUTH_INSUFFICIENT", "a grant may not exceed the granter's role", {"reason": "wider_than_parent"})
        created = await self.ids.create_service_account(ctx.org, req.name, req.description)
        subject = f"sa:{req.name}"
        row = await self.ids.set_grant(ctx.org, ctx.namespace, subject, role)
        await self.rt.auth.publish_grant_change(ctx.org, subject)
        return pb.CreateServiceAccountResponse(
            subject=subject,
            created=created,
            grant=pb.Grant(subject=subject, namespace=ctx.namespace, role=role, updated_time=row["updated_at"]),
        )

    async def mint(self, req: pb.MintTokenRequest, ctx: CallContext) -> pb.MintTokenResponse:
        p = ctx.principal
        s = self.rt.settings
        subject = req.subject or p.sub
        subject_grants = None
        if subject != p.sub:
            check_subject("subject", subject)
            # Minting for another subject is an admin act over every namespace the child names.
            named = dict(req.roles) or {}
            if not named:
                raise invalid_field("roles", "required when minting for another subject")
            for ns in named:
                role = (
                    await self.rt.auth.org_role(p) if ns == "*" else max(await self.rt.auth.org_role(p), await self.rt.auth.role_in(p, ns))
                )
                if role < Role.ADMIN:
                    raise Forbidden(
                        "AUTH_INSUFFICIENT", f"minting for another subject needs admin in {ns!r}", {"reason": "role", "namespace": ns}
                    )
            subject_grants = await self.rt.auth.live_grants(p.org, subject)
        if req.default_namespace:
            check_name("default_namespace", req.default_namespace)
        creator_grants = await self.rt.auth.live_grants(p.org, p.sub)
        child = delegate(
            p,
            now=int(time.time()),
            ttl_seconds=int(req.ttl_seconds or s.token_default_ttl_seconds),
            max_ttl_seconds=s.token_max_ttl_seconds,
            max_chain_depth=s.token_max_chain_depth,
            creator_grants=creator_grants,
            subject=subject,
            subject_grants=subject_grants,
            roles=dict(req.roles) or None,
            default_namespace=req.default_namespace,
            read_scope=tuple(req.read_scope) if req.read_scope else None,
            consumer=req.consumer or None,
            ends_with_session=req.ends_with_session,
            new_session_id=f"sid-{uuid.uuid4().hex}" if req.start_session else "",
            token_id_prefix=_check_prefix(req.token_id_prefix),
        )
        return pb.MintTokenResponse(
            token=self.rt.codec.encode(child),
            token_id=child.jti,
            subject=child.sub,
            expires_time=_iso(child.exp),
            session_id=child.sid,
            roles=child.roles,
        )

    async def revoke(self, req: pb.RevokeTokenRequest, ctx: CallContext) -> pb.RevokeTokenResponse:
        p = ctx.principal
        targets = [(k, v) for k, v in (("token", req.token_id), ("subject", req.subject), ("session", req.session_id)) if v]
        if not targets:
            raise invalid_field("token_id", "name a token_id, subject or session_id to revoke")
        is_admin = await self.rt.auth.org_role(p) >= Role.ADMIN
        for kind, value in targets:
            own = (kind == "token" and value == p.jti) or (kind == "subject" and value == p.sub) or (kind == "session" and value == p.sid)
            if not own and not is_admin:
                raise Forbidden(
                    "AUTH_INSUFFICIENT", "revoking another's token, subject or session needs org-wide admin", {"reason": "org_admin"}
                )
            if kind == "subject":
                check_subject("subject", value)
        for kind, value in targets:
            r = await self.ids.revoke(p.org, kind, value, p.sub)
            await self.rt.auth.publish_revocation(r)
        return pb.RevokeTokenResponse(revoked=len(targets))


# Token id prefixes Loom itself gives meaning to (an assistant answer's token is told by its id).
RESERVED_PREFIXES = ("assistant-answer-", "bootstrap-")


def _check_prefix(prefix: str) -> str:
    if prefix and (len(prefix) > 40 or not prefix.replace("-", "").replace("_", "").isalnum()):
        raise invalid_field("token_id_prefix", "letters, digits, '-' and '_', at most 40")
    if prefix.startswith(RESERVED_PREFIXES):
        raise invalid_field("token_id_prefix", "this prefix is reserved")
    return prefix
