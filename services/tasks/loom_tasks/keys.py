"""Per-task lease rows: one NATS KV key per task, written only by compare-and-set.

ClickHouse has no transactions, so every change of a task is serialised on its key
(`t.<org>.<task_id>` in bucket `loom_tasks`): a writer reads the key, works out the next row,
and installs the next key value at the revision it read; a writer that lost the race reads
again. Only then is the row written. The key's value says:

    state   idle (todo, triage: claimable when todo) | held (in_progress) | parked (any other)
    v       the task row's version that is, or is being, written
    status  the task's status at v
    held:   holder, agent, expires_at, lease_seconds, fence

`v` is what makes the store's row trustworthy without a transaction: a writer always writes
version v+1 over a row it has seen at version v, and a candidate row whose version is the key's
`v` is known current, so a claim needs no second store read. The fence of a claim is the KV
revision of the write that took the key to `held` (revisions only grow, bucket-wide, so no
two claims ever share a fence); later writes of a held key (heartbeats, task.update) carry it in
the value. A finished task's key is written with a TTL and goes by itself.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.errors
from loom_core.bus import Bus
from loom_core.errors import Unavailable
from nats.js.api import KeyValueConfig, StorageType

BUCKET = "loom_tasks"
STREAM = f"KV_{BUCKET}"
_PRE = f"$KV.{BUCKET}."
_KV_OP = "KV-Operation"
_EXPECTED_LAST = "Nats-Expected-Last-Subject-Sequence"
_WRONG_LAST = (10071, 10164)

IDLE = "idle"
HELD = "held"
PARKED = "parked"


class KeyRace(Exception):
    """The key moved since it was read (or exists, for a create): read again."""


@dataclass(slots=True)
class KeyState:
    state: str
    v: int
    status: str
    revision: int
    holder: str = ""
    agent: str = ""
    expires_at: float = 0.0
    lease_seconds: int = 0
    fence: int = 0
    at: float = 0.0

    @property
    def expired(self) -> bool:
        return self.state == HELD and time.time() >= self.expires_at


def key_of(org: str, task_id: str) -> str:
    return f"t.{org}.{task_id}"


def split_key(key: str) -> tuple[str, str] | None:
    parts = key.split(".")
    if len(parts) != 3 or parts[0] != "t":
        return None
    return parts[1], parts[2]


def idle(v: int, status: str) -> dict[str, Any]:
    return {"state": IDLE, "v": v, "status": status, "at": time.time()}


def parked(v: int, status: str) -> dict[str, Any]:
    return {"state": PARKED, "v": v, "status": status, "at": time.time()}


def held(v: int, holder: str, agent: str, expires_at: float, lease_seconds: int, fence: int = 0) -> dict[str, Any]:
    value: dict[str, Any] = {
        "state": HELD,
        "v": v,
        "status": "in_progress",
        "holder": holder,
        "agent": agent,
        "expires_at": expires_at,
        "lease_seconds": lease_seconds,
        "at": time.time(),
    }
    if fence:
        value["fence"] = fence
    return value


def _state(data: bytes, revision: int) -> KeyState | None:
    try:
        d = json.loads(data)
    except ValueError:
        return None
    if not isinstance(d, dict) or "state" not in d:
        return None
    return state_of(d, revision)


def state_of(d: dict[str, Any], revision: int) -> KeyState:
    """A lease row's value (as written or read) at a revision."""
    return KeyState(
        state=str(d["state"]),
        v=int(d.get("v") or 0),
        status=str(d.get("status") or ""),
        revision=revision,
        holder=str(d.get("holder") or ""),
        agent=str(d.get("agent") or ""),
        expires_at=float(d.get("expires_at") or 0.0),
        lease_seconds=int(d.get("lease_seconds") or 0),
        # The claim's own write holds no fence field: its revision is the fence.
        fence=int(d.get("fence") or revision) if d.get("state") == HELD else 0,
        at=float(d.get("at") or 0.0),
    )


