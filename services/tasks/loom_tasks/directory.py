"""Inboxes and trust rows as every op reads them: cached per replica, dropped on change.

A change (inbox.register, inbox.policy_set) drops the local entries at once and tells every
replica over NATS (`loom.task_config.<org>`, read by consumers/pushes.py on the runtime's
FastStream broker, consumers/layout.py CONFIG, which calls `Directory.dropped`); entries also age out after
LOOM_TASK_CONFIG_CACHE_TTL_SECONDS, in case a notice is lost. Also the webhook deliverer's
lookup (`webhook_for(org, inbox)`, `has_webhook(org, inbox)`, `webhook_inboxes()`), and what it
hears of changes (`on_change`: a change made here is awaited by the op that made it; another
replica's notice runs the listeners in the background; each is told the (org, inbox) changed,
or None when a notice could not be read).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, TypeVar

from loom_core.bus import Bus

from .domain.model import InboxRow, PolicyRow
from .events import config_subject
from .store import InboxStore

T = TypeVar("T")
# A change listener, told the (org, inbox) that changed; None: unknown (an unreadable notice).
ChangeListener: TypeAlias = Callable[[tuple[str, str] | None], Awaitable[Any]]

log = logging.getLogger(__name__)


class Directory:
    def __init__(self, inboxes: InboxStore, bus: Bus | None, ttl: float) -> None:
        self.inboxes = inboxes
        self.bus = bus
        self.ttl = ttl
        self._inbox: dict[tuple[str, str], tuple[float, InboxRow | None]] = {}
        self._policies: dict[tuple[str, str], tuple[float, list[PolicyRow]]] = {}
        self._flights: dict[tuple[str, str, str], asyncio.Future[Any]] = {}
        self._listeners: list[ChangeListener] = []
        self._background: set[asyncio.Task[Any]] = set()

    def on_change(self, listener: ChangeListener) -> None:
        """Call `listener` after every inbox change, here or on another replica."""
        self._listeners.append(listener)

    async def _tell_listeners(self, changed: tuple[str, str] | None) -> None:
        for listener in self._listeners:
            try:
                await listener(changed)
            except Exception as exc:  # noqa: BLE001 - a listener's failure is not the change's
                log.warning("directory: a change listener failed: %s", type(exc).__name__)

    async def inbox(self, org: str, name: str) -> InboxRow | None:
        key = (org, name)
        hit = self._inbox.get(key)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        return await self._load(("inbox", org, name), lambda: self.inboxes.get(org, name), self._inbox, key)

    async def policies(self, org: str, inbox: str) -> list[PolicyRow]:
        key = (org, inbox)
        hit = self._policies.get(key)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        return await self._load(("policies", org, inbox), lambda: self.inboxes.policies(org, inbox), self._policies, key)

    async def _load(
        self,
        flight: tuple[str, str, str],
        fetch: Callable[[], Awaitable[T]],
        cache: dict[tuple[str, str], tuple[float, T]],
        key: tuple[str, str],
    ) -> T:
        """One store read per entry at a time: concurrent misses share it."""
        pending = self._flights.get(flight)
        if pending is None:
            pending = asyncio.ensure_future(fetch())
            self._flights[flight] = pending
            try:
                value: T = await pending
                cache[key] = (time.monotonic() + self.ttl, value)
                return value
            finally:
                self._flights.pop(flight, None)
        shared: T = await asyncio.shield(pending)
        return shared

    async def changed(self, org: str, inbox: str) -> None:
        """Drop the entries here and on every replica; this replica's listeners run before it returns."""
        self._forget(org, inbox)
        if self.bus is not None:
            with contextlib.suppress(Exception):
                await self.bus.nc.publish(config_subject(org), json.dumps({"org": org, "inbox": inbox}).encode())
        await self._tell_listeners((org, inbox))

    def _forget(self, org: str, inbox: str) -> None:
        self._inbox.pop((org, inbox), None)
        self._policies.pop((org, inbox), None)

    def dropped(self, data: bytes) -> None:
        """Another replica's `changed` notice (an unreadable one drops everything)."""
        changed: tuple[str, str] | None
        try:
            d: dict[str, Any] = json.loads(data)
            changed = (str(d["org"]), str(d["inbox"]))
            self._forget(*changed)
        except (ValueError, KeyError, TypeError):
            changed = None
            self._inbox.clear()
            self._policies.clear()
        if self._listeners:
            task = asyncio.create_task(self._tell_listeners(changed))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    # --- the webhook deliverer's lookup

    async def webhook_for(self, org: str, inbox: str) -> tuple[str, str] | None:
        row = await self.inbox(org, inbox)
        if row is None or not row.webhook_url:
            return None
        return row.webhook_url, row.webhook_secret_ref

    async def has_webhook(self, org: str, inbox: str) -> bool:
        """Whether the store holds a webhook for the inbox now (not this replica's cache)."""
        row = await self.inboxes.get(org, inbox)
        return row is not None and bool(row.webhook_url)

    async def webhook_inboxes(self) -> list[tuple[str, str]]:
        return await self.inboxes.with_webhooks()
