"""Every LOOM_* setting, with its default and meaning. `loom config docs` renders this to
docs/configuration.md; a test keeps the two in agreement.

Core settings are `Settings` below. A plane's own settings live with the plane: a
`PlaneSettings` subclass in its package (`loom_<plane>/settings.py`), registered under the
entry-point group `loom.settings` (`<plane> = "loom_<plane>.settings:<Class>"`). The plane
reads them with `settings.plane(<Class>)` (environment variables, `LOOM_` prefix, like core's);
`render_markdown` adds one section per registered class; tests override them like core
settings (`make_settings(data_dir, policy_mode="enforce")`: a name that is not a core field
goes to `plane_overrides`).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

SETTINGS_ENTRY_POINTS = "loom.settings"
# Refused by every server start (loom_core.local_secrets.check_jwt_secret).
DEFAULT_JWT_SECRET = "dev-insecure-change-me"


class PlaneSettings(BaseSettings):
    """Base of a plane's own settings (read from LOOM_* environment variables)."""

    model_config = SettingsConfigDict(env_prefix="LOOM_", extra="ignore", frozen=True)


P = TypeVar("P", bound=PlaneSettings)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LOOM_", extra="ignore", frozen=True)

    # --- runtime
    data_dir: Path = Field(Path(".loom-data"), description="Embedded mode's data: chDB store, NATS JetStream store, admin socket.")
    http_host: str = Field("127.0.0.1", description="Address the gateway's HTTP server binds.")
    http_port: int = Field(8080, description="Port of the gateway's HTTP server (REST, MCP, health, metrics).")
    grpc_host: str = Field("127.0.0.1", description="Address the planes' gRPC servers bind.")
    grpc_port_base: int = Field(0, description="First gRPC port; plane i listens on base+i. 0 picks free ports (embedded).")
    plane_addresses: str = Field(
        "", description="Cluster mode: plane=host:port pairs, comma-separated, the gateway dials (e.g. tasks=tasks:7000)."
    )
    log_level: str = Field("INFO", description="Python log level.")
    # --- planes (not an environment variable: see the module docstring)
    plane_overrides: dict[str, Any] = Field(
        default_factory=dict, exclude=True, description="Values for plane settings by field name, over the environment (tests)."
    )

    def plane(self, cls: type[P]) -> P:
        """A plane's own settings: the environment, overridden by `plane_overrides`."""
        known = cls.model_fields
        return cls(**{k: v for k, v in self.plane_overrides.items() if k in known})

    # --- store
    clickhouse_url: str = Field(
        "", description="ClickHouse server (clickhouse://user:pass@host:9000/db). Empty: embedded chDB under LOOM_DATA_DIR."
    )
    clickhouse_database: str = Field("loom", description="Database holding Loom's tables.")

    # --- insights
    rate_insights_per_minute: int = Field(
        60, description="Calls per minute per subject for insights.query (its own rate class, `insights`)."
    )
    ch_analysis_write_entities: bool = Field(
        True,
        description="Write the analyst user, its profiles, grants and policies at boot when Loom's ClickHouse user has access management (else run `loom ch-setup`).",
    )
    ch_analysis_probe_interval_s: float = Field(
        60.0, description="Seconds between probes of the analysis boundary (one also runs at boot)."
    )
    ch_analysis_org_concurrency: int = Field(2, description="Most insights.query statements one org runs at once on a replica.")
    ch_analysis_row_cap: int = Field(1000, description="Rows insights.query returns; a longer result is cut and marked truncated.")
    ch_analysis_max_execution_time_s: int = Field(
        30, description="The analyst profile's max_execution_time (MAX): seconds a statement may run."
    )
    ch_analysis_max_rows_to_read: int = Field(50_000_000, description="The analyst profile's max_rows_to_read (MAX).")
    ch_analysis_max_memory_usage: int = Field(2_000_000_000, description="The analyst profile's max_memory_usage in bytes (MAX).")
    ch_analysis_max_result_rows: int = Field(100_000, description="The analyst profile's max_result_rows (MAX), checked inside ClickHouse.")
    ch_analysis_max_threads: int = Field(4, description="The analyst profile's max_threads (MAX).")
    ch_analysis_max_concurrent_queries: int = Field(
        8, description="The analyst profile's max_concurrent_queries_for_user: statements the analyst runs at once across every org."
    )
    ch_analysis_lease_wait_s: float = Field(
        60.0, description="Longest a write of the analyst's entities waits for the analysis.entities lease."
    )

    # --- bus
    nats_url: str = Field("", description="NATS server URL. Empty: `loom up` starts a nats-server child process with JetStream.")
    nats_port: int = Field(0, description="Port of the embedded nats-server (0 picks a free one).")
    nats_sync_interval: str = Field(
        "always",
        description="JetStream's storage sync of the embedded nats-server: `always` (fsync every write before its ack) or an interval such as `2m` (faster; a machine crash may lose the last interval's acknowledged writes).",
    )
    nats_internal_user: str = Field(
        "",
        description="NATS user Loom's own connections authenticate as (an auth callout `auth_users` entry). Empty: connect without credentials. `loom up` sets one.",
    )
    nats_internal_password: str = Field(
        "", description="Password of LOOM_NATS_INTERNAL_USER. `loom up` generates one per start when empty."
    )
    nats_auth_callout_issuer_seed: str = Field(
        "",
        description="Account nkey seed (SA…) signing NATS auth callout answers. Set: every replica answers `$SYS.REQ.USER.AUTH`, so agents subscribe to task events with their Loom token. `loom up` generates one.",
    )
    nats_auth_agents_account: str = Field(
        "AGENTS",
        description="NATS account the auth callout places token-authenticated subscribers in (it imports `loom.tasks.>` from Loom's account).",
    )
    nats_auth_session_seconds: int = Field(
        3600,
        description="Longest a token-authenticated NATS connection lasts before the agent must connect again (a backstop: revocations and grant changes disconnect it at once).",
    )

    # --- identity
    jwt_secret: str = Field(
        DEFAULT_JWT_SECRET,
        description="HS256 key signing every Loom token, at least 32 bytes. `loom up` generates one into LOOM_DATA_DIR/secrets.json (mode 0600) when unset; `loom serve` refuses the default or a shorter one.",
    )
    jwt_secret_previous: str = Field("", description="The key before the last rotation; tokens signed with it still verify.")
    token_default_ttl_seconds: int = Field(3600, description="Lifetime of a minted token when the call names none.")
    token_max_ttl_seconds: int = Field(30 * 86400, description="Longest lifetime a minted token may ask for.")
    bootstrap_token_ttl_seconds: int = Field(30 * 86400, description="Lifetime of the admin token `loom admin bootstrap` prints.")
    token_max_chain_depth: int = Field(4, description="Most ancestors a delegated token may have.")
    revocation_prune_interval_seconds: float = Field(
        3600.0,
        description="Seconds between prunes of revocations older than the longest token lifetime (one replica deletes the rows under a cluster lease; every replica forgets them).",
    )
    grant_cache_ttl_seconds: float = Field(
        5.0, description="How long a replica caches a subject's live grant (changes are also pushed over NATS)."
    )

    # --- rate classes (calls per minute per subject and class)
    rate_read_per_minute: int = Field(6000, description="Calls per minute per subject for read-class ops.")
    rate_write_per_minute: int = Field(3000, description="Calls per minute per subject for write-class ops.")
    rate_admin_per_minute: int = Field(600, description="Calls per minute per subject for admin-class ops.")
    rate_heavy_per_minute: int = Field(120, description="Calls per minute per subject for heavy-class ops.")

    # --- ledger
    ledger_flush_interval_seconds: float = Field(0.2, description="Longest a ledger row waits in memory before its batch is written.")
    ledger_batch_max_rows: int = Field(1000, description="Rows at which a ledger batch is written at once.")

    # --- help
    help_docs_dir: str = Field(
        "",
        description="Folder of Markdown pages help.search and help.get index. Empty: the docs this build ships (installed with the loom-help package).",
    )

    # --- tasks
    task_lease_sweep_enabled: bool = Field(
        True,
        description="Runs the sweeper: expired leases, deferred tasks reaching resume_at, stale triage, finished tasks leaving NATS.",
    )
    task_webhook_deliver_enabled: bool = Field(True, description="Posts one signed notice per new event batch to an inbox's webhook_url.")
    task_sweep_interval_seconds: float = Field(
        1.0, description="Seconds between lease-sweep passes (expired leases, resume_at, triage escalation); one replica sweeps at a time."
    )
    task_terminal_retention_seconds: float = Field(
        900.0, description="How long a finished task stays in NATS (the truth) before it is served from the ClickHouse projection alone."
    )
    task_idempotency_window_seconds: float = Field(
        86400.0,
        description="How long a finished task's tombstone keeps its idempotency_key taken (a create with the key answers the task, not a new one).",
    )
    task_state_replicas: int = Field(
        1,
        description="JetStream replicas of the task state and event streams: 1 embedded, 3 in a cluster (see docs/operations/durability.md).",
    )
    task_pull_poll_seconds: float = Field(
        2.0,
        description="While a long poll waits, how often it re-reads the store besides the NATS wake-ups (a safety net for a lost wake-up).",
    )
    task_config_cache_ttl_seconds: float = Field(
        5.0, description="Longest a replica serves a stale inbox or trust row (changes are also pushed over NATS)."
    )
    task_events_max_age_seconds: int = Field(
        7 * 86400, description="How long task events stay in the LOOM_TASK_EVENTS stream (the task.updates cursor's reach)."
    )
    task_webhook_timeout_seconds: float = Field(5.0, description="Timeout of one webhook POST (connect is capped at 3 s).")
    task_webhook_max_attempts: int = Field(
        5, description="Attempts per webhook notice (a refused address, a redirect or a 4xx is not retried)."
    )
    task_webhook_retry_base_seconds: float = Field(1.0, description="First webhook retry delay; doubled per attempt, at most 30 s.")

    # --- cluster
    clickhouse_cluster: str = Field(
        "",
        description="ClickHouse cluster name (a `remote_servers` entry). Set: migrations create the database and tables `ON CLUSTER` with `Replicated*MergeTree` engines. Needs LOOM_CLICKHOUSE_URL.",
    )
    nats_replicas: int = Field(1, description="JetStream replicas of the streams and KV buckets Loom creates (3 on a 3-node NATS cluster).")
    # --- gateway
    gateway_transport: Literal["inproc", "grpc"] = Field(
        "inproc",
        description="How the gateway reaches planes running in its own process: inproc (the interceptor chain called in process) or grpc (loopback gRPC, as a cluster's gateway does).",
    )
    # --- assistant
    assistant_librechat_url: str = Field(
        "",
        description="LibreChat's internal address (its URL on the network only Loom reaches). Empty: no assistant; assistant.ask answers ASSISTANT_UNAVAILABLE.",
    )
    assistant_model: str = Field("", description="Replaces the agent definition's model when Loom seeds it (empty: the definition's).")
    assistant_answer_ttl_s: int = Field(600, description="Longest one answer runs; its delegated token expires then.")
    assistant_budget_share: float = Field(0.5, description="Share of a namespace's daily model cost cap the assistant may spend.")
    default_daily_cost_cap_usd: float = Field(1.0, description="A namespace's daily model cost cap when it sets none (daily_cost_cap_usd).")
    assistant_concurrent_answers: int = Field(2, description="Answers one process runs at once per namespace.")
    assistant_answer_ceiling_usd: float = Field(
        0.10, description="Charged for an answer cut before its final chunk or on a model Loom has no rate for."
    )
    assistant_setup_retry_s: float = Field(
        5.0, description="Wait after a failed service-user setup; doubled after each next failure, up to 16 times."
    )
    assistant_service_email: str = Field("loom-assistant@loom.local", description="Email of LibreChat's service user Loom registers.")
    assistant_loom_url: str = Field(
        "", description="Cluster mode: the gateway URL the bridge checks help and task citations through (embedded: in process)."
    )
    assistant_bridge_url: str = Field(
        "", description="Cluster mode: the assistant bridge's internal HTTP address the gateway relays chats to (embedded: in process)."
    )
    assistant_upstream_timeout_s: float = Field(30.0, description="Longest the bridge waits for LibreChat to start answering.")
    assistant_bridge_listen: str = Field(
        "",
        description="Cluster mode: host:port the assistant plane's process serves the chat route on, for the gateway (LOOM_ASSISTANT_BRIDGE_URL).",
    )
    # --- decisions
    memory_exposure_ledger_enabled: bool = Field(
        True,
        description="Key-returning memory and decision reads (memory.get, memory.list, memory.search, decision.precedents, decision.chain) record one exposure row per key shown, under the call's run.",
    )
    embedding_provider: Literal["local", "openai"] = Field(
        "local",
        description="Embeddings for memory and decision search: local (all-MiniLM-L6-v2 int8 ONNX, offline) or openai (an OpenAI-compatible /embeddings endpoint).",
    )
    embedding_url: str = Field(
        "", description="Base URL of the OpenAI-compatible embeddings endpoint (…/v1); used when embedding_provider=openai."
    )
    embedding_model: str = Field("text-embedding-3-small", description="Model name sent to the OpenAI-compatible embeddings endpoint.")
    embedding_api_key: str = Field("", description="Bearer key for the embeddings endpoint (never logged).")
    embedding_dimensions: int = Field(
        384, description="Vector width; the local model's is 384, an endpoint's must match what the store was built with."
    )
    embedding_timeout_seconds: float = Field(30.0, description="Timeout of one call to the embeddings endpoint.")
    embedding_batch_max: int = Field(64, description="Most texts one embedding call carries.")
    decision_conflict_threshold: float = Field(
        0.9, description="Cosine similarity at or above which a decision under another key is flagged as a conflict (never merged)."
    )
    decision_lock_max_seconds: int = Field(86400, description="Longest memory.lock may hold a key.")
    memory_vector_index_min_rows: int = Field(
        20000,
        description="A namespace with at least this many live rows is searched through the HNSW vector index (approximate); a smaller one by exact cosine over its rows.",
    )


