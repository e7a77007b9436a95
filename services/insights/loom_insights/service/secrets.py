"""The analysis secrets: the 256-bit key the row policies verify and the analyst's password,
kept together as one sealed value in loom.analysis_secrets, sealed under LOOM_JWT_SECRET (opened
under it or LOOM_JWT_SECRET_PREVIOUS).

`reseal` is the `loom.reseal` entry point `loom secrets reseal` runs: it rewrites the row (and
the root's record, service/root.py) under the current secret, holding the `analysis.entities`
lease where a bus is configured, and carries the stored time over unchanged.
"""

from __future__ import annotations

import json
import logging
import secrets
import string
from dataclasses import dataclass

from loom_core.sealing import Sealer, SealError
from loom_core.settings import Settings
from loom_core.store import Store, ch_time

from ..store.sealed import SECRETS_TABLE, SealedRow

log = logging.getLogger(__name__)

PURPOSE = "loom.analysis.secrets"
LEASE = "analysis.entities"
ASSOCIATED = b"loom.analysis_secrets:1"
_SYMBOLS = "-_.!#%+="


class SecretsUnreadable(Exception):
    """The row exists but no configured secret opens it."""


@dataclass(frozen=True, slots=True)
class AnalysisSecrets:
    key: bytes
    password: str


def draw() -> AnalysisSecrets:
    """A new random key and a password ClickHouse Cloud accepts (lower, upper, digit, symbol)."""
    alphabet = string.ascii_letters + string.digits + _SYMBOLS
    while True:
        pw = "".join(secrets.choice(alphabet) for _ in range(32))
        if (
            any(c.islower() for c in pw)
            and any(c.isupper() for c in pw)
            and any(c.isdigit() for c in pw)
            and any(c in _SYMBOLS for c in pw)
        ):
            return AnalysisSecrets(secrets.token_bytes(32), pw)


def sealer_for(settings: Settings) -> Sealer:
    return Sealer(PURPOSE, settings.jwt_secret, settings.jwt_secret_previous)


def seal(sealer: Sealer, s: AnalysisSecrets) -> str:
    return sealer.seal(json.dumps({"key": s.key.hex(), "password": s.password}).encode(), ASSOCIATED)


def unseal(sealer: Sealer, blob: str) -> AnalysisSecrets:
    try:
        data = json.loads(sealer.open(blob, ASSOCIATED))
        return AnalysisSecrets(bytes.fromhex(data["key"]), str(data["password"]))
    except (SealError, ValueError, KeyError, TypeError):
        raise SecretsUnreadable("the analysis secrets row does not open under LOOM_JWT_SECRET or LOOM_JWT_SECRET_PREVIOUS") from None


async def load(store: Store, sealer: Sealer) -> tuple[AnalysisSecrets, SealedRow] | None:
    """The stored secrets, or None when there is no row. Raises SecretsUnreadable."""
    row = await SECRETS_TABLE.read(store)
    if row is None:
        return None
    return unseal(sealer, row.sealed), row


async def store_new(store: Store, sealer: Sealer, s: AnalysisSecrets) -> None:
    """The first draw's row (version 1), stored before the analyst user is created."""
    await SECRETS_TABLE.write(store, seal(sealer, s), 1, ch_time())


async def reseal_row(store: Store, sealer: Sealer) -> int:
    """Rewrite the row under the current secret; 0 when there is none or it already is."""
    row = await SECRETS_TABLE.read(store)
    if row is None or sealer.is_current(row.sealed):
        return 0
    try:
        blob = sealer.reseal(row.sealed, ASSOCIATED)
    except SealError:
        raise SecretsUnreadable("the analysis secrets row does not open under LOOM_JWT_SECRET or LOOM_JWT_SECRET_PREVIOUS") from None
    await SECRETS_TABLE.write(store, blob, row.version + 1, row.written_at)
    return 1


async def reseal(store: Store, settings: Settings) -> int:
    """`loom.reseal` entry point: reseal the analysis secrets row (under the analysis lease
    when a bus is configured, so it never interleaves with a write)."""
    from . import root

    sealer = sealer_for(settings)
    if not settings.nats_url:
        return await reseal_row(store, sealer) + await root.reseal_record(store, settings)
    from loom_core.bus import LeaseStore, connect_bus

    user = settings.nats_internal_user
    bus = await connect_bus(settings.nats_url, name="loom-reseal", user=user, password=settings.nats_internal_password if user else "")
    try:
        leases = await LeaseStore.open(bus)
        lease = await leases.wait_acquire(LEASE, f"reseal-{secrets.token_hex(4)}", ttl=60.0, timeout=120.0)
        try:
            return await reseal_row(store, sealer) + await root.reseal_record(store, settings)
        finally:
            await leases.release(lease)
    finally:
        await bus.close()
