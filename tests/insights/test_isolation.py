"""The isolation proof (spec 000 "Isolation proof", the part-1 cases), against a real ClickHouse
server: LOOM_TEST_CLICKHOUSE_URL, whose user has access management (e.g. the bundled
ClickHouse's `loom` user). Without it every case is skipped, visibly (the run's header says so).

Two orgs are seeded, each with a canary task, ledger row and memory row; insights.query runs
with the first org's viewer token. Each case must be refused or return no canary.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from loom_core.bus import NatsServer
from loom_core.store.server import ServerStore
from loom_gateway.identity import bootstrap_org
from loom_runner.embedded import Instance, start_instance

from tests.conftest import make_settings

CH_URL = os.environ.get("LOOM_TEST_CLICKHOUSE_URL", "")
SKIP_REASON = "LOOM_TEST_CLICKHOUSE_URL is not set: the analysis isolation proof needs a ClickHouse server (a user with access management)"
pytestmark = [pytest.mark.clickhouse_server, pytest.mark.skipif(not CH_URL, reason=SKIP_REASON)]

MEMORY_DDL = """
CREATE TABLE IF NOT EXISTS {db}.memory (
    org String, namespace String, memory_key String, memory_type String, value String,
    version UInt64, created_at DateTime64(6, 'UTC'), updated_at DateTime64(6, 'UTC'),
    tombstoned_at Nullable(DateTime64(6, 'UTC'))
) ENGINE = ReplacingMergeTree(version) ORDER BY (org, namespace, memory_key)"""


@dataclass
class World:
    inst: Instance
    store: ServerStore
    org_a: str
    ns_a: str
    ns_a2: str
    org_b: str
    ns_b: str
    viewer_a: str
    token_b: str
    canary_b: str
    task_table: str = "tasks"

    def client(self, token: str | None = None) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.inst.base_url, headers={"Authorization": f"Bearer {token or self.viewer_a}"}, timeout=60)

    def plane(self) -> Any:
        return next(p for p in self.inst.planes if p.name == "insights")


async def _wait_ready(world_plane: Any, within: float = 90.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while world_plane.analysis.state != "ready":
        if loop.time() > deadline:
            raise AssertionError(f"analysis never became ready: {world_plane.analysis.state} {world_plane.analysis.reason}")
        await asyncio.sleep(0.2)


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    tmp: Path = tmp_path_factory.mktemp("iso")
    db = f"loom_iso_{uuid.uuid4().hex[:8]}"
    store = await ServerStore.open(CH_URL, db)
    await store.execute("CREATE DATABASE IF NOT EXISTS {db}")
    await store.execute(MEMORY_DDL)  # the conditional memory entry is generated when the table exists
    # A settle time near zero: no rotation runs here, so the probe's canary repair never waits.
    settings = make_settings(
        tmp, clickhouse_url=CH_URL, clickhouse_database=db, ch_analysis_probe_interval_s=3600.0, ch_analysis_rotation_settle_s=0.001
    )
    async with NatsServer(tmp / "nats") as nats:
        inst = await start_instance(settings, store=store, nats_url=nats.url, name="loom-iso")
        try:
            org_a, ns_a, ns_a2, org_b, ns_b = (f"{p}-{uuid.uuid4().hex[:8]}" for p in ("orga", "nsa", "nsa2", "orgb", "nsb"))
            admin_a, _ = await bootstrap_org(inst.runtime.identity, inst.runtime.codec, org_a, ns_a, 3600)
            token_b, _ = await bootstrap_org(inst.runtime.identity, inst.runtime.codec, org_b, ns_b, 3600)
            async with httpx.AsyncClient(base_url=inst.base_url, headers={"Authorization": f"Bearer {admin_a}"}) as c:
                r = await c.post("/v1/token.mint", json={"roles": {ns_a: "viewer"}, "ttl_seconds": 3600})
                assert r.status_code == 200, r.text
                viewer_a = r.json()["token"]
            canary_b = f"CANARY-B-{uuid.uuid4().hex[:8]}"
            task_table = await _seed(store, org_a, ns_a, ns_a2, org_b, ns_b, canary_b)
            world = World(inst, store, org_a, ns_a, ns_a2, org_b, ns_b, viewer_a, token_b, canary_b, task_table)
            await _wait_ready(world.plane())
            yield world
        finally:
            await inst.stop()
            await store.execute("DROP DATABASE IF EXISTS {db}")
            await store.close()


async def _seed(store: ServerStore, org_a: str, ns_a: str, ns_a2: str, org_b: str, ns_b: str, canary: str) -> str:
    """Two orgs' rows; answers the tasks plane's table (`tasks`, or `task_state` where the plane
    projects its state there)."""
    now = "now64(6)"
    names = {r["name"] for r in await store.query("SELECT name FROM system.tables WHERE database = {d:String}", {"d": store.database})}
    task_table = "task_state" if "task_state" in names else "tasks"
    for org, ns, kind, tid in ((org_a, ns_a, "review", "t-a"), (org_a, ns_a2, "CANARY-A2", "t-a2"), (org_b, ns_b, canary, "t-b")):
        if task_table == "task_state":
            await store.execute(
                "INSERT INTO {db}.task_state (org, task_id, inbox, namespace, kind, status, priority, poster, created_at, updated_at, version, rev, doc)"
                " VALUES ({o:String}, {t:String}, 'inbox', {n:String}, {k:String}, 'queued', 1, 'p', "
                + now
                + ", "
                + now
                + ", 1, 1, {k:String})",
                {"o": org, "t": tid, "n": ns, "k": kind},
            )
        else:
            await store.execute(
                "INSERT INTO {db}.tasks (org, task_id, inbox, namespace, kind, title, status, version, created_at, updated_at)"
                " VALUES ({o:String}, {t:String}, 'inbox', {n:String}, {k:String}, {k:String}, 'queued', 1, " + now + ", " + now + ")",
                {"o": org, "t": tid, "n": ns, "k": kind},
            )
        await store.execute(
            "INSERT INTO {db}.agent_events (ts, org, namespace, subject, op, ok, latency_ms) VALUES ("
            + now
            + ", {o:String}, {n:String}, 'user:x', {k:String}, true, 1)",
            {"o": org, "n": ns, "k": kind},
        )
        await store.execute(
            "INSERT INTO {db}.memory (org, namespace, memory_key, memory_type, value, version, created_at, updated_at, tombstoned_at)"
            " VALUES ({o:String}, {n:String}, {k:String}, 'fact', {k:String}, 1, " + now + ", " + now + ", NULL)",
            {"o": org, "n": ns, "k": kind},
        )
    rows = [("k-deleted", 1, "NULL"), ("k-deleted", 2, now), ("k-superseded", 1, "NULL"), ("k-superseded", 2, "NULL")]
    for key, version, tomb in rows:
        await store.execute(
            "INSERT INTO {db}.memory (org, namespace, memory_key, memory_type, value, version, created_at, updated_at, tombstoned_at)"
            f" VALUES ({{o:String}}, {{n:String}}, {{k:String}}, 'v{version}', 'x', {version}, {now}, {now}, {tomb})",
            {"o": org_a, "n": ns_a, "k": key},
        )

    return task_table


async def query(world: World, sql: str, token: str | None = None, **extra: Any) -> httpx.Response:
    sql = re.sub(r"\btasks\b", world.task_table, sql)
    if world.task_table == "task_state":
        sql = sql.replace("SELECT title FROM", "SELECT doc FROM")
    async with world.client(token) as c:
        return await c.post("/v1/insights.query", json={"sql": sql, **extra})


def assert_no_canary(world: World, r: httpx.Response) -> None:
    assert world.canary_b not in r.text and "CANARY-A2" not in r.text, r.text
    assert world.org_b not in r.text, r.text
    for leak in ("loom_sig", "loom_org", "getSetting", "decrypt", "initialQueryID"):
        assert leak not in r.text, r.text


async def restore(world: World) -> None:
    """A full write (as loom ch-setup) and a clean probe: the entities as this build writes them."""
    analysis = world.plane().analysis
    await analysis.provisioner().write("setup")
    await analysis.check(repair=False)
    assert analysis.state == "ready", analysis.reason


async def assert_unavailable(world: World) -> None:
    """insights.query answers ANALYSIS_UNAVAILABLE, naming no cause (that is for the server log and loom doctor)."""
    r = await query(world, "SELECT kind FROM tasks")
    assert r.status_code == 503, r.text
    err = r.json()["error"]
    assert err["code"] == "ANALYSIS_UNAVAILABLE"
    assert "canary" not in r.text and "secrets" not in r.text and "loom_analyst" not in r.text


async def test_a_viewer_reads_its_own_rows(world: World) -> None:
    r = await query(world, "SELECT task_id, kind FROM tasks")
    assert r.status_code == 200, r.text
    assert r.json()["rows"] == [["t-a", "review"]]
    assert r.json()["sql_digest"].startswith("sha256:")


REFUSED_OR_EMPTY = [
    "SELECT * FROM tasks WHERE org = '{org_b}'",
    "SELECT kind FROM tasks WHERE namespace = '{ns_a2}'",
    "SELECT a.kind, b.kind FROM tasks a CROSS JOIN tasks b",
    "SELECT kind FROM (SELECT * FROM tasks WHERE org != '')",
    "SELECT kind FROM tasks UNION ALL SELECT kind FROM tasks WHERE org = '{org_b}'",
    "SELECT * FROM view(SELECT kind FROM tasks)",
    "SELECT kind FROM merge(currentDatabase(), '^tasks$')",
    "SELECT throwIf(kind = '{canary}') FROM tasks",
    "SELECT sleepEachRow(0.01), kind FROM tasks WHERE org = '{org_b}'",
    "SELECT * FROM system.query_log",
    "SELECT * FROM system.processes",
    "SELECT * FROM system.row_policies",
    "SELECT * FROM system.users",
    "SELECT * FROM information_schema.tables",
    "SHOW CREATE TABLE tasks",
    "DESCRIBE tasks",
    "KILL QUERY WHERE 1 TEST",
    "SELECT * FROM revocations",
    "SELECT * FROM grants",
    "SELECT title FROM tasks",
    "SELECT args FROM agent_events",
    "SELECT value FROM memory",
    "EXPLAIN SELECT * FROM tasks",
    "EXPLAIN PLAN SELECT * FROM tasks",
    "EXPLAIN ESTIMATE SELECT * FROM tasks",
    "SELECT 1) UNION ALL (EXPLAIN SELECT * FROM tasks",
    "SELECT 1 /* ) */ ) EXPLAIN SELECT 1 --",
    "SELECT * FROM mergeTreeIndex(currentDatabase(), tasks)",
    "SELECT * FROM url('http://127.0.0.1:9/x', 'CSV', 'a String')",
    "SELECT * FROM file('/etc/passwd', 'LineAsString')",
    "SELECT * FROM s3('http://127.0.0.1:9/b/k', 'CSV', 'a String')",
    "SELECT * FROM remote('127.0.0.1', currentDatabase(), tasks)",
    "SELECT * FROM cluster('default', currentDatabase(), tasks)",
    "SELECT * FROM executable('id', 'TSV', 'a String')",
    "SELECT * FROM input('a String')",
    "SELECT aiGenerate('x')",
    "SELECT memory_key FROM memory WHERE memory_key IN ('k-deleted') SETTINGS final = 0, apply_row_policy_after_final = 0",
    "SELECT kind FROM tasks SETTINGS send_logs_level = 'trace'",
    "SELECT kind FROM tasks SETTINGS use_query_condition_cache = 1",
    "SELECT kind FROM tasks SETTINGS max_threads = 256",
    "SELECT kind FROM tasks SETTINGS log_queries_cut_to_length = 100000, log_formatted_queries = 1",
    "SELECT kind FROM tasks SETTINGS SQL_loom_org = '{org_b}', SQL_loom_ns = '{ns_b}'",
    "SELECT kind FROM tasks SETTINGS custom_loom_org = '{org_b}', custom_loom_ns = '{ns_b}'",
    "SELECT kind FROM tasks SETTINGS SQL_loom_org = 5",
    "SELECT kind FROM tasks SETTINGS SQL_loom_ns = [1, 2]",
    "SELECT kind FROM tasks SETTINGS SQL_loom_exp = 'not a number'",
    "SELECT kind FROM tasks SETTINGS readonly = 0",
    "SELECT kind FROM tasks SETTINGS use_query_cache = 1",
    "SELECT kind FROM tasks SETTINGS max_execution_time = 100000",
    "INSERT INTO tasks (org, task_id) VALUES ('x', 'y')",
    "ALTER TABLE tasks DELETE WHERE 1",
    "CREATE TEMPORARY TABLE t (a Int8)",
    "SELECT * FROM analysis_secrets",
    "SELECT * FROM analysis_canary",
    "SELECT toUInt64(kind) FROM tasks",
    "SELECT kind FROM tasks WHERE toUInt64(kind) > 0",
    "SELECT kind FROM tasks PREWHERE toUInt64(kind) > 0 SETTINGS short_circuit_function_evaluation = 'disable'",
    "SELECT kind FROM tasks SETTINGS format_display_secrets_in_show_and_select = 1",
    "SELECT aiGenerate('x', map('credentials', 'loom_ai'))",
    "SELECT toUInt64(memory_key) FROM memory",
    "SELECT memory_key FROM memory WHERE toUInt64(memory_key) > 0",
    "SELECT memory_key FROM memory PREWHERE toUInt64(memory_key) > 0",
    "SELECT memory_key FROM memory PREWHERE toUInt64(memory_key) > 0 SETTINGS short_circuit_function_evaluation = 'disable'",
    "SELECT memory_key FROM memory WHERE toUInt64(memory_key) > 0"
    " SETTINGS optimize_move_to_prewhere = 1, move_all_conditions_to_prewhere = 1, allow_reorder_prewhere_conditions = 1",
    "SELECT * FROM (SELECT memory_key FROM memory WHERE toUInt64(memory_key) > 0) WHERE memory_key != ''"
    " SETTINGS query_plan_merge_filters = 1, query_plan_filter_push_down = 1",
]


@pytest.mark.parametrize("template", REFUSED_OR_EMPTY)
async def test_each_case_is_refused_or_returns_no_canary(world: World, template: str) -> None:
    sql = template.format(org_b=world.org_b, ns_a2=world.ns_a2, ns_b=world.ns_b, canary=world.canary_b)
    r = await query(world, sql)
    assert r.status_code in (200, 403, 422, 429), r.text
    assert_no_canary(world, r)
    if r.status_code == 200 and "memory" in sql:
        assert r.json()["rows"] == []


async def test_a_namespace_outside_the_token_is_refused(world: World) -> None:
    r = await query(world, "SELECT kind FROM tasks", namespaces=[world.ns_a2])
    assert r.status_code == 403, r.text


async def test_deleted_and_superseded_memory_versions_stay_hidden(world: World) -> None:
    r = await query(world, "SELECT memory_key, memory_type FROM memory WHERE memory_key LIKE 'k-%' ORDER BY memory_key")
    assert r.status_code == 200, r.text
    assert r.json()["rows"] == [["k-superseded", "v2"]]


async def test_both_orgs_statements_at_once_each_read_their_own(world: World) -> None:
    a, b = await asyncio.gather(query(world, "SELECT kind FROM tasks"), query(world, "SELECT kind FROM tasks", token=world.token_b))
    assert a.json()["rows"] == [["review"]]
    assert b.json()["rows"] == [[world.canary_b]]


async def test_the_same_text_with_the_query_cache_keeps_orgs_apart(world: World) -> None:
    sql = "SELECT kind FROM tasks"
    a = await query(world, sql)
    b = await query(world, sql, token=world.token_b)
    assert a.json()["rows"] == [["review"]] and b.json()["rows"] == [[world.canary_b]]


async def test_a_cap_error_names_the_cap(world: World) -> None:
    r = await query(world, "SELECT count() FROM numbers(1000000000000)")
    assert r.status_code == 422, r.text
    assert r.json()["error"]["detail"].get("cap") in ("max_rows_to_read", "max_execution_time")


async def test_an_extra_grant_turns_the_probe_into_analysis_unavailable(world: World) -> None:
    db = world.store.database
    await world.store.execute(f"GRANT SELECT ON {db}.* TO loom_analyst")
    try:
        plane = world.plane()
        await plane.analysis.check(write=False, repair=False)
        assert plane.analysis.state == "unavailable"
        r = await query(world, "SELECT kind FROM tasks")
        assert r.status_code == 503 and r.json()["error"]["code"] == "ANALYSIS_UNAVAILABLE"
        assert "loom_" not in r.json()["error"]["message"]
        # the write repairs it
        await plane.analysis.check(write=True)
        assert plane.analysis.state == "ready", plane.analysis.reason
    finally:
        # A table's revoke takes the column grants under it too: only a full write restores them.
        await world.store.execute(f"REVOKE SELECT ON {db}.* FROM loom_analyst")
        await restore(world)


async def test_a_dropped_policy_turns_the_probe_into_analysis_unavailable(world: World) -> None:
    db = world.store.database
    await world.store.execute(f"DROP ROW POLICY loom_analyst_scope ON {db}.task_events")
    plane = world.plane()
    try:
        await plane.analysis.check(write=False, repair=False)
        assert plane.analysis.state == "unavailable"
    finally:
        await plane.analysis.check(write=True)
        assert plane.analysis.state == "ready", plane.analysis.reason


async def test_a_permissive_policy_loom_did_not_write_is_reported_and_never_written_over(world: World) -> None:
    db = world.store.database
    await world.store.execute(f"CREATE ROW POLICY stranger ON {db}.tasks AS PERMISSIVE FOR SELECT USING 1 TO loom_analyst")
    plane = world.plane()
    try:
        # The analyst's restrictive policy still bounds it (restrictive AND permissive), so the
        # statement reads only its scope; a write refuses and names the stranger.
        r = await query(world, "SELECT kind FROM tasks")
        assert r.json()["rows"] == [["review"]]
        from loom_insights.service.provisioning import ProvisionRefused

        with pytest.raises(ProvisionRefused, match="stranger"):
            await plane.analysis.provisioner().write("setup")
    finally:
        await world.store.execute(f"DROP ROW POLICY stranger ON {db}.tasks")
        await plane.analysis.check(write=True)


async def test_the_statement_text_and_the_key_stay_out_of_the_query_log(world: World) -> None:
    marker = f"marker_{uuid.uuid4().hex[:8]}"
    r = await query(world, f"SELECT '{marker}' AS m, kind FROM tasks")
    assert r.status_code == 200, r.text
    await world.store.execute("SYSTEM FLUSH LOGS")
    rows = await world.store.query(
        "SELECT count() AS n FROM system.query_log WHERE user = 'loom_analyst' AND (query LIKE {m:String} OR formatted_query LIKE {m:String})",
        {"m": f"%{marker}%"},
    )
    assert int(rows[0]["n"]) == 0


async def test_a_statement_run_while_a_write_replaces_the_policies_reads_the_right_rows(world: World) -> None:
    plane = world.plane()
    write = asyncio.create_task(plane.analysis.provisioner().write("setup"))
    answers = []
    while not write.done():
        answers.append(await query(world, "SELECT kind FROM tasks"))
    await write
    answers.append(await query(world, "SELECT kind FROM tasks"))
    for r in answers:
        assert r.status_code in (200, 503), r.text
        if r.status_code == 200:
            assert r.json()["rows"] == [["review"]]
        assert_no_canary(world, r)
    assert answers[-1].status_code == 200


async def test_a_revoked_token_stops_new_calls(world: World) -> None:
    async with world.client(world.viewer_a) as c:
        minted = await c.post("/v1/token.mint", json={"roles": {world.ns_a: "viewer"}, "ttl_seconds": 600})
    assert minted.status_code == 200, minted.text
    token = minted.json()["token"]
    assert (await query(world, "SELECT kind FROM tasks", token=token)).status_code == 200
    async with world.client(token) as c:
        r = await c.post("/v1/token.revoke", json={"token_id": minted.json()["token_id"]})
    assert r.status_code == 200, r.text
    r = await query(world, "SELECT kind FROM tasks", token=token)
    assert r.status_code == 401, r.text


async def test_an_erased_memory_is_gone_from_the_next_statement(world: World) -> None:
    await world.store.execute(
        "INSERT INTO {db}.memory (org, namespace, memory_key, memory_type, value, version, created_at, updated_at, tombstoned_at)"
        " VALUES ({o:String}, {n:String}, 'k-to-erase', 'fact', 'x', 1, now64(6), now64(6), NULL)",
        {"o": world.org_a, "n": world.ns_a},
    )
    sql = "SELECT memory_key FROM memory WHERE memory_key = 'k-to-erase'"
    assert (await query(world, sql)).json()["rows"] == [["k-to-erase"]]
    await world.store.execute(
        "ALTER TABLE {db}.memory UPDATE tombstoned_at = now64(6) WHERE memory_key = 'k-to-erase' SETTINGS mutations_sync = 2"
    )
    assert (await query(world, sql)).json()["rows"] == []


# ------------------------------------------------------------------ the open part-1 cases


async def test_a_table_taken_off_the_allowlist_reads_nothing_whether_or_not_its_grant_is_still_there(world: World) -> None:
    from loom_insights.domain.allowlist import ALLOWLIST, POLICY_DECISIONS
    from loom_insights.domain.entities import RETIRED_PREDICATE, SCOPE_POLICY

    db = world.store.database
    analysis = world.plane().analysis
    marker = f"op-{uuid.uuid4().hex[:8]}"
    await world.store.execute(
        "INSERT INTO {db}.policy_decisions (ts, org, namespace, op, decision) VALUES (now64(6), {o:String}, {n:String}, {m:String}, 'allow')",
        {"o": world.org_a, "n": world.ns_a, "m": marker},
    )
    sql = f"SELECT op FROM policy_decisions WHERE op = '{marker}'"
    before = await query(world, sql)
    assert before.status_code == 200 and before.json()["rows"] == [[marker]], before.text
    # The next build's allowlist leaves policy_decisions out.
    analysis.allowlist = tuple(t for t in ALLOWLIST if t.name != POLICY_DECISIONS.name)
    try:
        report = await analysis.provisioner().write("setup")
        assert report.wrote
        await analysis.check(repair=False)
        assert analysis.state == "ready", analysis.reason
        # Its grant went with the write: a read is refused, quoting nothing of the boundary.
        r = await query(world, sql)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["detail"]["clickhouse_code"] == 497
        # Its policy stays, reading nothing (a policy is never dropped).
        rows = await world.store.query(
            "SELECT select_filter FROM system.row_policies WHERE database = {db:String} AND table = 'policy_decisions'"
            " AND short_name = {p:String}",
            {"db": db, "p": SCOPE_POLICY},
        )
        assert [str(x["select_filter"]) for x in rows] == [RETIRED_PREDICATE]
        # The catalog no longer lists it.
        async with world.client() as c:
            catalog = await c.post("/v1/insights.catalog", json={})
        assert catalog.status_code == 200, catalog.text
        assert "policy_decisions" not in [t["name"] for t in catalog.json()["tables"]]
        # A grant left behind (as an older build leaves it) reads nothing ...
        cols = ", ".join(POLICY_DECISIONS.column_names)
        await world.store.execute(f"GRANT SELECT({cols}) ON {db}.policy_decisions TO loom_analyst")
        r = await query(world, sql)
        assert r.status_code == 200 and r.json()["rows"] == [], r.text
        # ... and the probe names it; a write revokes it.
        await analysis.check(repair=False)
        assert analysis.state == "unavailable" and analysis.last_probe is not None
        assert analysis.last_probe.codes == ["extra_grant"]
        await analysis.check()
        assert analysis.state == "ready", analysis.reason
        assert (await query(world, sql)).status_code == 422
    finally:
        analysis.allowlist = ALLOWLIST
        await restore(world)
    after = await query(world, sql)
    assert after.status_code == 200 and after.json()["rows"] == [[marker]], after.text


async def _caps_profile(world: World, setting: str) -> tuple[float, float]:
    from loom_insights.domain.entities import CAPS_PROFILE

    rows = await world.store.query(
        "SELECT toString(value) AS v, toString(max) AS m FROM system.settings_profile_elements"
        " WHERE profile_name = {p:String} AND setting_name = {s:String}",
        {"p": CAPS_PROFILE, "s": setting},
    )
    assert len(rows) == 1, rows
    return float(rows[0]["v"]), float(rows[0]["m"])


async def test_two_replicas_with_different_caps_write_them_at_boot_only_and_never_move_the_version(world: World) -> None:
    import dataclasses

    from loom_insights.domain.entities import PROFILE, VERSION_STAMP
    from loom_insights.service.provisioning import Provisioner

    analysis = world.plane().analysis
    base = analysis.provisioner()
    stamp = f"{analysis.prefix}{VERSION_STAMP}"
    version = await base.stored_stamp(PROFILE, stamp)
    assert version

    def replica(seconds: int) -> Provisioner:
        caps = dataclasses.replace(analysis.caps, max_execution_time=seconds)
        return Provisioner(base.store, base.admin, base.leases, base.sealer, caps, base.lease_wait_s, base.allowlist)

    first, second = replica(17), replica(19)
    try:
        assert (await first.write("boot")).wrote
        assert await _caps_profile(world, "max_execution_time") == (17, 17)
        assert (await second.write("boot")).wrote  # a boot writes its caps when the stored ones differ
        assert await _caps_profile(world, "max_execution_time") == (19, 19)
        await first.write("repair")  # a repair never writes the caps back
        assert await _caps_profile(world, "max_execution_time") == (19, 19)
        await analysis.check(repair=False)  # nor does the probe
        assert await _caps_profile(world, "max_execution_time") == (19, 19)
        skipped = await second.write("boot")  # a boot whose caps are stored writes nothing
        assert not skipped.wrote and skipped.skipped
        # The caps never touch the version.
        assert await base.stored_stamp(PROFILE, stamp) == version
    finally:
        await restore(world)
    cap = float(analysis.caps.max_execution_time)
    assert await _caps_profile(world, "max_execution_time") == (cap, cap)


async def test_a_boot_never_writes_over_a_newer_builds_version(world: World) -> None:
    from loom_insights.domain.entities import PROFILE, VERSION_STAMP, profile_settings

    analysis = world.plane().analysis
    prov = analysis.provisioner()
    stamp = f"{analysis.prefix}{VERSION_STAMP}"
    ours = await prov.stored_stamp(PROFILE, stamp)
    await prov.admin.run(f"ALTER SETTINGS PROFILE {PROFILE} SETTINGS {profile_settings(analysis.prefix, '99.newer')}")
    try:
        for mode in ("boot", "setup", "repair"):
            report = await prov.write(mode)  # type: ignore[arg-type]
            assert not report.wrote and "newer" in report.skipped, report
        assert await prov.stored_stamp(PROFILE, stamp) == "99.newer"
        # This build keeps answering on the newer build's entities.
        await analysis.check()
        assert analysis.state == "ready", analysis.reason
        assert (await query(world, "SELECT kind FROM tasks")).json()["rows"] == [["review"]]
    finally:
        await prov.admin.run(f"ALTER SETTINGS PROFILE {PROFILE} SETTINGS {profile_settings(analysis.prefix, ours)}")
        await restore(world)


async def test_a_canary_under_another_key_answers_analysis_unavailable_until_a_write_repairs_it(world: World) -> None:
    from loom_insights.domain.allowlist import CANARY
    from loom_insights.domain.entities import ANALYST, LOG_TEXT_CUT, SCOPE_POLICY, policy_predicate, setting_reader

    analysis = world.plane().analysis
    db = world.store.database
    other_key = bytes(range(200, 232))
    pred = policy_predicate(CANARY, other_key, setting_reader(analysis.prefix))
    await analysis.provisioner().admin.run(
        f"ALTER ROW POLICY {SCOPE_POLICY} ON {db}.{CANARY.name} AS RESTRICTIVE FOR SELECT USING {pred} TO {ANALYST}", LOG_TEXT_CUT
    )
    try:
        await analysis.check(repair=False)
        assert analysis.state == "unavailable"  # definite: ANALYSIS_UNAVAILABLE, not OVERLOADED
        probe = analysis.last_probe
        assert probe is not None and probe.codes == ["canary_key"] and probe.repairable
        checks = await world.plane().health()
        assert checks["analysis"]["ok"] is False
        assert "canary" in checks["analysis"]["reason"] and "another key" in checks["analysis"]["reason"]
        assert other_key.hex() not in checks["analysis"]["reason"]
        await assert_unavailable(world)
        # A replica that writes the entities writes them again: the canary is back under the key.
        await analysis.check()
        assert analysis.state == "ready", analysis.reason
        assert analysis.last_probe is not None and analysis.last_probe.ok
        assert (await query(world, "SELECT kind FROM tasks")).json()["rows"] == [["review"]]
    finally:
        if analysis.state != "ready":
            await restore(world)


async def test_a_secrets_row_that_does_not_open_answers_analysis_unavailable_and_is_never_drawn_over(world: World) -> None:
    from loom_core.sealing import Sealer
    from loom_insights.service import secrets as sec
    from loom_insights.store.sealed import SECRETS_TABLE

    analysis = world.plane().analysis
    original = await SECRETS_TABLE.read(world.store)
    assert original is not None
    foreign = sec.seal(Sealer(sec.PURPOSE, "another-deployments-root-secret-" + uuid.uuid4().hex), sec.draw())
    await SECRETS_TABLE.write(world.store, foreign, original.version + 1, original.written_at)
    try:
        await analysis.check(write=True)
        assert analysis.state == "unavailable"
        assert "does not open under LOOM_JWT_SECRET" in analysis.reason
        checks = await world.plane().health()
        assert "does not open" in checks["analysis"]["reason"]
        await assert_unavailable(world)
        # loom ch-setup refuses too, and never draws a new key over the row.
        from loom_insights.service.provisioning import ProvisionRefused

        with pytest.raises(ProvisionRefused, match="does not open under LOOM_JWT_SECRET"):
            await analysis.provisioner().write("setup")
        row = await SECRETS_TABLE.read(world.store)
        assert row is not None and row.sealed == foreign
    finally:
        await SECRETS_TABLE.write(world.store, original.sealed, original.version + 2, original.written_at)
        await analysis.check()
    assert analysis.state == "ready", analysis.reason


async def test_a_secrets_row_gone_while_the_analyst_user_exists_answers_analysis_unavailable(world: World) -> None:
    from loom_insights.service.analysis import NO_SECRETS_ROW
    from loom_insights.service.provisioning import ProvisionRefused
    from loom_insights.store.sealed import SECRETS_TABLE

    analysis = world.plane().analysis
    original = await SECRETS_TABLE.read(world.store)
    assert original is not None
    await world.store.execute("TRUNCATE TABLE {db}.analysis_secrets")
    try:
        await analysis.check(write=True)  # the boot write refuses; the probe has no key
        assert analysis.state == "unavailable" and analysis.reason == NO_SECRETS_ROW
        assert (await world.plane().health())["analysis"]["reason"] == NO_SECRETS_ROW
        await assert_unavailable(world)
        # Plain loom ch-setup refuses over a lost row, drawing nothing.
        with pytest.raises(ProvisionRefused, match="gone while the analyst user exists"):
            await analysis.provisioner().write("setup")
        assert await SECRETS_TABLE.read(world.store) is None
    finally:
        await SECRETS_TABLE.write(world.store, original.sealed, original.version, original.written_at)
        await analysis.check()
    assert analysis.state == "ready", analysis.reason


def _url_as(url: str, user: str, password: str) -> str:
    from urllib.parse import quote, urlsplit, urlunsplit

    parts = urlsplit(url)
    host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
    return urlunsplit((parts.scheme, f"{quote(user)}:{quote(password)}@{host}", parts.path, parts.query, parts.fragment))


async def _entities(world: World) -> list[Any]:
    """What the analyst's entities hold, as an admin reads them."""
    policies = await world.store.query(
        "SELECT name, select_filter, is_restrictive FROM system.row_policies WHERE database = {db:String} ORDER BY name",
        {"db": world.store.database},
    )
    grants = await world.store.query("SHOW GRANTS FOR loom_analyst")
    profiles = await world.store.query(
        "SELECT profile_name, setting_name, toString(value) AS v FROM system.settings_profile_elements"
        " WHERE startsWith(profile_name, 'loom_analyst') ORDER BY profile_name, index"
    )
    return [policies, grants, profiles]


