"""loom.assistant_service: one row holding the service user's email, the agent's id, the
definition's version and model, and one sealed value (password and API key together)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace

from loom_core.sealing import Sealer
from loom_core.store import Store, ch_time

PURPOSE = "loom.assistant_service"


@dataclass(frozen=True, slots=True)
class ServiceRow:
    email: str
    password: str
    api_key: str
    agent_id: str
    definition_version: int
    definition_model: str

    def but(self, **changes: object) -> ServiceRow:
        return replace(self, **changes)  # type: ignore[arg-type]


def sealer(secret: str, previous: str) -> Sealer:
    return Sealer(PURPOSE, secret, previous)


class ServiceRowStore:
    def __init__(self, store: Store, sealer: Sealer, table: str = "assistant_service") -> None:
        self.store = store
        self.sealer = sealer
        if not table.replace("_", "").isalnum():
            raise ValueError("table: letters, digits and _")
        self.table = "{db}." + table

    async def read_raw(self) -> dict[str, object] | None:
        rows = await self.store.query(
            f"SELECT email, sealed, agent_id, definition_version, definition_model FROM {self.table} FINAL WHERE id = 1"
            " SETTINGS select_sequential_consistency = 1",
            {},
        )
        return rows[0] if rows else None

    async def read(self) -> ServiceRow | None:
        """The row, opened (raises loom_core.sealing.SealError when no secret opens it)."""
        raw = await self.read_raw()
        if raw is None:
            return None
        secret = json.loads(self.sealer.open(str(raw["sealed"]), PURPOSE.encode()))
        return ServiceRow(
            email=str(raw["email"]),
            password=str(secret.get("password", "")),
            api_key=str(secret.get("api_key", "")),
            agent_id=str(raw["agent_id"]),
            definition_version=int(str(raw["definition_version"])),
            definition_model=str(raw["definition_model"]),
        )

    async def write(self, row: ServiceRow) -> None:
        sealed = self.sealer.seal(json.dumps({"password": row.password, "api_key": row.api_key}).encode(), PURPOSE.encode())
        await self._insert(row.email, sealed, bool(row.api_key), row)

    async def _insert(self, email: str, sealed: str, has_key: bool, row: ServiceRow | None, raw: dict[str, object] | None = None) -> None:
        src = raw or {}
        await self.store.insert(
            self.table,
            [
                {
                    "id": 1,
                    "email": email,
                    "sealed": sealed,
                    "has_key": has_key,
                    "agent_id": row.agent_id if row else str(src.get("agent_id", "")),
                    "definition_version": row.definition_version if row else int(str(src.get("definition_version", 0))),
                    "definition_model": row.definition_model if row else str(src.get("definition_model", "")),
                    "updated_at": ch_time(),
                    "version": time.time_ns() // 1000,
                }
            ],
        )

    async def exists(self) -> bool:
        rows = await self.store.query(f"EXISTS TABLE {self.table}", {})
        return bool(rows and int(next(iter(rows[0].values()))))

    async def reseal(self) -> int:
        """Rewrite the sealed value under the current secret; 1 when it was rewritten (0 when
        there is none, or no table: a store the assistant never set up)."""
        if not await self.exists():
            return 0
        raw = await self.read_raw()
        if raw is None or self.sealer.is_current(str(raw["sealed"])):
            return 0
        sealed = self.sealer.reseal(str(raw["sealed"]), PURPOSE.encode())
        has_key = bool(json.loads(self.sealer.open(sealed, PURPOSE.encode())).get("api_key"))
        await self._insert(str(raw["email"]), sealed, has_key, None, raw)
        return 1

    async def clear(self) -> None:
        await self.store.execute(f"TRUNCATE TABLE IF EXISTS {self.table}")