class TaskKeys:
    """The `loom_tasks` bucket: reads by direct get, writes by expected-last-sequence publish."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def ensure_bucket(self) -> None:
        # No bucket TTL: a todo task may wait for weeks. Per-key TTLs (finished tasks) are on.
        config = KeyValueConfig(bucket=BUCKET, history=1, storage=StorageType.FILE, direct=True)
        try:
            await self.bus.js.key_value(BUCKET)
        except Exception:  # noqa: BLE001 - absent: create it (another replica may race us)
            try:
                await self.bus.js.create_key_value(config)
            except Exception:  # noqa: BLE001
                await self.bus.js.key_value(BUCKET)

    async def _last(self, key: str) -> tuple[KeyState | None, int]:
        """(state, revision of the subject's last message) — state None when absent or deleted."""
        try:
            msg = await self.bus.js.get_msg(STREAM, subject=_PRE + key, direct=True)
        except nats.js.errors.NotFoundError:
            return None, 0
        except Exception as exc:
            raise Unavailable("BACKEND_UNAVAILABLE", "the lease store did not answer") from exc
        seq = int(msg.seq or 0)
        if msg.headers and msg.headers.get(_KV_OP) in ("DEL", "PURGE"):
            return None, seq
        if not msg.data:
            return None, seq
        return _state(msg.data, seq), seq

    async def get(self, org: str, task_id: str) -> KeyState | None:
        state, _ = await self._last(key_of(org, task_id))
        return state

    async def _publish(self, key: str, value: dict[str, Any] | None, last: int, ttl: float | None) -> int:
        headers = {_EXPECTED_LAST: str(last)}
        if value is None:
            headers[_KV_OP] = "DEL"
        try:
            ack = await self.bus.js.publish(
                _PRE + key, json.dumps(value, separators=(",", ":")).encode() if value is not None else b"", headers=headers, msg_ttl=ttl
            )
        except nats.js.errors.APIError as exc:
            if exc.err_code in _WRONG_LAST:
                raise KeyRace(key) from None
            raise Unavailable("BACKEND_UNAVAILABLE", "the lease store did not answer") from exc
        except Exception as exc:
            raise Unavailable("BACKEND_UNAVAILABLE", "the lease store did not answer") from exc
        return int(ack.seq)

    async def create(self, org: str, task_id: str, value: dict[str, Any], ttl: float | None = None) -> int:
        """Write the key if it is absent (over a delete marker too); KeyRace if it exists."""
        key = key_of(org, task_id)
        try:
            return await self._publish(key, value, 0, ttl)
        except KeyRace:
            state, seq = await self._last(key)
            if state is not None or seq == 0:
                raise
            return await self._publish(key, value, seq, ttl)

    async def update(self, org: str, task_id: str, value: dict[str, Any], last: int, ttl: float | None = None) -> int:
        """Write at revision `last` (the one read); KeyRace when the key moved."""
        return await self._publish(key_of(org, task_id), value, last, ttl)

    async def delete(self, org: str, task_id: str, last: int) -> None:
        await self._publish(key_of(org, task_id), None, last, None)

    async def scan(self) -> dict[tuple[str, str], KeyState]:
        """Every live key (the reconcile's view): one ordered consumer over the bucket."""
        kv = await self.bus.js.key_value(BUCKET)
        out: dict[tuple[str, str], KeyState] = {}
        try:
            watcher = await kv.watchall(ignore_deletes=True)
        except Exception as exc:
            raise Unavailable("BACKEND_UNAVAILABLE", "the lease store did not answer") from exc
        try:
            while True:
                try:
                    entry = await watcher.updates(timeout=5)
                except nats.errors.TimeoutError:
                    break
                if entry is None:  # the initial values are all delivered
                    break
                ids = split_key(entry.key)
                if ids is None or entry.value is None or entry.operation is not None:
                    continue
                state = _state(entry.value, entry.revision or 0)
                if state is not None:
                    out[ids] = state
        finally:
            await watcher.stop()
        return out