async def test_a_loom_user_without_access_management_writes_nothing_at_boot_and_names_loom_ch_setup(world: World, tmp_path: Path) -> None:
    from loom_insights.store.clickhouse import ChClient

    db = world.store.database
    user, password = f"loom_noam_{uuid.uuid4().hex[:6]}", f"Pw-{uuid.uuid4().hex}A1!"
    await world.store.execute(f"CREATE USER {user} IDENTIFIED WITH sha256_password BY '{password}'")
    await world.store.execute(f"GRANT SELECT ON {db}.* TO {user}")
    url = _url_as(CH_URL, user, password)
    store = await ServerStore.open(url, db)
    served = world.plane().analysis
    settings = make_settings(tmp_path, clickhouse_url=url, clickhouse_database=db, ch_analysis_probe_interval_s=3600.0)
    replica = type(served)(store, served.leases, served.auth, settings)
    replica._admin = ChClient(url, max_size=2)  # what start() opens, without its probe loop
    before = await _entities(world)
    try:
        await replica.check(write=True)
        assert await _entities(world) == before  # the boot wrote nothing
        # The probe runs as the analyst and needs no access management: the entities an admin
        # wrote pass it, and this replica serves.
        assert replica.state == "ready", replica.reason
        # A finding a write would repair stays a finding here, and names loom ch-setup.
        await world.store.execute(f"GRANT SELECT ON {db}.* TO loom_analyst")
        try:
            await replica.check()
            assert replica.state == "unavailable"
            assert "loom ch-setup" in replica.reason
            assert "loom ch-setup" in replica.health()["analysis"]["reason"]
        finally:
            await world.store.execute(f"REVOKE SELECT ON {db}.* FROM loom_analyst")
            await restore(world)
    finally:
        await replica.stop()
        await store.close()
        await world.store.execute(f"DROP USER IF EXISTS {user}")


