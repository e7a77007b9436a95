"""What a `loom up` leaves in its data dir for the other commands on it: the data dir's lock
(held for the server's life), its pid file, its gateway's URL and its admin socket. A command
that would open the embedded store itself asks `served_by` first: while a `loom up` holds the
store, the command goes through the admin socket or says in one line why it cannot."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

LOCK_FILE = "loom.lock"
PID_FILE = "loom-up.pid"
URL_FILE = "loom-up.url"
ADMIN_SOCKET = "admin.sock"


def server_lock(data_dir: Path, wait: bool) -> IO[bytes] | None:
    """The data dir's exclusive lock (released when the returned file closes, or the process
    ends); None when `wait` is false and another process holds it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    f = (data_dir.resolve() / LOCK_FILE).open("ab")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        f.close()
        return None
    return f


def running_pid(data_dir: Path) -> int | None:
    """The pid of another live `loom up` on this data dir (its pid file names it), else None."""
    try:
        pid = int((data_dir / PID_FILE).read_text().strip())
        if pid == os.getpid():
            return None
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def socket_path(data_dir: Path) -> Path:
    return data_dir.resolve() / ADMIN_SOCKET


def served_by(data_dir: Path) -> str | None:
    """When a live `loom up` holds this data dir: who, where and how to stop it, in words."""
    pid = running_pid(data_dir)
    if pid is None:
        return None
    url_file = data_dir / URL_FILE
    url = url_file.read_text().strip() if url_file.exists() else "still starting"
    return f"Loom is running on {data_dir.resolve()} (pid {pid}, {url}); stop it with `kill {pid}` (or Ctrl-C where it runs)"
