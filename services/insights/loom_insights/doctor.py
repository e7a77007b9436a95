"""The insights plane's `loom doctor` checks (entry point `loom.doctor`: insights): its tables,
and on a ClickHouse server the analyst boundary (spec 000, "Key rotation" and loom doctor):

- `analysis.boundary.secrets`: the secrets row is there and opens (a lost row, with the analyst
  user still there, is `--rotate-analysis-key`'s; a row that does not open, the root secret's);
- `analysis.boundary.policies`: no row policy Loom did not write widens what the analyst reads;
- `analysis.boundary.entities`: the stored version is this build's (or newer), and the caps
  profile is this replica's settings;
- `analysis.boundary.probe`: the replica's probe, run once (grants, policies, unsigned reads,
  SHOW GRANTS);
- `analysis.boundary.rotation`: a few dozen signed canary reads, each on a new connection so a
  load balancer spreads them, judged with each server's policy key and the row's stored time
  (domain/rotation.judge).

On the embedded store the boundary does not apply (chDB has no users or row policies): one
`analysis.boundary` check says so, never a fault.
"""

from __future__ import annotations

import time
import uuid

from loom_core.doctor import Check, DoctorContext, fault, not_applicable, ok, schema_check, sealed_check, unchecked
from loom_core.errors import Unavailable
from loom_core.store.base import StoreError, parse_ch_time

from .domain.allowlist import CANARY, CANARY_MARKER, Table
from .domain.entities import ANALYST, CAPS_PROFILE, CAPS_STAMP, PROFILE, VERSION_STAMP, Caps, revision_of, version_of
from .domain.rotation import Probe, judge, key_id
from .domain.scope import Scope, scope_settings
from .service import root
from .service import secrets as sec
from .service.analysis import EMBEDDED_REASON, caps_from
from .service.probe import PROBE_TTL_S, Prober
from .service.provisioning import Provisioner, detect_prefix
from .service.rotation import read_policy_keys
from .settings import InsightsSettings
from .store.clickhouse import ChClient, ChError, NoAnswer
from .store.schema import MIGRATIONS
from .store.sealed import ROOT_TABLE, SECRETS_TABLE

BOUNDARY = "analysis.boundary"
SECRETS = f"{BOUNDARY}.secrets"
POLICIES = f"{BOUNDARY}.policies"
ENTITIES = f"{BOUNDARY}.entities"
PROBE = f"{BOUNDARY}.probe"
ROTATION = f"{BOUNDARY}.rotation"
CH_DOWN_FIX = "fix LOOM_CLICKHOUSE_URL or bring ClickHouse back, then run `loom doctor` again"


async def sealed_checks(ctx: DoctorContext) -> list[Check]:
    """The analysis secrets row and the root's record, each sealed under LOOM_JWT_SECRET."""
    names = ("secrets.sealed.analysis_secrets", "secrets.sealed.analysis_root")
    if ctx.store is None:
        return [unchecked(n, "the store did not answer") for n in names]
    try:
        row, record = await SECRETS_TABLE.read(ctx.store), await ROOT_TABLE.read(ctx.store)
    except Exception as exc:  # noqa: BLE001 - the store's own errors carry no driver text
        return [unchecked(n, f"the row could not be read ({type(exc).__name__})") for n in names]
    return [
        sealed_check(names[0], "analysis secrets row", row.sealed if row else None, sec.sealer_for(ctx.settings), sec.ASSOCIATED),
        sealed_check(names[1], "root's record", record.sealed if record else None, root.sealer_for(ctx.settings), root.ASSOCIATED),
    ]


async def checks(ctx: DoctorContext) -> list[Check]:
    schema = await schema_check(ctx, "insights", MIGRATIONS)
    sealed = await sealed_checks(ctx)
    if ctx.embedded:
        return [schema, *sealed, not_applicable(BOUNDARY, EMBEDDED_REASON)]
    if ctx.store is None:
        why = f"the store did not answer ({ctx.store_problem or 'not reachable'})"
        return [schema, *sealed, *(unchecked(n, why, CH_DOWN_FIX) for n in (SECRETS, POLICIES, ENTITIES, PROBE, ROTATION))]
    admin = ChClient(ctx.settings.clickhouse_url, max_size=1)
    try:
        return [schema, *sealed, *await boundary_checks(ctx, admin)]
    finally:
        await admin.close()


