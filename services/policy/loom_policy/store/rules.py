"""policy_rules: one row per (org, namespace, name) and version; a delete is a tombstone."""

from __future__ import annotations

import json
import time
from typing import Any

from loom_core.store import Store, ch_time

_COLUMNS = "org, namespace, name, effect, actions, condition, description, mode, leaf_count, updated_by, toString(updated_at) AS updated_at, version"


class RuleStore:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._last_version = 0

    def _version(self) -> int:
        # Monotonic in this process even if two writes land in one microsecond.
        self._last_version = max(self._last_version + 1, int(time.time() * 1_000_000))
        return self._last_version

    async def all_live(self) -> list[dict[str, Any]]:
        return await self.store.query(
            f"SELECT {_COLUMNS} FROM {{db}}.policy_rules FINAL WHERE tombstoned_at IS NULL ORDER BY org, namespace, name"
        )

    async def live_in(self, org: str, namespace: str) -> list[dict[str, Any]]:
        return await self.store.query(
            f"SELECT {_COLUMNS} FROM {{db}}.policy_rules FINAL WHERE org = {{org:String}} AND namespace = {{ns:String}} AND tombstoned_at IS NULL ORDER BY name",
            {"org": org, "ns": namespace},
        )

    async def get(self, org: str, namespace: str, name: str) -> dict[str, Any] | None:
        rows = await self.store.query(
            f"SELECT {_COLUMNS} FROM {{db}}.policy_rules FINAL WHERE org = {{org:String}} AND namespace = {{ns:String}} AND name = {{name:String}} AND tombstoned_at IS NULL",
            {"org": org, "ns": namespace, "name": name},
        )
        return rows[0] if rows else None

    async def put(self, org: str, namespace: str, rule: dict[str, Any], by: str) -> dict[str, Any]:
        row = {
            "org": org,
            "namespace": namespace,
            "name": rule["name"],
            "effect": rule["effect"],
            "actions": list(rule["actions"]),
            "condition": json.dumps(rule["condition"], sort_keys=True, separators=(",", ":")),
            "description": rule.get("description", ""),
            "mode": rule.get("mode", "inherit"),
            "leaf_count": int(rule.get("leaf_count", 0)),
            "updated_by": by,
            "updated_at": ch_time(),
            "version": self._version(),
            "tombstoned_at": None,
        }
        await self.store.insert("{db}.policy_rules", [row])
        return row

    async def tombstone(self, org: str, namespace: str, old: dict[str, Any], by: str) -> None:
        now = ch_time()
        row = {**old, "updated_by": by, "updated_at": now, "version": self._version(), "tombstoned_at": now}
        await self.store.insert("{db}.policy_rules", [row])
