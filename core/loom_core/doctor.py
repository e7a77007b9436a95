"""What `loom doctor` checks are made of, shared by the runner (which runs them) and each plane
(which contributes its own through the `loom.doctor` entry points: `<plane> =
"loom_<plane>.doctor:checks"`, an `async def checks(ctx: DoctorContext) -> list[Check]`).

A check names one thing and gives one verdict: `ok`, `fault` (with the command or setting that
fixes it and the page of docs/operations/doctor/ that explains it), `not_applicable` (the check
does not apply to this deployment, e.g. the analyst boundary on the embedded store: never a
fault) or `unchecked` (it could not be checked: the part it needs did not answer). A summary is
Loom's own words: never a secret, a driver's text or a statement.

The helpers below are the checks more than one plane needs: a JetStream stream (or KV bucket)
present and healthy, the tables a plane's migrations declare present, and a sealed secret at rest
sealed under the current root secret.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from .sealing import Sealer, SealError
from .settings import Settings
from .store import Migration, Store

DOCTOR_ENTRY_POINTS = "loom.doctor"
DOCS = "docs/operations/doctor"


class Verdict(StrEnum):
    OK = "ok"
    FAULT = "fault"
    NOT_APPLICABLE = "not_applicable"
    UNCHECKED = "unchecked"


@dataclass(frozen=True, slots=True)
class Check:
    """One check's outcome. `fault` names the page `docs/operations/doctor/<fault>.md`."""

    name: str
    verdict: Verdict
    summary: str
    fix: str = ""
    fault: str = ""

    @property
    def doc(self) -> str:
        return f"{DOCS}/{self.fault}.md" if self.fault else ""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdict"] = self.verdict.value
        out["doc"] = self.doc
        return out


def ok(name: str, summary: str) -> Check:
    return Check(name, Verdict.OK, summary)


def fault(name: str, fault_id: str, summary: str, fix: str) -> Check:
    return Check(name, Verdict.FAULT, summary, fix, fault_id)


def not_applicable(name: str, summary: str) -> Check:
    return Check(name, Verdict.NOT_APPLICABLE, summary)


def unchecked(name: str, summary: str, fix: str = "") -> Check:
    return Check(name, Verdict.UNCHECKED, summary, fix)


@dataclass(slots=True)
class DoctorContext:
    """What the checks run against: the deployment's settings, and Loom's store and bus (None
    when they could not be opened or reached, with why: a check that needs them says
    `unchecked`). The bus is anything with nats-py's `nc` and `js` (the runtime's Bus inside a
    serving process, the doctor's own connection elsewhere)."""

    settings: Settings
    store: Store | None
    bus: Any | None
    store_problem: str = ""
    bus_problem: str = ""

    @property
    def embedded(self) -> bool:
        return not self.settings.clickhouse_url


# ---------------------------------------------------------------------------- NATS

REPLICA_SILENT_NS = 10 * 1_000_000_000
NATS_DOWN_FIX = "start NATS (embedded: `loom up` runs it) or fix LOOM_NATS_URL, then run `loom doctor` again"


async def stream_checks(ctx: DoctorContext, streams: Sequence[str], owner: str, fix: str) -> list[Check]:
    """One check per JetStream stream (a KV bucket is the stream `KV_<bucket>`): present, and on a
    NATS cluster led by a leader with every replica current."""
    names = [f"nats.stream.{s}" for s in streams]
    if ctx.bus is None:
        return [unchecked(n, f"NATS did not answer ({ctx.bus_problem or 'not reachable'})", NATS_DOWN_FIX) for n in names]
    from nats.js.errors import NotFoundError

    out: list[Check] = []
    for name, stream in zip(names, streams, strict=True):
        try:
            info = await ctx.bus.js.stream_info(stream)
        except NotFoundError:
            out.append(fault(name, "stream-missing", f"the {owner} stream {stream} is missing", fix))
            continue
        except Exception as exc:  # noqa: BLE001 - a timeout or a dropped connection: not a verdict on the stream
            out.append(unchecked(name, f"NATS did not answer for {stream} ({type(exc).__name__})", NATS_DOWN_FIX))
            continue
        problem = stream_health(info.cluster)
        if problem:
            out.append(
                fault(
                    name,
                    "nats-quorum",
                    f"the {owner} stream {stream} is unhealthy: {problem}",
                    "bring the NATS cluster's servers back (each stream needs a majority of its replicas)",
                )
            )
        else:
            out.append(ok(name, f"{stream} present ({info.state.messages} messages)"))
    return out


