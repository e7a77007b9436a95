"""SQL for inboxes and their trust rows (the store only: no rules here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loom_core.store import Store

from ..domain.model import InboxRow, PolicyRow

INBOXES = "{db}.task_inboxes"
POLICIES = "{db}.task_policies"

_INBOX_SELECT = (
    "org, name, namespace, owner_agent, posters, accept_disclosure, default_lease_seconds, max_attempts, max_defers,"
    " triage_escalate_after_seconds, webhook_url, webhook_secret_ref, description,"
    " toUnixTimestamp64Micro(created_at) AS created_us, toUnixTimestamp64Micro(updated_at) AS updated_us, version"
)


def _inbox(r: dict[str, Any]) -> InboxRow:
    return InboxRow(
        org=r["org"],
        name=r["name"],
        namespace=r["namespace"],
        owner_agent=r["owner_agent"],
        posters=tuple(r["posters"]),
        accept_disclosure=tuple(r["accept_disclosure"]),
        default_lease_seconds=int(r["default_lease_seconds"]),
        max_attempts=int(r["max_attempts"]),
        max_defers=int(r["max_defers"]),
        triage_escalate_after_seconds=int(r["triage_escalate_after_seconds"]),
        webhook_url=r["webhook_url"],
        webhook_secret_ref=r["webhook_secret_ref"],
        description=r["description"],
        created_at=int(r["created_us"]) / 1_000_000,
        updated_at=int(r["updated_us"]) / 1_000_000,
        version=int(r["version"]),
    )


@dataclass(slots=True)
class InboxStore:
    store: Store

    async def get(self, org: str, name: str) -> InboxRow | None:
        rows = await self.store.query(
            f"SELECT {_INBOX_SELECT} FROM {INBOXES} FINAL WHERE org = {{org:String}} AND name = {{name:String}} AND tombstoned_at IS NULL",
            {"org": org, "name": name},
        )
        return _inbox(rows[0]) if rows else None

    async def in_namespace(self, org: str, namespace: str) -> list[InboxRow]:
        rows = await self.store.query(
            f"SELECT {_INBOX_SELECT} FROM {INBOXES} FINAL WHERE org = {{org:String}} AND namespace = {{ns:String}}"
            " AND tombstoned_at IS NULL ORDER BY name",
            {"org": org, "ns": namespace},
        )
        return [_inbox(r) for r in rows]

    async def with_webhooks(self) -> list[tuple[str, str]]:
        """(org, inbox) of every inbox that has a webhook, across orgs (the webhook consumer's filter)."""
        rows = await self.store.query(
            f"SELECT org, name FROM {INBOXES} FINAL WHERE webhook_url != {{none:String}} AND tombstoned_at IS NULL",
            {"none": ""},
        )
        return [(r["org"], r["name"]) for r in rows]

    async def put(self, row: InboxRow) -> None:
        await self.store.insert(
            INBOXES,
            [
                {
                    "org": row.org,
                    "name": row.name,
                    "namespace": row.namespace,
                    "owner_agent": row.owner_agent,
                    "posters": list(row.posters),
                    "accept_disclosure": list(row.accept_disclosure),
                    "default_lease_seconds": row.default_lease_seconds,
                    "max_attempts": row.max_attempts,
                    "max_defers": row.max_defers,
                    "triage_escalate_after_seconds": row.triage_escalate_after_seconds,
                    "webhook_url": row.webhook_url,
                    "webhook_secret_ref": row.webhook_secret_ref,
                    "description": row.description,
                    "created_at": row.created_at,
                    "updated_at": row.updated_at,
                    "version": row.version,
                    "tombstoned_at": None,
                }
            ],
        )

    async def policies(self, org: str, inbox: str) -> list[PolicyRow]:
        rows = await self.store.query(
            f"SELECT inbox, poster, kind, mode, require_evidence, toUnixTimestamp64Micro(updated_at) AS updated_us, updated_by"
            f" FROM {POLICIES} FINAL WHERE org = {{org:String}} AND inbox = {{inbox:String}} AND removed = 0"
            " ORDER BY poster, kind",
            {"org": org, "inbox": inbox},
        )
        return [
            PolicyRow(
                r["inbox"],
                r["poster"],
                r["kind"],
                r["mode"],
                tuple(r["require_evidence"]),
                int(r["updated_us"]) / 1_000_000,
                r["updated_by"],
            )
            for r in rows
        ]

    async def put_policy(self, org: str, row: PolicyRow, *, removed: bool, version: int) -> None:
        await self.store.insert(
            POLICIES,
            [
                {
                    "org": org,
                    "inbox": row.inbox,
                    "poster": row.poster,
                    "kind": row.kind,
                    "mode": row.mode,
                    "require_evidence": list(row.require_evidence),
                    "updated_at": row.updated_at,
                    "updated_by": row.updated_by,
                    "removed": 1 if removed else 0,
                    "version": version,
                }
            ],
        )
