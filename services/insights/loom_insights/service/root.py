"""The root's own record: a constant sealed under LOOM_JWT_SECRET in loom.analysis_root.

Every boot records it (sealed afresh when the replica's secret is newer than the record's,
after a root rotation with LOOM_JWT_SECRET_PREVIOUS), so `loom ch-setup --rotate-analysis-key`
and `--print-analyst-sql` can prove their LOOM_JWT_SECRET is the deployment's before drawing a
key every replica must open: a CLI run with another secret would seal a row no replica opens.
"""

from __future__ import annotations

import logging

from loom_core.sealing import Sealer, SealError
from loom_core.settings import Settings
from loom_core.store import Store, ch_time

from ..store.sealed import ROOT_TABLE

log = logging.getLogger(__name__)

PURPOSE = "loom.analysis.root"
_RECORD = b"loom root record"
ASSOCIATED = b"loom.analysis_root:1"


def sealer_for(settings: Settings) -> Sealer:
    return Sealer(PURPOSE, settings.jwt_secret, settings.jwt_secret_previous)


async def record(store: Store, settings: Settings) -> None:
    """Record the root at boot: when there is none, or the record is under this replica's
    previous secret. A record this replica cannot open is left as it is (and logged)."""
    sealer = sealer_for(settings)
    row = await ROOT_TABLE.read(store)
    if row is not None and sealer.is_current(row.sealed):
        return
    if row is not None:
        try:
            sealer.open(row.sealed, ASSOCIATED)
        except SealError:
            log.error("analysis: this replica's LOOM_JWT_SECRET is not the one the deployment recorded (loom doctor: secrets.root)")
            return
    await ROOT_TABLE.write(store, sealer.seal(_RECORD, ASSOCIATED), (row.version + 1) if row else 1, ch_time())


async def prove(store: Store, settings: Settings) -> str:
    """Empty when this process's LOOM_JWT_SECRET (or LOOM_JWT_SECRET_PREVIOUS) opens the root's
    record; else why not, in an operator's words."""
    row = await ROOT_TABLE.read(store)
    if row is None:
        return "no root record is stored: start a replica of this build once (each records the root at boot), then run again"
    try:
        sealer_for(settings).open(row.sealed, ASSOCIATED)
    except SealError:
        return "this LOOM_JWT_SECRET is not the deployment's (it does not open the root's record): set the deployment's root secret"
    return ""


async def reseal_record(store: Store, settings: Settings) -> int:
    """`loom secrets reseal`'s part: the record under the current secret; 0 when there is none
    or it already is. Raises SealError when no configured secret opens it."""
    sealer = sealer_for(settings)
    row = await ROOT_TABLE.read(store)
    if row is None or sealer.is_current(row.sealed):
        return 0
    await ROOT_TABLE.write(store, sealer.reseal(row.sealed, ASSOCIATED), row.version + 1, ch_time())
    return 1