async def boundary_checks(ctx: DoctorContext, admin: ChClient) -> list[Check]:
    assert ctx.store is not None
    settings = ctx.settings
    own = settings.plane(InsightsSettings)
    caps = caps_from(own)
    sealer = sec.sealer_for(settings)
    prov = Provisioner(ctx.store, admin, None, sealer, caps)
    try:
        prefix = await detect_prefix(admin)
        tables = await prov.present()
        loaded = await sec.load(ctx.store, sealer)
    except sec.SecretsUnreadable:
        return [
            fault(
                SECRETS,
                "analysis-row-unopenable",
                "the analysis secrets row does not open under LOOM_JWT_SECRET or LOOM_JWT_SECRET_PREVIOUS",
                "set LOOM_JWT_SECRET (and LOOM_JWT_SECRET_PREVIOUS during a root rotation) to the deployment's root secret on every replica",
            ),
            *_skipped("the secrets row does not open"),
        ]
    except Unavailable as exc:
        return [
            fault(SECRETS, "analysis-prefix", exc.message, "allow SQL_ or custom_ in the server's custom_settings_prefixes"),
            *_skipped(exc.message),
        ]
    except (ChError, NoAnswer) as exc:
        return [unchecked(SECRETS, f"ClickHouse did not answer ({exc})", CH_DOWN_FIX), *_skipped("ClickHouse did not answer")]
    exists = await _analyst_exists(prov)
    if loaded is None:
        if exists is False:
            return [
                fault(
                    SECRETS,
                    "analysis-not-provisioned",
                    "there is no analysis secrets row and no analyst user: the analyst's entities were never written",
                    "run `loom ch-setup` as a ClickHouse user with access management (or `loom ch-setup --print-analyst-sql` for an admin)",
                ),
                *_skipped("nothing is provisioned"),
            ]
        seen = "the analyst user still exists" if exists else "Loom's user cannot list users, so the analyst user may still exist"
        return [
            fault(
                SECRETS,
                "analysis-row-lost",
                f"the analysis secrets row is gone and {seen}: a lost row (or a rotation cut short)",
                "run `loom ch-setup --rotate-analysis-key` (or print and run `loom ch-setup --print-analyst-sql`)",
            ),
            *_skipped("there is no secrets row to sign with"),
        ]
    secrets, row = loaded
    out = [ok(SECRETS, f"the secrets row opens (key {key_id(secrets.key)}, row version {row.version})")]
    out.append(await _foreign(prov, tables))
    out.append(await _entities(prov, prefix, tables, caps))
    stored = await _stamp(prov, PROFILE, f"{prefix}{VERSION_STAMP}")
    current = revision_of(stored) <= revision_of(version_of(tables))
    out.append(await _probe(settings.clickhouse_url, ctx.store.database, secrets.password, secrets.key, prefix, tables, current))
    out.append(await _rotation(ctx, admin, secrets.key, secrets.password, prefix, row.written_at, own))
    return out


def _skipped(why: str) -> list[Check]:
    return [unchecked(n, f"not checked: {why}") for n in (POLICIES, ENTITIES, PROBE, ROTATION)]


async def _foreign(prov: Provisioner, tables: tuple[Table, ...]) -> Check:
    """Policies Loom did not write, which a write refuses to write over: a permissive one on an
    allowlisted table (ORed with every other user's), or the analyst's scope policy in another
    database (one Loom per ClickHouse service)."""
    try:
        foreign = await prov.foreign_permissive(tables)
        elsewhere = await prov.scope_policy_elsewhere()
    except StoreError:  # a user without SHOW ROW POLICIES cannot list them
        return unchecked(POLICIES, "Loom's ClickHouse user cannot list row policies (SHOW ROW POLICIES)")
    if foreign:
        return fault(
            POLICIES,
            "analysis-foreign-policy",
            "permissive row policies Loom did not write widen what the analyst reads: " + "; ".join(foreign),
            "an admin drops them or makes them RESTRICTIVE, then runs `loom ch-setup`",
        )
    if elsewhere:
        return fault(
            POLICIES,
            "analysis-foreign-policy",
            f"the analyst's scope policy exists in another database ({', '.join(elsewhere)}): one Loom per ClickHouse service",
            "an admin removes the other deployment's analyst entities, or gives this Loom a ClickHouse service of its own",
        )
    return ok(POLICIES, "no row policy Loom did not write on the allowlisted tables")


async def _analyst_exists(prov: Provisioner) -> bool | None:
    try:
        return await prov.analyst_exists()
    except StoreError:  # a user without SHOW USERS cannot tell
        return None


async def _stamp(prov: Provisioner, profile: str, setting: str) -> str:
    try:
        return await prov.stored_stamp(profile, setting)
    except StoreError:  # a user without SHOW SETTINGS PROFILES reads no stamp
        return ""


