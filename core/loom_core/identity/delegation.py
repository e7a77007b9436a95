"""delegate(): a child token never wider and never longer-lived than its parent (spec 000,
"The bridge", step 2). Pure: the caller supplies the creator's live grants and the clock."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ErrorCode, Forbidden, ValidationFailed
from ..roles import Role
from .tokens import Principal, new_token_id


def delegate(
    parent: Principal,
    *,
    now: int,
    ttl_seconds: int,
    max_ttl_seconds: int,
    max_chain_depth: int,
    creator_grants: Mapping[str, Role],
    subject: str | None = None,
    subject_grants: Mapping[str, Role] | None = None,
    roles: Mapping[str, str] | None = None,
    default_namespace: str = "",
    read_scope: tuple[str, ...] | None = None,
    consumer: str | None = None,
    ends_with_session: bool = False,
    new_session_id: str = "",
    token_id_prefix: str = "",
) -> Principal:
    """Mint the child's claims or refuse with 403 AUTH_INSUFFICIENT naming the rule.

    - Every role the child names is at most the parent's effective role there: the parent
      token's claim capped by the creator's live grant (and, minting for another subject, by
      that subject's live grant).
    - The child expires no later than the parent, except as a child of a sign-in session that
      asks to end with the session (ends_with_session): it takes its own TTL, and revoking
      the session still ends it.
    - The child carries the parent's id and the ancestors' ids in `parents`, and each
      ancestor subject with its issue time in `parent_subjects`, so revoking any of them ends
      the child; the chain is at most `max_chain_depth` long.
    """
    if ttl_seconds <= 0 or ttl_seconds > max_ttl_seconds:
        raise ValidationFailed(
            f"ttl_seconds: must be between 1 and {max_ttl_seconds}",
            {"field": "ttl_seconds", "reason": "out of range"},
        )
    child_subject = subject or parent.sub
    wanted = dict(roles) if roles else dict(parent.roles)
    for ns, role_name in wanted.items():
        try:
            role = Role.parse(role_name)
        except ValueError as exc:
            raise ValidationFailed(str(exc), {"field": f"roles.{ns}", "reason": "unknown role"}) from exc
        allowed = _effective(parent, ns, creator_grants)
        if child_subject != parent.sub:
            # Fail closed: a caller that does not hand the subject's grants gets nothing for it.
            allowed = min(allowed, _grant(subject_grants or {}, ns))
        if role > allowed:
            raise Forbidden(
                ErrorCode.AUTH_INSUFFICIENT,
                f"the token may not be wider than its parent in {ns!r}",
                {"reason": "wider_than_parent", "namespace": ns, "asked": role.label, "allowed": allowed.label},
            )
    scope = tuple(read_scope) if read_scope is not None else parent.read_scope
    if parent.read_scope and not set(scope) <= set(parent.read_scope):
        raise Forbidden(ErrorCode.AUTH_INSUFFICIENT, "read_scope may not be wider than the parent's", {"reason": "wider_than_parent"})
    if scope == () and parent.read_scope:
        scope = parent.read_scope
    parents = (*parent.parents, parent.jti)
    if len(parents) > max_chain_depth:
        raise Forbidden(
            ErrorCode.AUTH_INSUFFICIENT,
            "the delegation chain is too deep",
            {"reason": "chain_too_deep", "max_depth": max_chain_depth},
        )
    exp = now + ttl_seconds
    if not (ends_with_session and parent.sid):
        exp = min(exp, parent.exp)
    return Principal(
        jti=new_token_id(token_id_prefix),
        sub=child_subject,
        org=parent.org,
        roles=wanted,
        iat=now,
        exp=exp,
        default_namespace=default_namespace or parent.default_namespace,
        read_scope=scope,
        consumer=consumer if consumer is not None and consumer != "" else parent.consumer,
        parents=parents,
        parent_subjects=(*parent.parent_subjects, (parent.sub, parent.iat)),
        sid=new_session_id or parent.sid,
    )


def _grant(grants: Mapping[str, Role], ns: str) -> Role:
    if ns == "*":
        return grants.get("*", Role.NONE)
    return max(grants.get(ns, Role.NONE), grants.get("*", Role.NONE))


def _effective(parent: Principal, ns: str, creator_grants: Mapping[str, Role]) -> Role:
    claim = (Role.parse(parent.roles["*"]) if "*" in parent.roles else Role.NONE) if ns == "*" else parent.token_role(ns)
    return min(claim, _grant(creator_grants, ns))
