"""Tokens: mint a delegated child, revoke tokens/subjects/sessions, bootstrap an org."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from loom_api.identity.v1 import identity_pb2 as pb
from loom_core.chain import CallContext
from loom_core.errors import Conflict, ErrorCode, Forbidden, invalid_field
from loom_core.identity import Authenticator, TokenCodec
from loom_core.identity.delegation import delegate
from loom_core.identity.store import IdentityStore
from loom_core.identity.tokens import Principal, issued_now, new_token_id
from loom_core.names import check_name, check_subject
from loom_core.roles import Role

from ..domain.tokens import check_prefix


@dataclass(frozen=True, slots=True)
class TokenLimits:
    default_ttl_seconds: int
    max_ttl_seconds: int
    max_chain_depth: int


async def bootstrap_org(
    identity: IdentityStore,
    codec: TokenCodec,
    org: str,
    namespace: str,
    ttl_seconds: int,
    subject: str = "user:admin",
    *,
    again: bool = True,
) -> tuple[str, Principal]:
    """Create the org and its first namespace, make `subject` org-wide admin, and mint its token.
    `again=False`: an org that exists already is refused (ALREADY_EXISTS) instead of minting
    another org-wide admin token for it unasked."""
    check_name("org", org)
    check_name("namespace", namespace)
    if not again and await identity.list_namespaces(org):
        raise Conflict(
            ErrorCode.ALREADY_EXISTS,
            f"org {org!r} exists already: its admins mint more tokens with token.mint; "
            f"to mint another org-wide admin token here anyway, run `loom admin bootstrap --org {org} --namespace {namespace} --new-token`",
            {"org": org, "reason": "exists"},
        )
    # A new org's first namespace needs no lookup: one chDB statement fewer per bootstrap (the
    # suite bootstraps an org for nearly every test).
    await identity.create_namespace(org, namespace, "", new_org=await identity.ensure_org(org))
    await identity.set_grant(org, "*", subject, "admin")
    now, now_us = issued_now()
    principal = Principal(
        jti=new_token_id("bootstrap-"),
        sub=subject,
        org=org,
        roles={"*": "admin"},
        iat=now,
        iat_us=now_us,
        exp=now + ttl_seconds,
        default_namespace=namespace,
    )
    return codec.encode(principal), principal


@dataclass(eq=False, slots=True)
class TokenService:
    identity: IdentityStore
    auth: Authenticator
    codec: TokenCodec
    limits: TokenLimits

    async def mint(self, ctx: CallContext, req: pb.MintTokenRequest) -> tuple[str, Principal]:
        p = ctx.principal
        subject = req.subject or p.sub
        subject_grants = None
        if subject != p.sub:
            check_subject("subject", subject)
            # Minting for another subject is an admin act over every namespace the child names.
            named = dict(req.roles)
            if not named:
                raise invalid_field("roles", "required when minting for another subject")
            for ns in named:
                org_role = await self.auth.org_role(p)
                role = org_role if ns == "*" else max(org_role, await self.auth.role_in(p, ns))
                if role < Role.ADMIN:
                    raise Forbidden(
                        ErrorCode.AUTH_INSUFFICIENT,
                        f"minting for another subject needs admin in {ns!r}",
                        {"reason": "role", "namespace": ns},
                    )
            subject_grants = await self.auth.live_grants(p.org, subject)
        if req.default_namespace:
            check_name("default_namespace", req.default_namespace)
        creator_grants = await self.auth.live_grants(p.org, p.sub)
        now, now_us = issued_now()
        child = delegate(
            p,
            now=now,
            now_us=now_us,
            ttl_seconds=int(req.ttl_seconds or self.limits.default_ttl_seconds),
            max_ttl_seconds=self.limits.max_ttl_seconds,
            max_chain_depth=self.limits.max_chain_depth,
            creator_grants=creator_grants,
            subject=subject,
            subject_grants=subject_grants,
            roles=dict(req.roles) or None,
            default_namespace=req.default_namespace,
            read_scope=tuple(req.read_scope) if req.read_scope else None,
            consumer=req.consumer or None,
            ends_with_session=req.ends_with_session,
            new_session_id=f"sid-{uuid.uuid4().hex}" if req.start_session else "",
            token_id_prefix=check_prefix(req.token_id_prefix),
        )
        return self.codec.encode(child), child

    async def revoke(self, ctx: CallContext, token_id: str, subject: str, session_id: str) -> int:
        p = ctx.principal
        targets = [(k, v) for k, v in (("token", token_id), ("subject", subject), ("session", session_id)) if v]
        if not targets:
            raise invalid_field("token_id", "name a token_id, subject or session_id to revoke")
        is_admin = await self.auth.org_role(p) >= Role.ADMIN
        for kind, value in targets:
            own = (kind == "token" and value == p.jti) or (kind == "subject" and value == p.sub) or (kind == "session" and value == p.sid)
            if not own and not is_admin:
                raise Forbidden(
                    ErrorCode.AUTH_INSUFFICIENT,
                    "revoking another's token, subject or session needs org-wide admin",
                    {"reason": "org_admin"},
                )
            if kind == "subject":
                check_subject("subject", value)
        for kind, value in targets:
            r = await self.identity.revoke(p.org, kind, value, p.sub)
            await self.auth.publish_revocation(r)
        return len(targets)