def plane_settings_classes() -> dict[str, type[PlaneSettings]]:
    """Every installed plane's settings class, by plane name (entry-point group `loom.settings`)."""
    out: dict[str, type[PlaneSettings]] = {}
    for ep in sorted(entry_points(group=SETTINGS_ENTRY_POINTS), key=lambda e: e.name):
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, PlaneSettings)):
            raise TypeError(f"entry point {SETTINGS_ENTRY_POINTS}:{ep.name} is not a PlaneSettings subclass")
        out[ep.name] = cls
    return out


def _rows(fields: dict[str, Any]) -> list[str]:
    lines = ["| Setting | Default | Meaning |", "|---|---|---|"]
    for name, field in fields.items():
        default = field.default
        shown = "(empty)" if default == "" else str(default)
        lines.append(f"| `LOOM_{name.upper()}` | `{shown}` | {field.description} |")
    return lines


def render_markdown() -> str:
    """docs/configuration.md, generated from Settings and every plane's PlaneSettings."""
    lines = [
        "# Configuration",
        "",
        "Generated by `loom config docs` from `core/loom_core/settings.py`; do not edit by hand.",
        "Every setting is an environment variable.",
        "",
        *_rows({n: f for n, f in Settings.model_fields.items() if n != "plane_overrides"}),
    ]
    for plane, cls in plane_settings_classes().items():
        module = cls.__module__.replace(".", "/")
        lines += ["", f"## {plane}", "", f"From `{module}.py` (`{cls.__name__}`).", "", *_rows(dict(cls.model_fields))]
    return "\n".join(lines) + "\n"
