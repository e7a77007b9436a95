"""The operator CLI as a user runs it: `loom admin bootstrap` with and without `loom up` on the
same data dir, Ctrl-C stopping `loom up` cleanly, and a restart keeping everything."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from loom_core.bus.natsserver import free_port
from loom_core.identity.tokens import TokenCodec

pytestmark = pytest.mark.slow

LOOM = str(Path(sys.executable).parent / "loom")
ROOT = Path(__file__).resolve().parents[2]
SECRET = "cli-test-secret-0123456789abcdef0123456789"


@dataclass
class DataDir:
    path: Path
    port: int
    secret: str | None = SECRET  # None: LOOM_JWT_SECRET unset

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
        env.update(LOOM_DATA_DIR=str(self.path), LOOM_HTTP_PORT=str(self.port), LOOM_LOG_LEVEL="WARNING")
        env.update(extra)
        if self.secret is not None:
            env["LOOM_JWT_SECRET"] = self.secret
        return env

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> DataDir:
    return DataDir(tmp_path_factory.mktemp("loom-cli"), free_port())


async def bootstrap(d: DataDir, org: str, namespace: str, *extra: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        LOOM,
        "admin",
        "bootstrap",
        "--org",
        org,
        "--namespace",
        namespace,
        *extra,
        env=d.env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().strip().splitlines()
    assert len(lines) == 1, out  # the bare token and nothing else, so $(loom admin bootstrap …) works
    return lines[0]


@dataclass
class Up:
    proc: asyncio.subprocess.Process
    data: DataDir

    async def stop(self, timeout: float = 30.0) -> tuple[int, float]:  # noqa: ASYNC109 - a bound on the child's exit
        started = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(self.proc.wait(), timeout=timeout)
        return code, time.monotonic() - started


@contextlib.asynccontextmanager
async def loom_up(d: DataDir, stdout: Path | None = None, *, log_too: bool = False) -> AsyncIterator[Up]:
    """`loom up` on `d`, once it answers /v1/health; its standard output into `stdout` if given,
    and with `log_too` its log too (standard error), at INFO."""
    out = stdout.open("wb") if stdout is not None else None
    proc = await asyncio.create_subprocess_exec(
        LOOM,
        "up",
        env=d.env(LOOM_LOG_LEVEL="INFO") if log_too else d.env(),
        stdout=out or asyncio.subprocess.DEVNULL,
        stderr=out if log_too and out is not None else asyncio.subprocess.PIPE,
    )
    if out is not None:
        out.close()  # the child holds its own copy
    up = Up(proc, d)
    try:
        deadline = time.monotonic() + 90  # a bound on failure: a loaded machine starts slowly
        async with httpx.AsyncClient(base_url=d.base_url) as c:
            while True:
                if proc.returncode is not None:
                    if proc.stderr is not None:
                        err = await proc.stderr.read()
                    else:  # its log went to `stdout`'s file
                        err = await asyncio.to_thread(stdout.read_bytes) if stdout is not None else b""
                    pytest.fail(f"loom up exited with {proc.returncode}: {err.decode()[-2000:]}")
                try:
                    # Up: answering, and its URL written for a second `loom up` to name.
                    if (await c.get("/v1/health", timeout=1)).status_code == 200 and (d.path / "loom-up.url").exists():
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail("loom up did not answer /v1/health within 90 s")
                await asyncio.sleep(0.1)
        yield up
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Live processes whose command line mentions `text` (a /proc scan; no psutil)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next((ln for ln in (entry / "status").read_text().splitlines() if ln.startswith("State:")), "")
        except OSError:
            continue
        if text in cmd and "Z (zombie)" not in state:
            found.append((int(entry.name), cmd))
    return found


async def whoami(d: DataDir, token: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=d.base_url, headers={"Authorization": f"Bearer {token}"}) as c:
        return await c.post("/v1/auth.whoami", json={})


async def test_bootstrap_without_a_server_prints_an_admin_token(fresh: DataDir) -> None:
    token = await bootstrap(fresh, "acme", "private")
    p = TokenCodec(SECRET).decode(token)
    assert (p.org, p.sub, p.roles, p.default_namespace) == ("acme", "user:admin", {"*": "admin"}, "private")
    assert (fresh.path / "chdb").is_dir()
    assert not (fresh.path / "admin.sock").exists()
    # The CLI left nothing running.
    assert processes_mentioning(str(fresh.path)) == []


# Two `loom up` starts and three CLI runs: on a loaded 2-core machine each start alone can take
# most of a minute, so this test's bound is wider than the suite's 120 s.
@pytest.mark.timeout(300)
async def test_up_serves_bootstrap_tokens_stops_cleanly_and_restarts_with_its_data(fresh: DataDir) -> None:
    # Bootstrapping an org that exists says so and how to mint another token, minting nothing.
    code, out = await run_cli(fresh, "admin", "bootstrap", "--org", "acme", "--namespace", "private")
    assert code != 0 and "exists already" in out and "--new-token" in out and "token.mint" in out, out
    assert "Traceback" not in out
    offline = await bootstrap(fresh, "acme", "private", "--new-token")

    async with loom_up(fresh) as up:
        # The token bootstrapped with no server running works against the server.
        r = await whoami(fresh, offline)
        assert r.status_code == 200, r.text
        assert r.json()["role"] == "admin"
        # Bootstrap while `loom up` holds the data dir (through its admin socket).
        assert (fresh.path / "admin.sock").exists()
        online = await bootstrap(fresh, "beta", "main")
        code, out = await run_cli(fresh, "admin", "bootstrap", "--org", "beta", "--namespace", "main")
        assert code != 0 and "exists already" in out and "Traceback" not in out, out
        r = await whoami(fresh, online)
        assert r.status_code == 200, r.text
        assert (r.json()["org"], r.json()["namespace"], r.json()["role"]) == ("beta", "main", "admin")
        nats_children = [cmd for _, cmd in processes_mentioning(str(fresh.path)) if "nats-server" in cmd]
        assert len(nats_children) == 1
        # A client stalled mid-request must not hold the shutdown up.
        _, stalled = await asyncio.open_connection("127.0.0.1", fresh.port)
        stalled.write(b"POST /v1/auth.whoami HTTP/1.1\r\nHost: loom\r\nContent-Length: 100\r\n\r\n{")
        await stalled.drain()
        await asyncio.sleep(0.2)
        # Ctrl-C: exits 0 and leaves no nats-server behind. The stalled client would hold a
        # graceful shutdown for as long as it stays open (past stop()'s bound); the stop must not wait for it.
        code, _ = await up.stop()
        stalled.close()
        assert code == 0
        assert processes_mentioning(str(fresh.path)) == []
        assert not (fresh.path / "admin.sock").exists()

    async with loom_up(fresh) as up:
        for token in (offline, online):
            r = await whoami(fresh, token)
            assert r.status_code == 200, r.text
        async with httpx.AsyncClient(base_url=fresh.base_url, headers={"Authorization": f"Bearer {online}"}) as c:
            names = [n["name"] for n in (await c.post("/v1/namespace.list", json={})).json()["namespaces"]]
        assert names == ["main"]
        code, _ = await up.stop()
        assert code == 0
        assert processes_mentioning(str(fresh.path)) == []


async def run_cli(d: DataDir, *args: str, **env: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        LOOM, *args, env=d.env(**env), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, (out + err).decode()


@pytest.mark.parametrize(
    ("secret", "says"), [("dev-insecure-change-me", "not set"), ("", "not set"), ("short-0123456789", "16 bytes, shorter than 32")]
)
async def test_serve_refuses_the_default_or_a_short_secret_and_says_how_to_set_one(tmp_path: Path, secret: str, says: str) -> None:
    d = DataDir(tmp_path, free_port(), secret=secret)
    code, out = await run_cli(
        d, "serve", "--planes", "tasks", LOOM_CLICKHOUSE_URL="clickhouse://127.0.0.1:1/loom", LOOM_NATS_URL="nats://127.0.0.1:1"
    )
    assert code != 0
    assert says in out
    assert "set LOOM_JWT_SECRET to at least 32 random bytes" in out


async def test_up_refuses_a_short_secret_set_in_the_environment(tmp_path: Path) -> None:
    d = DataDir(tmp_path, free_port(), secret="too-short")
    code, out = await run_cli(d, "up")
    assert code != 0
    assert "LOOM_JWT_SECRET is 9 bytes" in out


async def test_up_on_a_port_in_use_says_so_and_exits_1_leaving_no_child(tmp_path: Path) -> None:
    """uvicorn ends a failed start with sys.exit, which left the event loop past every cleanup:
    `loom up` then hung, or died with SIGSEGV in chDB's teardown, about half the time."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        d = DataDir(tmp_path, taken.getsockname()[1])
        proc = await asyncio.create_subprocess_exec(
            LOOM, "up", env=d.env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        try:
            out = (await asyncio.wait_for(proc.communicate(), timeout=90))[0].decode()  # a bound on failure (a hang)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 1, out
    assert f"loom up: could not serve HTTP on 127.0.0.1:{d.port}" in out
    assert "Traceback" not in out
    assert nats_children_of(d) == []
    assert not (d.path / "loom-up.pid").exists()


@pytest.mark.parametrize("argv", [["up"], ["serve", "--planes", "tasks"]])
def test_server_commands_run_with_the_server_gc_settings(argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`loom up` and `loom serve` collect garbage at core's server thresholds (loom_core/process.py);
    the command's server itself is not started here (its loop runner is replaced)."""
    import gc

    import uvloop
    from loom_core.process import SERVER_GC_THRESHOLDS
    from loom_runner import cli

    ran: list[str] = []

    def run(coro: object) -> int:
        ran.append(getattr(coro, "__name__", ""))
        coro.close()  # type: ignore[attr-defined]
        return 0

    monkeypatch.setattr(uvloop, "run", run)  # the module the command imports when it runs
    monkeypatch.setenv("LOOM_DATA_DIR", str(tmp_path))
    before = gc.get_threshold()
    try:
        assert cli.main(argv) == 0
        assert gc.get_threshold() == SERVER_GC_THRESHOLDS
    finally:
        gc.set_threshold(*before)
    assert ran == ["_up" if argv[0] == "up" else "_serve"]


def nats_children_of(d: DataDir) -> list[str]:
    return [cmd for _, cmd in processes_mentioning(str(d.path)) if "nats-server" in cmd]


@dataclass
class Held:
    """A `loom up` serving its data dir, its standard output and its log (INFO) in `banner`. The data dir is fresh
    and LOOM_JWT_SECRET unset: `offline`, bootstrapped before the start, created the data dir's
    secrets (`secrets`, as the file read then) and `loom up` runs on them."""

    up: Up
    banner: Path
    offline: str
    secrets: dict[str, str]


@pytest.fixture(scope="module")
async def held(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Held]:
    """One `loom up` for the tests that only need one serving (a `loom up` start is ~5-8 CPU-s)."""
    tmp = tmp_path_factory.mktemp("loom-held")
    d = DataDir(tmp / "data", free_port(), secret=None)
    offline = await bootstrap(d, "acme", "private")  # creates the data dir's secrets
    secrets = json.loads((d.path / "secrets.json").read_text())
    async with loom_up(d, stdout=tmp / "banner.txt", log_too=True) as up:
        yield Held(up, tmp / "banner.txt", offline, secrets)


@pytest.mark.timeout(300)  # the module's `loom up` starts in this test's setup
async def test_up_on_a_fresh_data_dir_generates_its_secrets_once_mode_0600_and_reuses_them(held: Held) -> None:
    d, stored = held.up.data, held.secrets
    path = d.path / "secrets.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(stored["jwt_secret"].encode()) >= 32
    assert stored["nats_internal_password"] and stored["nats_auth_callout_issuer_seed"].startswith("SA")
    assert TokenCodec(stored["jwt_secret"]).decode(held.offline).org == "acme"
    r = await whoami(d, held.offline)  # `loom up` signs and verifies with the same key
    assert r.status_code == 200, r.text
    assert json.loads(path.read_text()) == stored  # and after its stop: test_up_stops_on_ctrl_c_…


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["venv", "script"])
async def test_a_second_up_on_the_same_data_dir_says_so_at_once_and_keeps_the_pid_file(held: Held, how: str) -> None:
    up, d = held.up, held.up.data
    pid_before = (d.path / "loom-up.pid").read_text()
    assert pid_before.strip() == str(up.proc.pid)
    second = DataDir(d.path, free_port(), secret=d.secret)  # another port, the same data dir
    command = [LOOM, "up"] if how == "venv" else [str(ROOT / "loom"), "up"]
    proc = await asyncio.create_subprocess_exec(*command, env=second.env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)  # a bound on failure: it must not hang
    text = (out + err).decode()
    assert proc.returncode != 0
    assert "already running" in text and f"pid {up.proc.pid}" in text and d.base_url in text and f"kill {up.proc.pid}" in text, text
    assert "Traceback" not in text
    assert (d.path / "loom-up.pid").read_text() == pid_before
    assert (await whoami(d, await bootstrap(d, f"acme-{how}", "private"))).status_code == 200  # the first one still serves
    # A command that needs the store it holds: served through its admin socket, or refused in one line.
    code, printed = await run_cli(d, "ch-setup", "--print-analyst-sql")
    assert code == 0 and "loom_analyst" in printed and "Traceback" not in printed, printed[-2000:]
    code, refused = await run_cli(d, "secrets", "reseal")
    assert code != 0 and "a running Loom holds" in refused and f"kill {up.proc.pid}" in refused, refused
    assert "Traceback" not in refused and len(refused.strip().splitlines()) == 1, refused


@pytest.mark.timeout(300)
async def test_up_stops_on_ctrl_c_and_its_banner_says_the_policy_mode(held: Held) -> None:
    await wait_for_text(held.banner, "loom: up.", held.up.proc)
    code, _ = await held.up.stop()
    assert code == 0
    # Ctrl-C while serving: the serving phase of test_up_stops_on_a_signal_in_every_phase_… for SIGINT.
    assert_stopped_cleanly(held.up.data, held.banner.read_text())
    assert json.loads((held.up.data.path / "secrets.json").read_text()) == held.secrets  # reused, not made again
    # The banner says the policy mode (LOOM_POLICY_MODE, off by default) and what it means.
    assert re.search(r"policy mode\s+off: rules are stored but not evaluated", held.banner.read_text()), held.banner.read_text()


def text_of(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def wait_for_text(path: Path, text: str, proc: asyncio.subprocess.Process) -> None:
    for _ in range(900):  # a bound on failure
        if text in text_of(path):
            return
        assert proc.returncode is None, text_of(path)
        await asyncio.sleep(0.1)
    raise AssertionError(f"{text!r} never appeared: {text_of(path)}")


# SIGINT while serving is the module's `held` `loom up`'s stop (test_up_stops_on_ctrl_c_…): a start fewer.
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("phase", "sig"),
    [
        ("waiting for the data dir", signal.SIGINT),
        ("waiting for the data dir", signal.SIGTERM),
        ("starting", signal.SIGINT),
        ("starting", signal.SIGTERM),
        ("serving", signal.SIGTERM),
    ],
)
async def test_up_stops_on_a_signal_in_every_phase_leaving_no_child(tmp_path: Path, sig: signal.Signals, phase: str) -> None:
    from loom_core.data_dir import server_lock

    d = DataDir(tmp_path / "data", free_port())
    held = server_lock(d.path, wait=False) if phase == "waiting for the data dir" else None  # another command holds it
    log = tmp_path / "up.txt"
    env = {**d.env(), "LOOM_LOG_LEVEL": "INFO"}  # every line a healthy start writes
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(LOOM, "up", env=env, stdout=out, stderr=out)
    try:
        if phase == "waiting for the data dir":
            await wait_for_text(log, "waiting for another loom command", proc)
        elif phase == "starting":
            for _ in range(600):  # the nats-server child is up; the planes are still starting
                if nats_children_of(d) or proc.returncode is not None:
                    break
                await asyncio.sleep(0.05)
        else:
            await wait_for_text(log, "loom: up.", proc)
        started = time.monotonic()
        proc.send_signal(sig)
        code = await asyncio.wait_for(proc.wait(), timeout=60)  # a bound on failure, not the measure
        print(f"{phase} {sig.name}: exited {code} after {time.monotonic() - started:.2f} s")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        if held is not None:
            held.close()
    text = log.read_text()
    assert code == 0, text
    assert_stopped_cleanly(d, text)


def assert_stopped_cleanly(d: DataDir, text: str) -> None:
    """A `loom up` that stopped on a signal: its output `text` (log at INFO) without a traceback
    or anything that looks like an error, no nats-server child left, its pid file gone."""
    assert "Traceback" not in text, text
    # A healthy start and stop logs nothing that looks like an error.
    alarming = re.compile(r"error|fail|cannot|can't|unable|WARNING|ERROR|CRITICAL|None$", re.I)
    assert [line for line in text.splitlines() if alarming.search(line)] == []
    assert nats_children_of(d) == []
    assert not (d.path / "loom-up.pid").exists()


async def test_bootstrap_says_what_it_waits_for(tmp_path: Path) -> None:
    d = DataDir(tmp_path / "data", free_port())
    d.path.mkdir()
    # A server is starting here (its pid file names a live process) and has no admin socket yet.
    sleeper = await asyncio.create_subprocess_exec("sleep", "60")
    (d.path / "loom-up.pid").write_text(str(sleeper.pid))
    proc = await asyncio.create_subprocess_exec(
        LOOM, "admin", "bootstrap", "--org", "acme", "--namespace", "private", env=d.env(), stderr=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), timeout=60)).decode()
    finally:
        proc.kill()
        await proc.wait()
        sleeper.kill()
        await sleeper.wait()
    assert "waiting for the server starting on" in line and "admin socket" in line, line


async def test_loom_ops_prints_a_table_by_group(tmp_path: Path) -> None:
    from loom_core.catalog import load_catalog

    d = DataDir(tmp_path, free_port())
    code, out = await run_cli(d, "ops", "--group", "task")
    assert code == 0, out
    lines = out.strip().splitlines()
    assert lines[0].split()[:4] == ["OP", "ROLE", "WRITES", "LISTING"]
    names = [line.split()[0] for line in lines[1:]]
    assert names == [op.name for op in load_catalog().ops.values() if op.group == "task"]
    code, out = await run_cli(d, "ops")
    assert code == 0 and "help.search" in out and "experimental" in out
    code, out = await run_cli(d, "ops", "--group", "nope")
    assert code == 2 and "groups:" in out and "task" in out