async def _entities(prov: Provisioner, prefix: str, tables: tuple[Table, ...], caps: Caps) -> Check:
    ours = version_of(tables)
    stored = await _stamp(prov, PROFILE, f"{prefix}{VERSION_STAMP}")
    if not stored:
        return unchecked(ENTITIES, "no stored version could be read (Loom's user may lack SHOW SETTINGS PROFILES)")
    if revision_of(stored) < revision_of(ours) or (revision_of(stored) == revision_of(ours) and stored != ours):
        return fault(
            ENTITIES,
            "analysis-version-behind",
            f"the analyst's entities are at version {stored}, this build's are {ours}",
            "run `loom ch-setup` as a ClickHouse user with access management",
        )
    caps_stored = await _stamp(prov, CAPS_PROFILE, f"{prefix}{CAPS_STAMP}")
    if caps_stored and caps_stored != caps.stamp():
        return fault(
            ENTITIES,
            "analysis-caps-differ",
            "the analyst's caps profile differs from this replica's LOOM_CH_ANALYSIS_* cap settings",
            "set the same LOOM_CH_ANALYSIS_* caps on every replica, then run `loom ch-setup`",
        )
    newer = " (a newer build's: this build answers on them)" if revision_of(stored) > revision_of(ours) else ""
    return ok(ENTITIES, f"the analyst's entities are at version {stored}{newer}; the caps are this replica's")


async def _probe(url: str, db: str, password: str, key: bytes, prefix: str, tables: tuple[Table, ...], current: bool) -> Check:
    analyst = ChClient(url, user=ANALYST, password=password, database=db, max_size=1)
    try:
        result = await Prober(analyst, db).run(key, prefix, tables, current)
    finally:
        await analyst.close()
    if result.ok:
        return ok(PROBE, "the analyst's grants, policies and refusals are as this build writes them")
    if not result.definite:
        return unchecked(PROBE, result.reason, CH_DOWN_FIX)
    if "sign_in" in result.codes:
        return unchecked(PROBE, "the analyst could not sign in: see analysis.boundary.rotation")
    fix = (
        "run `loom ch-setup` as a ClickHouse user with access management (a write repairs these)"
        if result.repairable
        else "an admin drops what Loom did not write (the findings name it; the server log names the policy)"
    )
    return fault(PROBE, "analysis-probe-findings", "the probe found: " + "; ".join(result.findings), fix)


async def _signed_read(url: str, db: str, password: str, key: bytes, prefix: str) -> Probe | None:
    """One signed canary read on a new connection; None when ClickHouse did not answer."""
    client = ChClient(url, user=ANALYST, password=password, database=db, max_size=1)
    qid = f"doctor:{uuid.uuid4()}"
    settings = scope_settings(prefix, key, Scope("", ("",), int(time.time()) + PROBE_TTL_S), qid)
    try:
        res = await client.run(
            f"SELECT hostName() AS host, count() AS n FROM {db}.{CANARY.name} WHERE marker = '{CANARY_MARKER}'",
            settings,
            query_id=qid,
            wait_s=30,
        )
    except ChError:  # refused to sign in, or the canary's policy refused the read: no server named
        return Probe(False)
    except NoAnswer:
        return None
    finally:
        await client.close()
    host, n = res.rows[0] if res.rows else ("", 0)
    return Probe(int(n) >= 1, str(host))


async def _rotation(
    ctx: DoctorContext, admin: ChClient, key: bytes, password: str, prefix: str, stored_at: str, own: InsightsSettings
) -> Check:
    assert ctx.store is not None
    db = ctx.store.database
    probes: list[Probe] = []
    for _ in range(max(1, own.ch_analysis_doctor_probes)):
        p = await _signed_read(ctx.settings.clickhouse_url, db, password, key, prefix)
        if p is None:
            return unchecked(ROTATION, "ClickHouse did not answer a signed probe", CH_DOWN_FIX)
        probes.append(p)
    try:
        keys = await read_policy_keys(admin, db, ctx.settings.clickhouse_cluster)
    except NoAnswer:
        keys = None
    try:
        now = await admin.run("SELECT toString(now64(6, 'UTC'))", wait_s=15)
        age: float | None = (parse_ch_time(str(now.rows[0][0])) - parse_ch_time(stored_at)).total_seconds()
    except (ChError, NoAnswer):
        age = None
    v = judge(probes, keys, key_id(key), age, own.ch_analysis_rotation_settle_s)
    if v.outcome == "ok":
        hosts = sorted({p.host for p in probes if p.host})
        return ok(ROTATION, f"{v.summary}, reaching {', '.join(hosts) or 'one server'}")
    return fault(ROTATION, v.fault, v.summary, v.fix)