def stream_health(cluster: Any) -> str:
    """Why a stream's cluster state is unhealthy, or "" (a single server has no cluster state)."""
    if cluster is None or not cluster.name:  # a single server reports itself as a leader of no cluster
        return ""
    if not cluster.leader:
        return "no leader (its replicas lost quorum)"
    offline = [p.name for p in cluster.replicas or () if p.offline]
    # A replica is briefly not current after every write; one silent for long has fallen behind.
    behind = [p.name for p in cluster.replicas or () if not p.offline and not p.current and (p.active or 0) > REPLICA_SILENT_NS]
    if offline or behind:
        return "replicas offline or behind: " + ", ".join(sorted(str(p) for p in (*offline, *behind)))
    return ""


# ---------------------------------------------------------------------------- the store

_CREATE = re.compile(r"CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+\{db\}\.(\w+)", re.I)
_ADD = re.compile(r"ALTER\s+TABLE\s+\{db\}\.(\w+)\s+((?:ADD\s+COLUMN\s+IF\s+NOT\s+EXISTS\s+\w+[^,]*,?\s*)+)", re.I)
_ADD_ONE = re.compile(r"ADD\s+COLUMN\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.I)


def declared_schema(migrations: Sequence[Migration]) -> dict[str, set[str]]:
    """The tables a plane's migrations create, with the columns later migrations add to them."""
    tables: dict[str, set[str]] = {}
    for m in migrations:
        for t in _CREATE.findall(m.sql):
            tables.setdefault(t, set())
        for t, adds in _ADD.findall(m.sql):
            tables.setdefault(t, set()).update(_ADD_ONE.findall(adds))
    return tables


async def schema_check(ctx: DoctorContext, owner: str, migrations: Sequence[Migration]) -> Check:
    """The tables and added columns `owner`'s migrations declare are all in Loom's database (a
    replica runs its migrations at start, so a gap is a build that never started here, or a
    table dropped by hand)."""
    name = f"clickhouse.schema.{owner}"
    if ctx.store is None:
        return unchecked(name, f"the store did not answer ({ctx.store_problem or 'not reachable'})")
    want = declared_schema(migrations)
    try:
        rows = await ctx.store.query("SELECT table, name FROM system.columns WHERE database = {db:String}", {"db": ctx.store.database})
    except Exception as exc:  # noqa: BLE001 - the store's own errors carry no driver text
        return unchecked(name, f"the store did not answer ({type(exc).__name__})")
    have: dict[str, set[str]] = {}
    for r in rows:
        have.setdefault(str(r["table"]), set()).add(str(r["name"]))
    missing = [t for t in sorted(want) if t not in have]
    columns = [f"{t}.{c}" for t in sorted(want) if t in have for c in sorted(want[t] - have[t])]
    if missing or columns:
        what = "; ".join(
            x for x in (("tables " + ", ".join(missing)) if missing else "", ("columns " + ", ".join(columns)) if columns else "") if x
        )
        return fault(
            name,
            "schema-behind",
            f"the {owner} schema is behind this build: missing {what}",
            "start a replica of this build (each runs its migrations at start: `loom up`, or roll the deployment)",
        )
    return ok(name, f"{len(want)} {owner} tables at this build's schema")


# ---------------------------------------------------------------------------- sealed rows

RESEAL_FIX = "run `loom secrets reseal` (with LOOM_JWT_SECRET_PREVIOUS set to the secret before), then unset LOOM_JWT_SECRET_PREVIOUS"


def sealed_check(name: str, what: str, blob: str | None, sealer: Sealer, associated: bytes) -> Check:
    """A sealed secret at rest: sealed under LOOM_JWT_SECRET, not only under the previous
    secret a root rotation left (`loom secrets reseal` rewrites it), and opening at all."""
    if not blob:
        return not_applicable(name, f"no {what} is stored")
    try:
        sealer.open(blob, associated)
    except SealError:
        return fault(
            name,
            "sealed-row-unopenable",
            f"the {what} does not open under LOOM_JWT_SECRET or LOOM_JWT_SECRET_PREVIOUS",
            "set LOOM_JWT_SECRET (and LOOM_JWT_SECRET_PREVIOUS during a root rotation) to the deployment's root secret",
        )
    if not sealer.is_current(blob):
        return fault(name, "secrets-not-resealed", f"the {what} is still sealed under LOOM_JWT_SECRET_PREVIOUS", RESEAL_FIX)
    return ok(name, f"the {what} is sealed under LOOM_JWT_SECRET")
