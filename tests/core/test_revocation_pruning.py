"""Revocations are pruned once every token they could end has expired: one replica deletes the
rows under the cluster lease, every replica forgets them, and recent revocations stay."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pytest
from loom_core.bus import Bus, LeaseStore
from loom_core.errors import Unauthenticated
from loom_core.identity import Authenticator, Principal, TokenCodec
from loom_core.identity.pruning import RevocationPruner, revocation_horizon
from loom_core.identity.store import IdentityStore
from loom_core.store import ch_time
from loom_runner.embedded import Instance

from tests.conftest import TEST_SECRET

HORIZON = revocation_horizon(30 * 86400, 30 * 86400)


def token_for(codec: TokenCodec, org: str, jti: str) -> str:
    now = int(time.time())
    return codec.encode(Principal(jti=jti, sub="user:alice", org=org, roles={"a": "viewer"}, iat=now, exp=now + 600))


async def revocation_rows(identity: IdentityStore, org: str) -> set[str]:
    return {r.value for r in await identity.revocations() if r.org == org}


@pytest.fixture
async def isolated_leases(bus: Bus) -> LeaseStore:
    # A bucket of its own: the session stack's pruner holds the real lease for an hour.
    return await LeaseStore.open(bus, bucket=f"prune_{uuid.uuid4().hex[:8]}")


async def test_expired_revocations_are_pruned_once_and_forgotten_by_every_replica(stack: Instance, isolated_leases: LeaseStore) -> None:
    identity = stack.runtime.identity
    org = f"org-{uuid.uuid4().hex[:10]}"
    old_at = time.time() - HORIZON - 100
    await stack.runtime.store.insert(
        "{db}.revocations",
        [
            {
                "org": org,
                "kind": "token",
                "value": "jti-old",
                "revoked_at": ch_time(datetime.fromtimestamp(old_at, UTC)),
                "revoked_by": "test",
            }
        ],
    )
    await identity.revoke(org, "token", "jti-recent", "test")
    codec = TokenCodec(TEST_SECRET)
    replicas = [Authenticator(identity, codec, None, 5.0) for _ in range(2)]
    for auth in replicas:
        await auth.reload()
        # The crafted token shows the entry is held: a real token under it would have expired already.
        with pytest.raises(Unauthenticated):
            auth.verify(token_for(codec, org, "jti-old"))
    pruners = [RevocationPruner(identity, isolated_leases, auth, horizon_seconds=HORIZON, interval_seconds=60) for auth in replicas]

    results = [await p.run_once() for p in pruners]

    assert results[0] is not None and results[0] >= 1  # this replica held the lease and deleted
    assert results[1] is None  # the other found the lease held and deleted nothing
    assert await revocation_rows(identity, org) == {"jti-recent"}
    for auth in replicas:
        await auth.reload()  # a resync does not bring the forgotten entry back
        assert auth.verify(token_for(codec, org, "jti-old")).jti == "jti-old"
        with pytest.raises(Unauthenticated) as exc:
            auth.verify(token_for(codec, org, "jti-recent"))
        assert exc.value.code == "AUTH_REVOKED"


async def test_no_revocation_is_pruned_before_the_longest_token_lifetime(stack: Instance, isolated_leases: LeaseStore) -> None:
    identity = stack.runtime.identity
    org = f"org-{uuid.uuid4().hex[:10]}"
    # A minute inside the horizon: a token minted just before it may still be alive.
    at = time.time() - HORIZON + 60
    await stack.runtime.store.insert(
        "{db}.revocations",
        [{"org": org, "kind": "subject", "value": "user:alice", "revoked_at": ch_time(datetime.fromtimestamp(at, UTC)), "revoked_by": "t"}],
    )
    auth = Authenticator(identity, TokenCodec(TEST_SECRET), None, 5.0)
    await auth.reload()
    await RevocationPruner(identity, isolated_leases, auth, horizon_seconds=HORIZON, interval_seconds=60).run_once()
    assert await revocation_rows(identity, org) == {"user:alice"}
