"""The webhook delivery log: one row per attempt (SQL only)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from loom_core.store import Migration, Store, ch_time

TABLE = "{db}.task_webhook_deliveries"
MAX_LIST = 1000

MIGRATIONS: list[Migration] = [
    Migration(
        "tasks",
        "task_webhook_deliveries",
        """
        CREATE TABLE IF NOT EXISTS {db}.task_webhook_deliveries (
            org String, namespace String, inbox String,
            delivery_id String, attempt UInt16,
            attempted_at DateTime64(6, 'UTC'),
            outcome LowCardinality(String),
            status_code UInt16, error String,
            url String, address String,
            newest_seq UInt64, event_count UInt32,
            duration_ms Float64
        ) ENGINE = MergeTree ORDER BY (org, inbox, attempted_at)
        TTL toDateTime(attempted_at) + INTERVAL 30 DAY""",
    ),
]


@dataclass(slots=True)
class Attempt:
    """One delivery attempt as the log keeps it. `url` has no query or fragment (either may
    carry a receiver's token); `error` is a short reason code, never response text."""

    org: str
    namespace: str
    inbox: str
    delivery_id: str
    attempt: int
    outcome: str  # delivered | retrying | gave_up | refused
    status_code: int
    error: str
    url: str
    address: str
    newest_seq: int
    event_count: int
    duration_ms: float
    attempted_at: str = ""


async def record_attempt(store: Store, attempt: Attempt) -> None:
    row = asdict(attempt)
    row["attempted_at"] = attempt.attempted_at or ch_time()
    await store.insert(TABLE, [row])


async def list_deliveries(store: Store, org: str, inbox: str, limit: int = 100) -> list[Attempt]:
    """The inbox's newest delivery attempts first (the admin op inbox.deliveries)."""
    limit = max(1, min(int(limit), MAX_LIST))
    rows = await store.query(
        "SELECT delivery_id, attempt, toString(attempted_at) AS attempted_at, outcome, status_code, error,"
        " url, address, newest_seq, event_count, duration_ms, namespace, inbox"
        " FROM {db}.task_webhook_deliveries"
        " WHERE org = {org:String} AND inbox = {inbox:String}"
        " ORDER BY attempted_at DESC, attempt DESC LIMIT {limit:UInt32}",
        {"org": org, "inbox": inbox, "limit": limit},
    )
    return [
        Attempt(
            org=org,
            namespace=r["namespace"],
            inbox=r["inbox"],
            delivery_id=r["delivery_id"],
            attempt=int(r["attempt"]),
            outcome=r["outcome"],
            status_code=int(r["status_code"]),
            error=r["error"],
            url=r["url"],
            address=r["address"],
            newest_seq=int(r["newest_seq"]),  # UInt64: JSON text from the store
            event_count=int(r["event_count"]),
            duration_ms=float(r["duration_ms"]),
            attempted_at=r["attempted_at"],
        )
        for r in rows
    ]
