"""`loom doctor` against the real parts: the embedded stack (what applies, and what it says does
not), and a broken setup for each fault it can produce here: a stopped NATS, a missing stream, a
weak or default root secret, a secrets file others can read, the policy mode off over stored
rules, LibreChat unreachable and LibreChat (the emulator) with its agents API auth off.

The ClickHouse-server checks (the analyst boundary) run in tests/insights/test_rotation_server.py
against LOOM_TEST_CLICKHOUSE_URL; their verdict logic is unit-tested in tests/insights/test_rotation.py."""

from __future__ import annotations

import ast
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from loom_core.bus import NatsServer
from loom_core.bus.natsserver import free_port
from loom_core.doctor import Check, DoctorContext, Verdict
from loom_core.local_secrets import load_or_create
from loom_core.settings import DEFAULT_JWT_SECRET, Settings
from loom_core.store.embedded import EmbeddedStore
from loom_runner.doctor import (
    EXIT_FAULTS,
    EXIT_HEALTHY,
    EXIT_UNCHECKED,
    _connect_nats,
    _diagnose_direct,
    exit_code,
    judge_disk,
    judge_skew,
    render,
    report,
    run_checks,
)
from loom_runner.embedded import Instance
from loom_runner.http import HttpServer

from tests.assistant.emulator import Emulator
from tests.conftest import Tenant, call, make_settings
from tests.pyast import parse_file

REPO = Path(__file__).resolve().parents[2]


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


async def checks_on(stack: Instance, settings: Settings | None = None) -> dict[str, Check]:
    rt = stack.runtime
    return by_name(await run_checks(DoctorContext(settings or rt.settings, rt.store, rt.bus)))


async def test_doctor_on_the_embedded_stack_passes_what_applies_and_says_what_does_not(stack: Instance) -> None:
    found = await checks_on(stack)
    for name in (
        "nats.reachable",
        "nats.jetstream",
        "nats.stream.KV_loom_leases",
        "nats.stream.LOOM_TASK_STATE",
        "nats.stream.LOOM_TASK_EVENTS",
        "clickhouse.reachable",
        "clickhouse.schema.core",
        "clickhouse.schema.tasks",
        "clickhouse.schema.insights",
        "secrets.root",
        "clock.skew",
        "disk.free",
    ):
        assert found[name].verdict == Verdict.OK, found[name]
    # What does not apply to the embedded store is said, never a fault.
    for name in ("analysis.boundary", "nats.quorum", "nats.stream.LOOM_LEDGER", "librechat.reachable", "librechat.auth"):
        assert found[name].verdict == Verdict.NOT_APPLICABLE, found[name]
    assert "ClickHouse server" in found["analysis.boundary"].summary
    # The policy mode is judged against the rules other tests of this session stored: only that
    # check may differ from healthy here.
    faults = [c for c in found.values() if c.verdict == Verdict.FAULT and c.name != "policy.mode"]
    assert faults == []


async def test_a_stopped_nats_is_a_fault_that_names_it(stack: Instance, tmp_path: Path) -> None:
    srv = NatsServer(tmp_path / "nats")
    await srv.__aenter__()
    url = srv.url
    await srv.__aexit__(None, None, None)  # stopped: nothing listens there now
    settings = make_settings(tmp_path, nats_url=url)
    checks = await _diagnose_direct(settings, store=stack.runtime.store)
    found = by_name(checks)
    assert found["nats.reachable"].verdict == Verdict.FAULT
    assert found["nats.reachable"].fault == "nats-unreachable"
    assert "LOOM_NATS_URL" in found["nats.reachable"].fix
    assert found["nats.stream.LOOM_TASK_STATE"].verdict == Verdict.UNCHECKED
    assert found["clickhouse.reachable"].verdict == Verdict.OK
    assert exit_code(checks) == EXIT_FAULTS


@pytest.fixture
async def bare_nats(tmp_path: Path) -> AsyncIterator[NatsServer]:
    """A NATS with JetStream on which no Loom ever declared anything."""
    async with NatsServer(tmp_path / "bare-nats") as srv:
        yield srv


async def test_a_missing_stream_is_a_fault_naming_the_stream_and_the_restart_that_creates_it(
    stack: Instance, tmp_path: Path, bare_nats: NatsServer
) -> None:
    settings = make_settings(tmp_path, nats_url=bare_nats.url)
    bus, problem = await _connect_nats(settings)
    assert bus is not None, problem
    try:
        found = by_name(await run_checks(DoctorContext(settings, stack.runtime.store, bus)))
    finally:
        await bus.nc.close()
    assert found["nats.reachable"].verdict == Verdict.OK
    missing = found["nats.stream.LOOM_TASK_STATE"]
    assert (missing.verdict, missing.fault) == (Verdict.FAULT, "stream-missing")
    assert "tasks" in missing.fix and "restart" in missing.fix
    assert found["nats.stream.KV_loom_leases"].fault == "stream-missing"