async def test_a_signature_lifted_to_another_query_id_reads_nothing_through_initial_query_id(world: World) -> None:
    """The policy signs initialQueryID(), the id Loom sends with the statement: the same scope and
    signature sent under another query id read nothing, by the same caller or any other."""
    import time

    from loom_insights.domain.scope import Scope, scope_settings

    analysis = world.plane().analysis
    analyst, key, prefix = analysis._analyst, analysis._key, analysis.prefix
    assert analyst is not None and key
    scope = Scope(world.org_a, (world.ns_a,), int(time.time()) + 60)
    signed_for = f"req-{uuid.uuid4().hex}:1:{uuid.uuid4().hex[:8]}"
    settings = scope_settings(prefix, key, scope, signed_for)
    sql = f"SELECT task_id FROM {world.store.database}.{world.task_table}"
    own = await analyst.run(sql, settings, query_id=signed_for)
    assert own.rows == [["t-a"]]
    for lifted_to in (f"req-{uuid.uuid4().hex}:1:{uuid.uuid4().hex[:8]}", f"{signed_for.rsplit(':', 1)[0]}:other"):
        lifted = await analyst.run(sql, settings, query_id=lifted_to)
        assert lifted.rows == []


async def test_a_scope_read_with_getsetting_and_sent_by_another_orgs_token_reads_nothing(world: World) -> None:
    p = world.plane().analysis.prefix
    read = await query(
        world,
        f"SELECT toString(getSetting('{p}loom_org')), toString(getSetting('{p}loom_ns')), "
        f"toString(getSetting('{p}loom_exp')), toString(getSetting('{p}loom_sig'))",
    )
    if read.status_code != 200:  # a build that refuses getSetting has nothing to lift
        assert read.status_code == 422, read.text
        return
    org, ns, exp, sig = read.json()["rows"][0]
    assert org == world.org_a
    lifted = f"SELECT kind FROM tasks SETTINGS {p}loom_org = '{org}', {p}loom_ns = '{ns}', {p}loom_exp = '{exp}', {p}loom_sig = '{sig}'"
    r = await query(world, lifted, token=world.token_b)
    assert r.status_code in (200, 422), r.text
    assert "review" not in r.text and world.org_a not in r.text  # nothing of the first org's
    if r.status_code == 200:  # at most the second org's own row, where the inner SETTINGS do not reach the policy
        assert r.json()["rows"] in ([], [[world.canary_b]])


