"""Loom in cluster mode as separate OS processes, the way Compose runs it, on loopback:
a NATS cluster of real `nats-server` nodes (JetStream, Loom's accounts and auth callout from
deploy/nats/loom-accounts.conf), `loom serve` processes, and the `loom` CLI."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import nats
import nkeys
from loom_core.bus.natsserver import free_port, nats_server_binary

ROOT = Path(__file__).resolve().parents[2]
ACCOUNTS_CONF = ROOT / "deploy" / "nats" / "loom-accounts.conf"
LOOM = Path(sys.executable).parent / "loom"
SECRET = "cluster-test-secret-0123456789abcdef0123456789abcdef"
#: Tries at starting a NATS cluster, and how long a node that cannot bind its ports takes to exit.
START_ATTEMPTS = 3
BIND_SETTLE_SECONDS = 0.5


def account_seed() -> tuple[str, str]:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_ACCOUNT).decode()
    return seed, nkeys.from_seed(seed.encode()).public_key.decode()


@dataclass
class NatsNode:
    name: str
    port: int
    cluster_port: int
    monitor_port: int
    dir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


@dataclass
class NatsCluster:
    """`size` nats-server nodes in one cluster, each with JetStream and Loom's accounts."""

    base: Path
    size: int = 3
    env: dict[str, str] = field(default_factory=dict)
    nodes: list[NatsNode] = field(default_factory=list)
    # JetStream's sync_interval (`always`: fsync each write before its ack); empty: nats-server's default.
    sync_interval: str = ""

    @property
    def urls(self) -> str:
        return ",".join(n.url for n in self.nodes)

    def start(self) -> None:
        """Start the nodes. A port taken by another process between `free_port()` and the node's
        bind (the node exits at once: "address already in use") starts the cluster again on new
        ports, from empty store directories."""
        for attempt in range(START_ATTEMPTS):
            if attempt:
                for n in self.nodes:
                    shutil.rmtree(n.dir, ignore_errors=True)
            self._start_nodes()
            time.sleep(BIND_SETTLE_SECONDS)
            if all(n.proc is not None and n.proc.poll() is None for n in self.nodes):
                return
            self.stop()
        raise AssertionError(f"the NATS cluster did not start in {START_ATTEMPTS} attempts; see {self.base}/*/nats.log")

    def _start_nodes(self) -> None:
        self.nodes = [NatsNode(f"n{i + 1}", free_port(), free_port(), free_port(), self.base / f"n{i + 1}") for i in range(self.size)]
        routes = ", ".join(f"nats-route://127.0.0.1:{n.cluster_port}" for n in self.nodes)
        for n in self.nodes:
            n.dir.mkdir(parents=True, exist_ok=True)
            shutil.copy(ACCOUNTS_CONF, n.dir / "loom-accounts.conf")  # the file Compose and the docs ship
            (n.dir / "node.conf").write_text(
                f"server_name: {n.name}\n"
                f"listen: 127.0.0.1:{n.port}\n"
                f"http: 127.0.0.1:{n.monitor_port}\n"
                f'jetstream {{ store_dir: "{n.dir / "js"}"{f", sync_interval: {self.sync_interval}" if self.sync_interval else ""} }}\n'
                + (f"cluster {{ name: loom, listen: 127.0.0.1:{n.cluster_port}, routes: [ {routes} ] }}\n" if self.size > 1 else "")
                + "include ./loom-accounts.conf\n"
            )
            log = open(n.dir / "nats.log", "ab")  # noqa: SIM115 - handed to the child
            n.proc = subprocess.Popen(
                [nats_server_binary(), "-c", str(n.dir / "node.conf")], stdout=log, stderr=log, env={**os.environ, **self.env}
            )

    async def wait_ready(self, user: str, password: str, within: float = 30) -> None:
        """Until every node answers its JetStream health and the cluster has a meta leader."""
        deadline = time.monotonic() + within
        async with httpx.AsyncClient(timeout=2) as client:
            for n in self.nodes:
                while True:
                    try:
                        r = await client.get(f"http://127.0.0.1:{n.monitor_port}/healthz?js-enabled-only=true")
                        if r.status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if time.monotonic() > deadline:
                        raise AssertionError(f"nats node {n.name} not healthy; see {n.dir}/nats.log")
                    await asyncio.sleep(0.1)
        nc = await nats.connect(self.nodes[0].url, user=user, password=password)
        try:
            while True:
                try:
                    info = await nc.jetstream().account_info()
                    if info is not None:
                        return
                except Exception:  # noqa: BLE001 - no meta leader yet
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError("the NATS cluster elected no JetStream meta leader")
                await asyncio.sleep(0.2)
        finally:
            await nc.close()

    def connected_node(self, connection_name: str) -> NatsNode:
        """The node holding a client connection of this name (from each node's /connz)."""
        for n in self.nodes:
            if n.proc is None or n.proc.poll() is not None:
                continue
            r = httpx.get(f"http://127.0.0.1:{n.monitor_port}/connz?limit=1024&acc=LOOM", timeout=5)
            if any(c.get("name") == connection_name for c in r.json().get("connections") or []):
                return n
        raise AssertionError(f"no node holds connection {connection_name}")

    def stop(self) -> None:
        for n in self.nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.proc.send_signal(signal.SIGTERM)
                try:
                    n.proc.wait(10)
                except subprocess.TimeoutExpired:
                    n.kill()


@dataclass
class LoomProcess:
    """One `loom serve …` process; its stdout is kept in a file beside its data."""

    args: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        out = open(self.log, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen([str(LOOM), *self.args], stdout=out, stderr=subprocess.STDOUT, env=self.env)

    async def wait_line(self, pattern: str, within: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + within
        rx = re.compile(pattern, re.M)
        while True:
            text = self.log.read_text(errors="replace") if self.log.exists() else ""
            m = rx.search(text)
            if m:
                return m
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"{self.args} exited with {self.proc.returncode}:\n{text[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.args}: no line matching {pattern!r}:\n{text[-3000:]}")
            await asyncio.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def loom_env(base: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
    env.update({"LOOM_JWT_SECRET": SECRET, "LOOM_LOG_LEVEL": "WARNING", "LOOM_DATA_DIR": str(base)})
    env.update({f"LOOM_{k.upper()}": v for k, v in settings.items()})
    return env


def bootstrap(env: dict[str, str], org: str, namespace: str) -> dict[str, str]:
    """`loom admin bootstrap` on the data dir, before any server holds it (chDB: one process)."""
    out = subprocess.run(
        [str(LOOM), "admin", "bootstrap", "--org", org, "--namespace", namespace, "--json"],
        env=env,
        capture_output=True,
        check=True,
        timeout=120,
    )
    return dict(json.loads(out.stdout))