@pytest.mark.parametrize("secret", ["short-secret", DEFAULT_JWT_SECRET])
async def test_a_weak_or_default_root_secret_is_a_fault_that_says_how_to_set_one(stack: Instance, tmp_path: Path, secret: str) -> None:
    found = await checks_on(stack, make_settings(tmp_path, jwt_secret=secret))
    check = found["secrets.root"]
    assert (check.verdict, check.fault) == (Verdict.FAULT, "weak-root-secret")
    assert "LOOM_JWT_SECRET" in check.summary and "export LOOM_JWT_SECRET" in check.fix
    assert secret not in check.summary + check.fix


async def test_a_secrets_file_others_can_read_is_a_fault(stack: Instance, tmp_path: Path) -> None:
    load_or_create(tmp_path)
    settings = make_settings(tmp_path)
    assert (await checks_on(stack, settings))["secrets.file"].verdict == Verdict.OK
    (tmp_path / "secrets.json").chmod(0o644)
    check = (await checks_on(stack, settings))["secrets.file"]
    assert (check.verdict, check.fault) == (Verdict.FAULT, "secrets-file-open")
    assert check.fix == "chmod 600 LOOM_DATA_DIR/secrets.json"


async def test_policy_mode_off_over_stored_rules_is_a_fault_and_enforce_is_not(stack: Instance, tenant: Tenant, tmp_path: Path) -> None:
    async with tenant.client() as c:
        r = await call(
            c,
            "policy.set",
            name="no-deletes",
            effect="forbid",
            actions=["task.cancel"],
            condition={"op": "breadth_within", "within": "1h", "cmp": "gt", "value": 2},
        )
        assert r.status_code == 200, r.text
    off = (await checks_on(stack, make_settings(tmp_path, policy_mode="off")))["policy.mode"]
    assert (off.verdict, off.fault) == (Verdict.FAULT, "policy-mode-off")
    assert "LOOM_POLICY_MODE=enforce" in off.fix
    enforce = (await checks_on(stack, make_settings(tmp_path, policy_mode="enforce")))["policy.mode"]
    assert enforce.verdict == Verdict.OK


@pytest.fixture
async def librechat() -> AsyncIterator[tuple[Emulator, str]]:
    emu = Emulator(loom_url="")
    server = HttpServer(emu.app())
    await server.start()
    yield emu, f"http://127.0.0.1:{server.port}"
    await server.stop()


async def test_librechat_with_its_agents_api_auth_off_is_a_fault_and_with_it_on_passes(
    stack: Instance, tmp_path: Path, librechat: tuple[Emulator, str]
) -> None:
    emu, url = librechat
    settings = make_settings(tmp_path, assistant_librechat_url=url)
    found = await checks_on(stack, settings)
    assert found["librechat.reachable"].verdict == Verdict.OK
    assert found["librechat.auth"].verdict == Verdict.OK
    emu.agents_api_auth = False
    check = (await checks_on(stack, settings))["librechat.auth"]
    assert (check.verdict, check.fault) == (Verdict.FAULT, "librechat-auth-off")


async def test_librechat_unreachable_is_a_fault(stack: Instance, tmp_path: Path) -> None:
    found = await checks_on(stack, make_settings(tmp_path, assistant_librechat_url=f"http://127.0.0.1:{free_port()}"))
    assert found["librechat.reachable"].fault == "librechat-unreachable"
    assert found["librechat.auth"].verdict == Verdict.UNCHECKED


# ---------------------------------------------------------------------------- pure parts


def test_exit_code_is_0_healthy_1_on_any_fault_and_2_when_something_could_not_be_checked() -> None:
    good, na = Check("a", Verdict.OK, "fine"), Check("b", Verdict.NOT_APPLICABLE, "n/a")
    bad, unknown = Check("c", Verdict.FAULT, "broken", "fix it", "disk-low"), Check("d", Verdict.UNCHECKED, "no answer")
    assert exit_code([good, na]) == EXIT_HEALTHY == 0
    assert exit_code([good, unknown]) == EXIT_UNCHECKED == 2
    assert exit_code([good, unknown, bad]) == EXIT_FAULTS == 1
    assert report([good, bad])["status"] == "faults"
    text = render([good, bad])
    assert "FAULT" in text and "fix: fix it" in text and "see: docs/operations/doctor/disk-low.md" in text


def test_clock_skew_past_two_seconds_between_any_two_clocks_is_a_fault() -> None:
    assert judge_skew({"ClickHouse": 0.4, "NATS": -0.3}).verdict == Verdict.OK
    skewed = judge_skew({"ClickHouse": 1.5, "NATS": -1.0})  # 2.5 s between ClickHouse and NATS
    assert (skewed.verdict, skewed.fault) == (Verdict.FAULT, "clock-skew")


