"""The decisions plane's settings (entry point `loom.settings`: decisions), read as
`settings.plane(DecisionsSettings)`; rendered into docs/configuration.md by `loom config docs`."""

from __future__ import annotations

from typing import Literal

from loom_core.settings import PlaneSettings
from pydantic import Field


class DecisionsSettings(PlaneSettings):
    memory_exposure_ledger_enabled: bool = Field(
        True,
        description="Key-returning memory and decision reads (memory.get, memory.list, memory.search, memory.for_file, context.pack, decision.precedents, decision.chain) record one exposure row per key shown, under the call's run.",
    )
    search_loom_url: str = Field(
        "",
        description="Cluster mode: the gateway URL search.unified (MCP loom_search) reads namespace.list, memory.search and task.list through, as the caller (embedded: in process).",
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
    embedding_threads: int = Field(
        0,
        description="Worker threads the local model runs one batch of texts on at once (each runs one text at a time, so vectors do not change): writes' embeddings use every core; 0: one per CPU.",
    )
    decision_conflict_threshold: float = Field(
        0.9, description="Cosine similarity at or above which a decision under another key is flagged as a conflict (never merged)."
    )
    decision_lock_max_seconds: int = Field(86400, description="Longest memory.lock may hold a key.")
    memory_vector_cache_min_rows: int = Field(
        2000,
        description="A namespace with at least this many live rows is searched through this process's cache of its vectors (built from the store in the background, scanned in the store until it is); 0 turns the cache off.",
    )
    memory_vector_cache_search: Literal["exact", "hnsw"] = Field(
        "hnsw",
        description="How the vector cache searches: hnsw (a usearch HNSW graph per memory type: approximate, recall@25 measured in docs/benchmarks.md, a millisecond or two at 10^5 rows) or exact (a cosine scan of the vectors in memory: recall 1, tens of milliseconds at 10^5 rows).",
    )
    memory_vector_cache_refresh_seconds: float = Field(
        5.0,
        description="How often each replica reads the rows other replicas wrote into its vector cache: the bound on how long another replica's write is missing from this one's ANN answers.",
    )
    decision_precedents_min_similarity: float = Field(
        0.20,
        description="decision.precedents returns no decision less similar (cosine) to the query than this; chosen on the help evaluation set, where unrelated questions' best matches stay under 0.19.",
    )
    memory_for_file_max_chars: int = Field(
        6000,
        description="The ceiling of memory.for_file's block in characters: a row that would pass it is named (its key), not shown.",
    )
    context_pack_token_budget: int = Field(
        1500, description="context.pack's token budget when the call names none (a token counted as 4 characters, rounded up)."
    )
    llm_provider: str = Field(
        "",
        description="The model `loom decisions extract` reads documents with: openai (an OpenAI-compatible chat completions endpoint; LOOM_LLM_URL alone implies it). Empty with no LOOM_LLM_URL: no model, and the command says how to configure one.",
    )
    llm_url: str = Field(
        "",
        description="Base URL of the OpenAI-compatible endpoint (…/v1) `loom decisions extract` calls; OpenAI's own endpoint when unset under LOOM_LLM_PROVIDER=openai.",
    )
    llm_model: str = Field("gpt-4o-mini", description="Model name sent to the LLM endpoint.")
    llm_api_key: str = Field("", description="Bearer key for the LLM endpoint (never logged); required for the public OpenAI endpoint.")
    llm_timeout_seconds: float = Field(180.0, description="Timeout of one call to the LLM endpoint.")
    llm_max_tokens_overrides: str = Field(
        "",
        description='JSON object of output caps per call kind, replacing the defaults decision_extract 12000 and decision_support 8000 (e.g. {"decision_extract": 16000}).',
    )
    memory_decision_extract_window_chars: int = Field(
        24000, description="Most characters of a document's sections `loom decisions extract` sends in one model read (--window-chars)."
    )
    memory_decision_extract_known_max: int = Field(
        30,
        description="Most stored decisions of a document the read prompt lists (category and scenario) for the model to reuse their keys.",
    )
    memory_decision_extract_restatement_top_k: int = Field(
        20, description="Decision keys closest to a new candidate checked for a pinned or attested one that reads the same."
    )
