"""delegate(): every rule spec 000 "The bridge" step 2 lists, on the pure function."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from loom_core.errors import Forbidden, ValidationFailed
from loom_core.identity.delegation import delegate
from loom_core.identity.tokens import Principal
from loom_core.roles import Role

NOW = 1_800_000_000
ADMIN_EVERYWHERE = {"*": Role.ADMIN}


def parent_token(**over: Any) -> Principal:
    base: dict[str, Any] = {
        "jti": "p-1",
        "sub": "user:alice",
        "org": "acme",
        "roles": {"a": "writer", "b": "viewer"},
        "iat": NOW - 100,
        "exp": NOW + 3600,
        "default_namespace": "a",
    }
    base.update(over)
    return Principal(**base)


def child_of(parent: Principal, creator_grants: Mapping[str, Role] = ADMIN_EVERYWHERE, **kw: Any) -> Principal:
    args: dict[str, Any] = {"now": NOW, "ttl_seconds": 600, "max_ttl_seconds": 86400, "max_chain_depth": 4}
    args.update(kw)
    return delegate(parent, creator_grants=creator_grants, **args)


def refusal(exc: pytest.ExceptionInfo[Forbidden]) -> str:
    assert exc.value.code == "AUTH_INSUFFICIENT"
    assert exc.value.detail is not None
    return str(exc.value.detail["reason"])


# --- never wider ---------------------------------------------------------------------------


def test_child_without_roles_takes_the_parents_roles() -> None:
    child = child_of(parent_token())
    assert child.roles == {"a": "writer", "b": "viewer"}
    assert child.sub == "user:alice" and child.org == "acme"


def test_child_narrower_in_one_namespace_is_minted() -> None:
    child = child_of(parent_token(), roles={"a": "viewer"})
    assert child.roles == {"a": "viewer"}
    assert child.token_role("a") == Role.VIEWER
    assert child.token_role("b") == Role.NONE


def test_child_wider_in_a_namespace_is_refused() -> None:
    with pytest.raises(Forbidden) as exc:
        child_of(parent_token(), roles={"b": "writer"})
    assert refusal(exc) == "wider_than_parent"
    assert exc.value.detail == {"reason": "wider_than_parent", "namespace": "b", "asked": "writer", "allowed": "viewer"}


def test_child_naming_a_namespace_the_parent_lacks_is_refused() -> None:
    with pytest.raises(Forbidden) as exc:
        child_of(parent_token(), roles={"c": "viewer"})
    assert refusal(exc) == "wider_than_parent"
    assert exc.value.detail is not None and exc.value.detail["allowed"] == "none"


def test_org_wide_child_under_a_namespaced_parent_is_refused() -> None:
    with pytest.raises(Forbidden) as exc:
        child_of(parent_token(), roles={"*": "viewer"})
    assert refusal(exc) == "wider_than_parent"


def test_org_wide_parent_may_mint_any_namespace_up_to_its_role() -> None:
    parent = parent_token(roles={"*": "writer"})
    assert child_of(parent, roles={"x": "writer", "*": "viewer"}).roles == {"x": "writer", "*": "viewer"}
    with pytest.raises(Forbidden):
        child_of(parent, roles={"x": "admin"})
    with pytest.raises(Forbidden):
        child_of(parent, roles={"*": "admin"})


def test_creators_live_grant_caps_the_child_below_the_parents_claim() -> None:
    # The token claims org-wide admin, but the subject's live grant is now writer in "a" only.
    parent = parent_token(roles={"*": "admin"})
    grants = {"a": Role.WRITER}
    assert child_of(parent, grants, roles={"a": "writer"}).roles == {"a": "writer"}
    with pytest.raises(Forbidden) as exc:
        child_of(parent, grants, roles={"a": "admin"})
    assert exc.value.detail is not None and exc.value.detail["allowed"] == "writer"
    with pytest.raises(Forbidden):
        child_of(parent, grants, roles={"b": "viewer"})
    with pytest.raises(Forbidden):
        child_of(parent, grants, roles={"*": "viewer"})


def test_creators_org_wide_grant_covers_a_named_namespace() -> None:
    child = child_of(parent_token(), {"*": Role.WRITER}, roles={"a": "writer"})
    assert child.roles == {"a": "writer"}


def test_unknown_role_name_is_a_validation_failure_naming_the_field() -> None:
    with pytest.raises(ValidationFailed) as exc:
        child_of(parent_token(), roles={"a": "owner"})
    assert exc.value.detail == {"field": "roles.a", "reason": "unknown role"}


# --- read_scope ------------------------------------------------------------------------------


def test_read_scope_is_inherited_when_the_child_names_none() -> None:
    parent = parent_token(roles={"*": "writer"}, read_scope=("a",))
    child = child_of(parent, roles={"a": "viewer"})
    assert child.read_scope == ("a",)
    assert child.token_role("b") == Role.NONE


def test_read_scope_wider_than_the_parents_is_refused() -> None:
    parent = parent_token(roles={"*": "writer"}, read_scope=("a",))
    with pytest.raises(Forbidden) as exc:
        child_of(parent, roles={"a": "viewer"}, read_scope=("a", "b"))
    assert refusal(exc) == "wider_than_parent"


def test_role_outside_the_parents_read_scope_is_refused() -> None:
    parent = parent_token(roles={"*": "writer"}, read_scope=("a",))
    with pytest.raises(Forbidden) as exc:
        child_of(parent, roles={"b": "viewer"})
    assert exc.value.detail is not None and exc.value.detail["namespace"] == "b"


def test_child_may_narrow_its_read_scope_under_an_unscoped_parent() -> None:
    child = child_of(parent_token(roles={"*": "writer"}), roles={"*": "viewer"}, read_scope=("a",))
    assert child.read_scope == ("a",)
    assert child.token_role("a") == Role.VIEWER
    assert child.token_role("b") == Role.NONE


def test_empty_read_scope_under_a_scoped_parent_keeps_the_parents_scope() -> None:
    parent = parent_token(roles={"*": "writer"}, read_scope=("a",))
    child = child_of(parent, roles={"a": "viewer"}, read_scope=())
    assert child.read_scope == ("a",)


# --- never longer-lived ------------------------------------------------------------------------


def test_child_expiry_is_clamped_to_the_parents() -> None:
    parent = parent_token(exp=NOW + 100)
    child = child_of(parent, ttl_seconds=3600)
    assert child.exp == NOW + 100
    assert child.iat == NOW


def test_child_shorter_than_its_parent_keeps_its_own_ttl() -> None:
    child = child_of(parent_token(exp=NOW + 3600), ttl_seconds=60)
    assert child.exp == NOW + 60


def test_ends_with_session_under_a_session_parent_may_outlive_the_parent() -> None:
    parent = parent_token(exp=NOW + 100, sid="sid-1")
    child = child_of(parent, ttl_seconds=600, ends_with_session=True)
    assert child.exp == NOW + 600
    # It is still ended with the session: the child carries the parent's sid.
    assert child.sid == "sid-1"


def test_ends_with_session_without_a_session_is_still_clamped() -> None:
    child = child_of(parent_token(exp=NOW + 100), ttl_seconds=600, ends_with_session=True)
    assert child.exp == NOW + 100


def test_session_child_that_does_not_ask_is_clamped() -> None:
    child = child_of(parent_token(exp=NOW + 100, sid="sid-1"), ttl_seconds=600)
    assert child.exp == NOW + 100


@pytest.mark.parametrize("ttl", [0, -5, 86401])
def test_ttl_outside_the_allowed_range_is_refused(ttl: int) -> None:
    with pytest.raises(ValidationFailed) as exc:
        child_of(parent_token(), ttl_seconds=ttl)
    assert exc.value.detail is not None and exc.value.detail["field"] == "ttl_seconds"


# --- carried ancestry and chain depth ----------------------------------------------------------


def test_parents_and_parent_subjects_are_carried_down_the_chain() -> None:
    root = parent_token(jti="root", sub="user:alice", iat=NOW - 500)
    mid = child_of(root, roles={"a": "writer"})
    leaf = child_of(mid, creator_grants=ADMIN_EVERYWHERE, roles={"a": "viewer"})
    assert mid.parents == ("root",)
    # Ancestors' issue times travel in microseconds (a token without `iat_us` counts whole seconds).
    assert mid.parent_subjects == (("user:alice", (NOW - 500) * 1_000_000),)
    assert leaf.parents == ("root", mid.jti)
    assert leaf.parent_subjects == (("user:alice", (NOW - 500) * 1_000_000), ("user:alice", NOW * 1_000_000))
    assert len({root.jti, mid.jti, leaf.jti}) == 3


def test_chain_at_the_depth_limit_is_minted_and_one_past_it_refused() -> None:
    at_limit = parent_token(parents=("g1", "g2", "g3"))
    assert len(child_of(at_limit, max_chain_depth=4).parents) == 4
    too_deep = parent_token(parents=("g1", "g2", "g3", "g4"))
    with pytest.raises(Forbidden) as exc:
        child_of(too_deep, max_chain_depth=4)
    assert refusal(exc) == "chain_too_deep"
    assert exc.value.detail is not None and exc.value.detail["max_depth"] == 4


def test_token_id_prefix_consumer_and_new_session_are_applied() -> None:
    child = child_of(
        parent_token(consumer="cli", sid="sid-old"),
        token_id_prefix="assistant-answer-",
        consumer="loom-assistant",
        new_session_id="sid-new",
    )
    assert child.jti.startswith("assistant-answer-")
    assert child.consumer == "loom-assistant"
    assert child.sid == "sid-new"
    assert child_of(parent_token(consumer="cli")).consumer == "cli"


# --- another subject -------------------------------------------------------------------------


def test_child_for_another_subject_is_capped_by_that_subjects_own_grant() -> None:
    parent = parent_token(roles={"*": "admin"})
    bob = {"a": Role.VIEWER}
    child = child_of(parent, subject="user:bob", subject_grants=bob, roles={"a": "viewer"})
    assert child.sub == "user:bob"
    assert child.parent_subjects == (("user:alice", parent.issued_us),)
    with pytest.raises(Forbidden) as exc:
        child_of(parent, subject="user:bob", subject_grants=bob, roles={"a": "writer"})
    assert exc.value.detail is not None and exc.value.detail["allowed"] == "viewer"
    with pytest.raises(Forbidden):
        child_of(parent, subject="user:bob", subject_grants=bob, roles={"b": "viewer"})


def test_child_for_another_subject_without_its_grants_gets_nothing() -> None:
    # Not handing the subject's grants must not mean "uncapped".
    with pytest.raises(Forbidden):
        child_of(parent_token(roles={"*": "admin"}), subject="user:bob", roles={"a": "viewer"})