def test_free_disk_under_a_gibibyte_or_five_percent_is_a_fault() -> None:
    gib = 1 << 30
    assert judge_disk(50 * gib, 100 * gib).verdict == Verdict.OK
    assert judge_disk(gib // 2, 100 * gib).fault == "disk-low"
    assert judge_disk(4 * gib, 100 * gib).fault == "disk-low"


# ---------------------------------------------------------------------------- what the repo says


def _fault_ids() -> set[str]:
    """Every fault id the code can produce: the second argument of each `fault(...)` call and the
    `fault` of each analysis rotation Verdict (domain/rotation.py)."""
    ids: set[str] = set()
    for path in [*(REPO / "core").rglob("*.py"), *(REPO / "services").rglob("*.py")]:
        if ".venv" in path.parts:
            continue
        for node in ast.walk(parse_file(path)):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            index = {"fault": 1, "Verdict": 3}.get(name)
            if index is not None and len(node.args) > index:
                arg = node.args[index]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and re.fullmatch(r"[a-z]+(-[a-z]+)+", arg.value):
                    ids.add(arg.value)
    return ids


def test_every_fault_the_doctor_can_name_has_its_page_in_docs_operations() -> None:
    ids = _fault_ids()
    assert {"nats-unreachable", "stream-missing", "weak-root-secret", "policy-mode-off", "analysis-row-lost"} <= ids
    missing = sorted(i for i in ids if not (REPO / "docs" / "operations" / "doctor" / f"{i}.md").exists())
    assert missing == []


def _operator_strings(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module an operator can read (errors, log lines, health reasons):
    every string constant but docstrings and other bare expression statements."""
    tree = parse_file(path)
    bare = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in bare and "loom doctor" in n.value
    ]


async def test_every_line_that_says_run_loom_doctor_names_a_check_the_doctor_makes(stack: Instance) -> None:
    """An error or log line that sends an operator to `loom doctor` names the check (`loom doctor:
    <check>`), and that check is one the doctor reports (by name, or as the prefix of its names)."""
    names = set((await checks_on(stack)).keys())
    # "run `loom doctor` again", in a fix the doctor itself prints, sends nowhere new.
    mention = re.compile(r"loom doctor(?!` again)(?::\s*([a-z][a-z._]*[a-z]))?")
    seen: list[str] = []
    for root in ("core", "services"):
        for path in (REPO / root).rglob("*.py"):
            if path.name == "doctor.py" and path.parent.name == "loom_runner":
                continue  # the doctor's own output
            for lineno, text in _operator_strings(path):
                for m in mention.finditer(text):
                    where = f"{path.relative_to(REPO)}:{lineno}"
                    check = m.group(1)
                    assert check, f"{where} says loom doctor without naming the check"
                    assert check in names or any(n.startswith(check + ".") for n in names), f"{where}: no check {check}"
                    seen.append(check)
    assert {"analysis.boundary", "secrets.root"} <= set(seen)


async def test_a_sealed_row_left_under_the_previous_root_secret_or_under_another_is_a_fault(stack: Instance, tmp_path: Path) -> None:
    """The root's record (every boot seals it under the deployment's LOOM_JWT_SECRET) after a root
    rotation whose reseal did not run, and under another deployment's secret."""
    from tests.conftest import TEST_SECRET

    assert (await checks_on(stack))["secrets.sealed.analysis_root"].verdict == Verdict.OK
    rotated = make_settings(tmp_path, jwt_secret="a-new-root-secret-0123456789abcdef0123", jwt_secret_previous=TEST_SECRET)
    check = (await checks_on(stack, rotated))["secrets.sealed.analysis_root"]
    assert (check.verdict, check.fault) == (Verdict.FAULT, "secrets-not-resealed")
    assert "loom secrets reseal" in check.fix
    foreign = make_settings(tmp_path, jwt_secret="another-deployments-secret-0123456789ab")
    check = (await checks_on(stack, foreign))["secrets.sealed.analysis_root"]
    assert (check.verdict, check.fault) == (Verdict.FAULT, "sealed-row-unopenable")


async def test_a_table_or_column_the_migrations_declare_and_the_store_lacks_is_schema_behind(stack: Instance, tmp_path: Path) -> None:
    from loom_core.doctor import declared_schema, schema_check
    from loom_core.store import Migration

    migrations = [
        Migration("x", "a", "CREATE TABLE IF NOT EXISTS {db}.doctor_never_made (a UInt8) ENGINE = MergeTree ORDER BY a"),
        Migration(
            "x", "b", "ALTER TABLE {db}.agent_events ADD COLUMN IF NOT EXISTS doctor_col UInt8, ADD COLUMN IF NOT EXISTS other_col UInt8"
        ),
    ]
    assert declared_schema(migrations) == {"doctor_never_made": set(), "agent_events": {"doctor_col", "other_col"}}
    ctx = DoctorContext(make_settings(tmp_path), stack.runtime.store, stack.runtime.bus)
    check = await schema_check(ctx, "x", migrations)
    assert (check.verdict, check.fault) == (Verdict.FAULT, "schema-behind")
    assert "doctor_never_made" in check.summary and "agent_events.doctor_col" in check.summary


def test_a_stream_without_a_leader_or_with_a_replica_behind_is_unhealthy_and_a_single_server_is_not() -> None:
    from loom_core.doctor import stream_health
    from nats.js.api import ClusterInfo, PeerInfo

    assert stream_health(None) == ""
    assert stream_health(ClusterInfo(leader="n1")) == ""  # one server: a leader of no cluster
    assert "no leader" in stream_health(ClusterInfo(name="c", leader=None))
    silent = 60 * 1_000_000_000
    behind = ClusterInfo(
        name="c", leader="n1", replicas=[PeerInfo(name="n2", current=False, active=silent), PeerInfo(name="n3", current=True)]
    )
    assert stream_health(behind) == "replicas offline or behind: n2"
    catching_up = ClusterInfo(name="c", leader="n1", replicas=[PeerInfo(name="n2", current=False, active=2_000_000, lag=1)])
    assert stream_health(catching_up) == ""
    assert "n3" in stream_health(ClusterInfo(name="c", leader="n1", replicas=[PeerInfo(name="n3", current=False, offline=True)]))
    assert stream_health(ClusterInfo(name="c", leader="n1", replicas=[PeerInfo(name="n2", current=True)])) == ""


@pytest.mark.slow  # starts a three-node nats-server cluster
async def test_a_nats_cluster_that_lost_quorum_is_a_fault_naming_it(store: EmbeddedStore, tmp_path: Path) -> None:
    """Three real nats-servers in one JetStream cluster holding Loom's leases bucket with three
    replicas: healthy, then with two of them stopped (no leader for the bucket's stream). The
    checks read the bus and the store, not a door: once, not once a transport."""
    import asyncio
    import shutil
    import signal
    import sys

    binary = shutil.which("nats-server") or str(Path(sys.executable).parent / "nats-server")
    procs: list[asyncio.subprocess.Process] = []

    async def start_cluster(attempt: int) -> list[int]:
        """Three nodes on fresh ports; their client ports."""
        client, route = [free_port() for _ in range(3)], [free_port() for _ in range(3)]
        routes = ",".join(f"nats://127.0.0.1:{p}" for p in route)
        procs[:] = [
            await asyncio.create_subprocess_exec(
                binary, "-a", "127.0.0.1", "-p", str(client[i]), "-js", "-sd", str(tmp_path / f"a{attempt}n{i}"), "-n", f"n{i}",
                "--cluster_name", "doctor-qc", "--cluster", f"nats://127.0.0.1:{route[i]}", "--routes", routes,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )
            for i in range(3)
        ]  # fmt: skip
        return client

    try:
        bus = None
        # free_port's port is free when asked, not when the node binds it: another worker's server
        # can take it first, and the node exits at once (the suite failed once with the first
        # node refusing connections for 20 s). A cluster with a node gone is started again on
        # fresh ports.
        for attempt in range(3):
            client = await start_cluster(attempt)
            settings = make_settings(tmp_path, nats_url=f"nats://127.0.0.1:{client[0]}")
            for _ in range(100):  # the cluster forms and elects its JetStream leader
                if any(p.returncode is not None for p in procs):
                    break  # a node could not bind its ports
                bus, _problem = await _connect_nats(settings)
                if bus is not None:
                    try:
                        await bus.js.create_key_value(bucket="loom_leases", replicas=3)
                        break
                    except Exception:  # noqa: BLE001 - JetStream not ready yet
                        await bus.nc.close()
                        bus = None
                await asyncio.sleep(0.2)
            if bus is not None:
                break
            for p in procs:
                if p.returncode is None:
                    p.kill()
                await p.wait()
        assert bus is not None, "the three-node cluster never took the bucket"
        try:
            found = by_name(await run_checks(DoctorContext(settings, store, bus)))
            assert found["nats.quorum"].verdict == Verdict.OK, found["nats.quorum"]
            for p in procs[1:]:
                p.send_signal(signal.SIGTERM)
                await p.wait()
            found = by_name(await run_checks(DoctorContext(settings, store, bus)))
        finally:
            await bus.nc.close()
        quorum = found["nats.quorum"]
        assert (quorum.verdict, quorum.fault) == (Verdict.FAULT, "nats-quorum"), quorum
        assert "no leader" in quorum.summary or "offline" in quorum.summary
        assert found["nats.stream.KV_loom_leases"].verdict in (Verdict.FAULT, Verdict.UNCHECKED)
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