async def test_two_writes_at_once_both_finish_under_the_lease_and_leave_entities_that_pass_the_probe(world: World) -> None:
    from loom_insights.domain.entities import PROFILE, VERSION_STAMP

    analysis = world.plane().analysis
    first, second = analysis.provisioner(), analysis.provisioner()
    reports = await asyncio.gather(first.write("setup", holder="boot-one"), second.write("setup", holder="boot-two"))
    assert all(r.wrote for r in reports)
    assert await first.stored_stamp(PROFILE, f"{analysis.prefix}{VERSION_STAMP}") == reports[0].version
    await analysis.check(repair=False)
    assert analysis.state == "ready", analysis.reason


async def test_a_first_install_without_access_management_answers_unavailable_naming_loom_ch_setup(world: World, tmp_path: Path) -> None:
    from loom_core.store import run_migrations
    from loom_insights.service.analysis import NO_SECRETS_ROW
    from loom_insights.store.clickhouse import ChClient
    from loom_insights.store.schema import MIGRATIONS
    from loom_insights.store.sealed import SECRETS_TABLE

    db = f"loom_noam_{uuid.uuid4().hex[:8]}"
    admin_store = await ServerStore.open(CH_URL, db)
    await admin_store.execute("CREATE DATABASE IF NOT EXISTS {db}")
    await run_migrations(admin_store, MIGRATIONS)
    user, password = f"loom_noam_{uuid.uuid4().hex[:6]}", f"Pw-{uuid.uuid4().hex}A1!"
    await admin_store.execute(f"CREATE USER {user} IDENTIFIED WITH sha256_password BY '{password}'")
    await admin_store.execute(f"GRANT SELECT ON {db}.* TO {user}")
    url = _url_as(CH_URL, user, password)
    store = await ServerStore.open(url, db)
    served = world.plane().analysis
    settings = make_settings(tmp_path, clickhouse_url=url, clickhouse_database=db, ch_analysis_probe_interval_s=3600.0)
    replica = type(served)(store, served.leases, served.auth, settings)
    replica._admin = ChClient(url, max_size=2)
    try:
        await replica.check(write=True)
        assert replica.state == "unavailable" and replica.reason == NO_SECRETS_ROW
        assert "loom ch-setup" in replica.health()["analysis"]["reason"]
        # The boot drew nothing and wrote no policy in this database.
        assert await SECRETS_TABLE.read(admin_store) is None
        policies = await admin_store.query("SELECT count() AS n FROM system.row_policies WHERE database = {db:String}", {"db": db})
        assert int(policies[0]["n"]) == 0
    finally:
        await replica.stop()
        await store.close()
        await admin_store.execute(f"DROP USER IF EXISTS {user}")
        await admin_store.execute("DROP DATABASE IF EXISTS {db}")
        await admin_store.close()
