"""policy_rules: one row per (org, namespace, name) and version; a delete is a tombstone."""

from __future__ import annotations

import json
import time
from typing import Any, TypedDict

from loom_core.store import Store, ch_time, query_as

_COLUMNS = "org, namespace, name, effect, actions, condition, description, mode, leaf_count, updated_by, toString(updated_at) AS updated_at, version"


class RuleSpec(TypedDict):
    """A rule as written (policy.set, or proposed to policy.check / policy.replay)."""

    name: str
    effect: str
    actions: list[str]
    # The rule's condition tree: free-form JSON the parser validates (None: not given).
    condition: Any
    description: str
    mode: str


class RuleRow(TypedDict):
    """A live policy_rules row as _COLUMNS reads it (the condition as JSON text)."""

    org: str
    namespace: str
    name: str
    effect: str
    actions: list[str]
    condition: str
    description: str
    mode: str
    leaf_count: int
    updated_by: str
    updated_at: str
    version: int


class WrittenRuleRow(RuleRow):
    """A row as written: a tombstone carries when the rule was deleted."""

    tombstoned_at: str | None


class RuleStore:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._last_version = 0

    def _version(self) -> int:
        # Monotonic in this process even if two writes land in one microsecond.
        self._last_version = max(self._last_version + 1, int(time.time() * 1_000_000))
        return self._last_version

    async def all_live(self) -> list[RuleRow]:
        return await query_as(
            self.store,
            RuleRow,
            f"SELECT {_COLUMNS} FROM {{db}}.policy_rules FINAL WHERE tombstoned_at IS NULL ORDER BY org, namespace, name",
        )

    async def live_in(self, org: str, namespace: str) -> list[RuleRow]:
        return await query_as(
            self.store,
            RuleRow,
            f"SELECT {_COLUMNS} FROM {{db}}.policy_rules FINAL WHERE org = {{org:String}} AND namespace = {{ns:String}} AND tombstoned_at IS NULL ORDER BY name",
            {"org": org, "ns": namespace},
        )

    async def get(self, org: str, namespace: str, name: str) -> RuleRow | None:
        rows = await query_as(
            self.store,
            RuleRow,
            f"SELECT {_COLUMNS} FROM {{db}}.policy_rules FINAL WHERE org = {{org:String}} AND namespace = {{ns:String}} AND name = {{name:String}} AND tombstoned_at IS NULL",
            {"org": org, "ns": namespace, "name": name},
        )
        return rows[0] if rows else None

    async def put(self, org: str, namespace: str, rule: RuleSpec, leaf_count: int, by: str) -> WrittenRuleRow:
        row = WrittenRuleRow(
            org=org,
            namespace=namespace,
            name=rule["name"],
            effect=rule["effect"],
            actions=list(rule["actions"]),
            condition=json.dumps(rule["condition"], sort_keys=True, separators=(",", ":")),
            description=rule["description"],
            mode=rule["mode"],
            leaf_count=leaf_count,
            updated_by=by,
            updated_at=ch_time(),
            version=self._version(),
            tombstoned_at=None,
        )
        await self.store.insert("{db}.policy_rules", [row])
        return row

    async def tombstone(self, org: str, namespace: str, old: RuleRow, by: str) -> None:
        now = ch_time()
        row = WrittenRuleRow(**old, tombstoned_at=now)
        row["updated_by"], row["updated_at"], row["version"] = by, now, self._version()
        await self.store.insert("{db}.policy_rules", [row])
