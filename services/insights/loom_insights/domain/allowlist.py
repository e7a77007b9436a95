"""The allowlist: the one definition of what the analyst user can read.

Every table, column, comment and live predicate the analysis boundary knows is declared here,
and nothing else decides it: the column grants, the signed row policies, the chDB persona's
users.xml and the catalog `insights.catalog` answers are all generated from `ALLOWLIST`
(entities.py, persona.py, catalog.py). It holds metadata, never content: identifiers, kinds,
statuses, versions, timestamps, counts, op names and latencies. Titles, briefs, outcomes,
reasons, ledger arguments, rule texts and statement texts stay out.

Tables whose plane may be absent or whose schema is changing are declared `conditional`: the
tasks plane's `tasks` (one row per version) and `task_state` (the projection that replaces it),
the decisions plane's `memory_vectors`, and the spec's `memory` and `decision_records` shapes.
They are generated only when the table exists with every column the entry declares and, for a
`live` table, a Replacing engine (`present_tables`), so a deployment grants nothing on a table
it lacks, and the first write that sees the table writes a new entity set. The decisions
plane's `decision_records` today is a plain MergeTree of every version (status per version): no
row policy can hide a retired record's earlier versions there, so it stays out until it has a
live shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Shape = Literal["live", "events"]


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    comment: str


@dataclass(frozen=True, slots=True)
class Table:
    """One allowlisted table. `live` is the census live predicate over the table's own columns
    (empty: every row is live); the row policy carries it after FINAL."""

    name: str
    plane: str
    shape: Shape
    comment: str
    columns: tuple[Column, ...]
    live: str = ""
    org_column: str = "org"
    namespace_column: str = "namespace"
    conditional: bool = False

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def _c(name: str, type_: str, comment: str) -> Column:
    return Column(name, type_, comment)


_ORG = _c("org", "String", "The org the row belongs to (always the caller's own).")
_NS = _c("namespace", "String", "The namespace the row belongs to (one of the statement's namespaces).")
# Columns that several tables hold with the same meaning, declared once.
_TASK_ID = _c("task_id", "String", "The task's id.")
_INBOX = _c("inbox", "String", "The inbox the task is in.")
_KIND = _c("kind", "String", "The task kind the poster gave.")
_STATUS = _c("status", "String", "The task's status (queued, claimed, blocked, done, failed, cancelled, …).")
_PRIORITY = _c("priority", "Int32", "Priority (higher first).")
_DEADLINE = _c("deadline", "Nullable(DateTime64(6, 'UTC'))", "The poster's deadline, if any.")
_NOT_BEFORE = _c("not_before", "Nullable(DateTime64(6, 'UTC'))", "Hidden from pulls before this instant, if set.")
_POSTER = _c("poster", "String", "The poster's subject.")
_POSTED_AT = _c("created_at", "DateTime64(6, 'UTC')", "When the task was posted.")
_ROW_VERSION = _c("version", "UInt64", "The row version (the latest wins).")
_VERSION_WRITTEN = _c("updated_at", "DateTime64(6, 'UTC')", "When this version was written.")
_WRITE_SHAPED = _c("write_shaped", "Bool", "True for ops that change state.")

LEDGER = Table(
    name="agent_events",
    plane="core",
    shape="events",
    comment="The request ledger: one row per op call on any door. Argument text is not readable.",
    columns=(
        _c("ts", "DateTime64(6, 'UTC')", "When the call finished (UTC)."),
        _ORG,
        _NS,
        _c("subject", "String", "The token's subject (user:…, agent:…, service:…)."),
        _c("agent", "String", "The caller-chosen agent label (X-Loom-Agent)."),
        _c("op", "String", "The op called, e.g. task.create."),
        _c("transport", "String", "The door: rest, mcp, grpc or sdk."),
        _c("run_id", "String", "The run the caller labelled the call with."),
        _c("consumer", "String", "The token's consumer label."),
        _c("ok", "Bool", "True when the call succeeded."),
        _c("error_code", "String", "The error code of a refused or failed call; empty when ok."),
        _c("latency_ms", "Float64", "Server-side latency of the call in milliseconds."),
        _c("out_hits", "Int64", "How many items the answer returned (rows, tasks, hits)."),
        _c("request_id", "String", "The request id (X-Loom-Request-Id or generated)."),
        _WRITE_SHAPED,
    ),
)

TASKS = Table(
    name="tasks",
    plane="tasks",
    shape="live",
    comment="Tasks: one row per version; read FINAL (forced) so each task_id shows its latest version.",
    columns=(
        _ORG,
        _TASK_ID,
        _INBOX,
        _NS,
        _c("owner_agent", "String", "The agent owning the inbox."),
        _KIND,
        _c("disclosure", "String", "The disclosure level the task was posted under."),
        _PRIORITY,
        _DEADLINE,
        _NOT_BEFORE,
        _c("origin", "String", "Where the task came from (api, webhook, …)."),
        _c("parent_task_id", "String", "The task this one was split from, if any."),
        _POSTER,
        _c("poster_agent", "String", "The poster's agent label."),
        _c("poster_namespace", "String", "The namespace the poster posted from."),
        _STATUS,
        _c("blocked_on", "String", "What a blocked task waits on."),
        _c("resume_at", "Nullable(DateTime64(6, 'UTC'))", "When a deferred task comes back."),
        _c("claimed_by", "String", "The subject holding the claim."),
        _c("claimed_agent", "String", "The agent label holding the claim."),
        _c("lease_expires_at", "Nullable(DateTime64(6, 'UTC'))", "When the current claim's lease ends."),
        _c("lease_seconds", "UInt32", "The lease length of a claim."),
        _c("attempts", "UInt32", "How many times the task was claimed."),
        _c("defers", "UInt32", "How many times the task was deferred."),
        _c("escalate_at", "Nullable(DateTime64(6, 'UTC'))", "When triage escalates the task."),
        _c("escalated_at", "Nullable(DateTime64(6, 'UTC'))", "When triage escalated it."),
        _POSTED_AT,
        _VERSION_WRITTEN,
        _ROW_VERSION,
    ),
    conditional=True,
)

# The tasks plane's projection of task state on NATS (where it replaces `tasks`): the same
# metadata, without the `doc` column that holds the whole task.
TASK_STATE = Table(
    name="task_state",
    plane="tasks",
    shape="live",
    comment="Tasks (the projection of their state): one row per task revision; read FINAL (forced) so each task_id shows its latest.",
    columns=(
        _ORG,
        _TASK_ID,
        _INBOX,
        _NS,
        _KIND,
        _STATUS,
        _PRIORITY,
        _DEADLINE,
        _NOT_BEFORE,
        _POSTER,
        _POSTED_AT,
        _c("updated_at", "DateTime64(6, 'UTC')", "When this revision was written."),
        _c("version", "UInt64", "The task's version."),
        _c("rev", "UInt64", "The state revision this row was made from (the latest wins)."),
    ),
    conditional=True,
)

TASK_EVENTS = Table(
    name="task_events",
    plane="tasks",
    shape="events",
    comment="Task history: one row per task event (posted, claimed, finished, …). A redelivered event can appear twice: count distinct event_id.",
    columns=(
        _ORG,
        _c("task_id", "String", "The task the event belongs to."),
        _c("event_id", "String", "The event's id (count distinct event_id)."),
        _c("kind", "String", "The event kind (task.posted, task.claimed, task.done, …)."),
        _NS,
        _c("inbox", "String", "The inbox at the time of the event."),
        _c("status", "String", "The task's status after the event."),
        _c("poster", "String", "The task's poster."),
        _c("actor", "String", "The subject whose call caused the event."),
        _c("actor_agent", "String", "The agent label of that call."),
        _c("task_kind", "String", "The task's kind."),
        _c("version", "UInt64", "The task version the event produced."),
        _c("at", "DateTime64(6, 'UTC')", "When the event happened."),
    ),
)

POLICY_DECISIONS = Table(
    name="policy_decisions",
    plane="policy",
    shape="events",
    comment="History-policy decisions: one row per gated call the policy gate judged.",
    columns=(
        _c("ts", "DateTime64(6, 'UTC')", "When the decision was made."),
        _ORG,
        _NS,
        _c("subject", "String", "The caller's subject."),
        _c("agent", "String", "The caller's agent label."),
        _c("op", "String", "The op the decision was about."),
        _c("transport", "String", "The door of the call."),
        _c("request_id", "String", "The call's request id (joins agent_events.request_id)."),
        _c("decision", "String", "The verdict: allow or deny."),
        _c("enforced", "Bool", "True when the verdict was enforced (not shadow mode)."),
        _c("mode", "String", "The mode the rules ran in (shadow, enforce)."),
        _WRITE_SHAPED,
        _c("determining_rules", "Array(String)", "The rule names that decided the verdict."),
        _c("rule_names", "Array(String)", "Every rule name evaluated."),
        _c("latency_ms", "Float64", "Time the gate took in milliseconds."),
    ),
)

# Planes that land after this one: generated only where the table exists with these columns.
DECISION_RECORDS = Table(
    name="decision_records",
    plane="decisions",
    shape="live",
    comment="Decision records: one row per version; read FINAL (forced), retired records are hidden. No statement text.",
    columns=(
        _ORG,
        _NS,
        _c("memory_key", "String", "The decision's key."),
        _c("category", "String", "The decision's category."),
        _c("stage", "String", "decided or proposed."),
        _ROW_VERSION,
        _c("created_at", "DateTime64(6, 'UTC')", "When the decision was first recorded."),
        _VERSION_WRITTEN,
    ),
    live="tombstoned_at IS NULL",
    conditional=True,
)

MEMORY = Table(
    name="memory",
    plane="memory",
    shape="live",
    comment="Memory rows: one row per version; read FINAL (forced), deleted or erased rows are hidden. No values.",
    columns=(
        _ORG,
        _NS,
        _c("memory_key", "String", "The row's key."),
        _c("memory_type", "String", "The row's type (fact, decision, …)."),
        _ROW_VERSION,
        _c("created_at", "DateTime64(6, 'UTC')", "When the key was first written."),
        _VERSION_WRITTEN,
    ),
    live="tombstoned_at IS NULL",
    conditional=True,
)

# The decisions plane's memory rows as search reads them: ReplacingMergeTree(version) per writer
# identity with a `live` flag, so FINAL shows each row's newest version and `live = 1` hides a
# deleted one. No value, excerpt or embedding.
MEMORY_VECTORS = Table(
    name="memory_vectors",
    plane="decisions",
    shape="live",
    comment="Memory rows (decision rows among them): one row per key and writer at its newest version (FINAL, forced); deleted rows hidden. No values.",
    columns=(
        _ORG,
        _NS,
        _c("key", "String", "The row's key."),
        _c("agent", "String", "The writer's agent label."),
        _c("memory_type", "String", "The row's type (fact, decision, …)."),
        _c("tags", "Array(String)", "The row's tags (decision:category:<category>, decision:proposed, …)."),
        _c("version", "UInt64", "The row's version (the newest wins)."),
    ),
    live="live = 1",
    conditional=True,
)

ALLOWLIST: tuple[Table, ...] = (LEDGER, TASKS, TASK_STATE, TASK_EVENTS, POLICY_DECISIONS, DECISION_RECORDS, MEMORY, MEMORY_VECTORS)

# The probe's canary: one row in the reserved scope (empty org and namespace), under a policy
# with the same key. Never in the catalog.
CANARY = Table(
    name="analysis_canary",
    plane="insights",
    shape="events",
    comment="The probe's canary row (reserved scope).",
    columns=(_ORG, _NS, _c("marker", "String", "A fixed marker the probe expects.")),
)
CANARY_MARKER = "loom-analysis-canary"

# Tables the analyst must never read, named so a test can hold the allowlist to it.
NEVER = ("analysis_secrets", "signing_keys", "revoked_tokens", "tokens", "grants")


def present_tables(
    existing: Mapping[str, Iterable[str]], engines: Mapping[str, str] | None = None, allowlist: Iterable[Table] = ALLOWLIST
) -> tuple[Table, ...]:
    """The entries generated for a database whose tables (name -> column names, name -> engine)
    are `existing` and `engines`: every unconditional entry, and a conditional one only when its
    table exists with every column it declares and every column its live predicate reads, and,
    for a `live` entry, a Replacing engine (FINAL then keeps one version per key, so the live
    predicate hides a deleted key with its earlier versions)."""
    out: list[Table] = []
    for t in allowlist:
        if not t.conditional:
            out.append(t)
            continue
        cols = set(existing.get(t.name, ()))
        needed = set(t.column_names) | _predicate_columns(t)
        if not cols or not needed <= cols:
            continue
        if t.shape == "live" and "Replacing" not in (engines or {}).get(t.name, ""):
            continue
        out.append(t)
    return tuple(out)


def _predicate_columns(t: Table) -> set[str]:
    return {c for c in ("tombstoned_at", "live") if c in t.live}
