"""Realistic decision statements for the precedents bench, and their MiniLM embeddings.

Decisions are written the way `decision.record` words them (`DecisionText.statement`: scenario,
"Decided <outcome> because <reasoning>", "Rejected: ..."), composed from areas of engineering
and operations work, each with its own subjects, options, reasons and rejected alternatives,
plus team, service and number details so that neighbouring decisions differ the way real ones
do (same question for another service, another retention period, another threshold). Queries
are questions a person would ask before deciding, worded apart from the statements (no shared
template), about one area and subject each.

The embeddings come from the local model (all-MiniLM-L6-v2, the one the decisions plane ships),
in batches, and are kept under LOOM_BENCH_CACHE (default ~/.cache/loom-bench) by corpus size and
seed: embedding 10^5 statements takes minutes on this machine, so a second run reuses them.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

AREAS: dict[str, dict[str, list[str]]] = {
    "retention": {
        "subject": [
            "raw chat transcripts",
            "audit log rows",
            "agent scratch memory",
            "support tickets",
            "billing exports",
            "crash dumps",
            "session recordings",
            "model prompts and completions",
            "webhook payloads",
            "deleted user data",
        ],
        "option": [
            "keep them {n} days",
            "keep them {n} days, then archive to cold storage",
            "delete them after {n} hours",
            "keep them until the case closes plus {n} days",
            "keep aggregates only after {n} days",
        ],
        "reason": [
            "replay of incidents needs the last weeks",
            "legal hold is handled by export, not by retention",
            "storage grew {n}% last quarter",
            "the privacy review asked for the shortest period that still works",
            "customers ask for their history within a month",
            "the regulator requires it for financial records",
        ],
        "alt": ["keep forever", "7 days", "delete on close", "let each team choose", "keep a sample only"],
    },
    "deploy": {
        "subject": [
            "the payments service",
            "the gateway",
            "the search indexer",
            "the nightly batch jobs",
            "the mobile API",
            "the task scheduler",
            "the notification workers",
            "the public docs site",
            "the auth service",
            "the analytics ETL",
        ],
        "option": [
            "canary {n}% of traffic for an hour before full rollout",
            "blue-green deploys behind the load balancer",
            "deploy only Tuesday to Thursday",
            "roll back automatically when error rate doubles",
            "freeze deploys {n} days before quarter end",
        ],
        "reason": [
            "the last two outages came from friday releases",
            "rollbacks took {n} minutes by hand",
            "on-call is thinner on weekends",
            "customers saw partial failures during rolling restarts",
            "the canary caught a memory leak last month",
        ],
        "alt": ["deploy on merge", "weekly release train", "manual approval for every deploy", "feature flags only"],
    },
    "auth": {
        "subject": [
            "service-to-service calls",
            "the admin console",
            "API tokens for agents",
            "SSO for contractors",
            "the CLI login",
            "webhooks from partners",
            "database credentials",
            "the support tool",
        ],
        "option": [
            "short-lived tokens of {n} minutes refreshed by the sidecar",
            "mutual TLS with certificates rotated every {n} days",
            "OIDC with the company identity provider",
            "require hardware keys for admins",
            "scoped tokens per namespace",
        ],
        "reason": [
            "a leaked token stayed valid for months",
            "the audit found shared passwords",
            "contractors leave without offboarding",
            "partners cannot run our SDK",
            "rotation by hand was skipped {n} times",
        ],
        "alt": ["long-lived API keys", "IP allow lists", "basic auth over TLS", "one shared service account"],
    },
    "storage": {
        "subject": [
            "the event store",
            "user profiles",
            "the vector index",
            "task history",
            "file attachments",
            "metrics",
            "the decision ledger",
            "cache of rendered pages",
        ],
        "option": [
            "ClickHouse with a {n}-day TTL",
            "Postgres with monthly partitions",
            "object storage with a manifest",
            "a single SQLite file per tenant",
            "Redis with persistence off",
        ],
        "reason": [
            "queries scan months of data",
            "writes peak at {n} thousand rows per second",
            "tenants must be exportable on their own",
            "the data is rebuilt from the log anyway",
            "joins across tables are rare",
        ],
        "alt": ["MongoDB", "one big Postgres table", "Elasticsearch", "keep it in memory"],
    },
    "oncall": {
        "subject": [
            "paging for the data platform",
            "the weekend rotation",
            "alerts on queue depth",
            "incident reviews",
            "escalation to vendors",
            "status page updates",
        ],
        "option": [
            "page only on customer-facing symptoms",
            "rotate weekly with a {n}-hour handover",
            "review every incident within {n} days",
            "auto-resolve alerts quiet for {n} minutes",
            "one primary and one secondary per shift",
        ],
        "reason": [
            "people were paged {n} times a night for noise",
            "reviews slipped for weeks",
            "vendors answered faster with a named contact",
            "customers learned of outages from social media",
            "burnout showed in the survey",
        ],
        "alt": ["page on every alert", "follow-the-sun rotation", "no formal reviews", "a dedicated ops team"],
    },
    "api": {
        "subject": [
            "pagination of list endpoints",
            "error codes",
            "versioning of the public API",
            "rate limits for agents",
            "bulk import",
            "timestamps in responses",
            "idempotency of writes",
        ],
        "option": [
            "cursor-based pagination with opaque tokens",
            "stable string error codes with a retry hint",
            "a version in the path, old versions kept {n} months",
            "{n} requests per second per token with a burst",
            "idempotency keys kept for {n} hours",
            "RFC 3339 timestamps in UTC",
        ],
        "reason": [
            "offset pagination skipped rows under writes",
            "clients parsed error messages",
            "a breaking change hit a partner",
            "one agent flooded the queue",
            "retries created duplicate orders",
            "clients mixed local times",
        ],
        "alt": ["offset and limit", "HTTP status only", "header-based versions", "no limits", "unix epoch integers"],
    },
    "cost": {
        "subject": [
            "GPU instances for evaluation",
            "the staging cluster",
            "log ingestion",
            "third-party LLM calls",
            "CI runners",
            "egress between regions",
        ],
        "option": [
            "spot instances with checkpoints every {n} minutes",
            "scale staging to zero at night",
            "sample debug logs at {n}%",
            "cache completions for {n} hours",
            "self-hosted runners for long jobs",
            "keep traffic in one region",
        ],
        "reason": [
            "the bill rose {n}% in two months",
            "staging sat idle {n} hours a day",
            "debug logs were {n}% of ingestion",
            "the same prompts were sent again and again",
            "hosted runners queued for minutes",
        ],
        "alt": ["reserved instances", "cut the evaluation suite", "drop debug logs", "a cheaper model everywhere"],
    },
    "testing": {
        "subject": [
            "flaky integration tests",
            "the end-to-end suite",
            "contract tests with partners",
            "load tests",
            "tests that need a real database",
            "snapshot tests of the UI",
        ],
        "option": [
            "quarantine a flaky test after {n} failures",
            "run the end-to-end suite nightly, smoke tests per merge",
            "run a real database in a container per job",
            "load test before every major release at {n}x peak",
            "review snapshot changes like code",
        ],
        "reason": [
            "merges waited on reruns",
            "the suite took {n} minutes",
            "mocks hid a schema mismatch",
            "the last launch fell over at {n}x traffic",
            "snapshots were accepted blindly",
        ],
        "alt": ["delete flaky tests", "mock the database", "test in production only", "manual QA"],
    },
}
TEAMS = ["platform", "payments", "growth", "support", "data", "search", "mobile", "infra", "security", "ml", "billing", "docs"]
REGIONS = ["eu-west", "us-east", "ap-south", "us-west", "eu-central"]
SCENARIO = [
    "{team} team: how to handle {subject} in {region}",
    "What to do about {subject} for the {team} team",
    "{subject} policy ({team}, {region})",
    "Choosing an approach for {subject} after the {team} review",
    "Handling of {subject} in the {team} namespace",
]
QUESTION = [
    "what did we settle on for {subject}?",
    "is there an earlier call on {subject} I should follow?",
    "how have other teams dealt with {subject} before?",
    "I need to decide about {subject} for {team}; any precedent?",
    "rules we agreed for {subject}",
    "{team} asks how long / how we handle {subject}",
]


def _draw(rnd: random.Random) -> list[str]:
    """One decision's pieces, in order: the statement is their concatenation."""
    a = AREAS[rnd.choice(list(AREAS))]
    num = rnd.choice([2, 3, 5, 7, 10, 14, 15, 20, 30, 45, 60, 90, 120, 180, 365])
    fill = {"team": rnd.choice(TEAMS), "region": rnd.choice(REGIONS), "subject": rnd.choice(a["subject"]), "n": num}
    template = rnd.choice(SCENARIO)
    scenario = template.format(**fill)
    pieces = [scenario[0].upper() + scenario[1:] + ".", "Decided " + rnd.choice(a["option"]).format(**fill)]
    pieces.append("because " + rnd.choice(a["reason"]).format(**fill) + ".")
    alts = rnd.sample(a["alt"], rnd.randint(0, 2))
    if alts:
        pieces.append("Rejected: " + "; ".join(alts) + ".")
    return pieces


def statements(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    return [" ".join(_draw(rnd)) for _ in range(n)]


def composed(n: int, seed: int) -> np.ndarray:
    """Embeddings of n statements composed from embeddings of their sentence pieces (scenario,
    decision, reason, rejected alternatives), each piece embedded once by the local model and
    the statement's vector the token-weighted mean of its pieces' (mean pooling, as the model's,
    without the attention across pieces). For 10^5-10^6 rows, which the model cannot embed in a
    bench's time here; `fidelity` measures how close this comes to the model's own vectors."""
    rnd = random.Random(seed)
    # The pieces of a million draws (the first n are the corpus): one cache of piece vectors serves every n.
    drawn = [_draw(rnd) for _ in range(max(n, 1_000_000))]
    unique = sorted({p for d in drawn for p in d})
    drawn = drawn[:n]
    label = hashlib.sha256("\n".join(unique).encode()).hexdigest()[:16]
    # Composing 10^6 rows takes minutes on a loaded machine; kept beside the pieces they came from.
    path = _cache_dir() / f"composed-{n}-{seed}-{label}.npy"
    if path.exists():
        kept: np.ndarray = np.load(path)
        return kept
    vecs = embed(unique, "pieces-" + label)
    at = {p: i for i, p in enumerate(unique)}
    weight = np.array([len(p.split()) for p in unique], np.float32)
    out = np.zeros((n, 384), np.float32)
    for i, d in enumerate(drawn):
        idx = [at[p] for p in d]
        out[i] = weight[idx] @ vecs[idx]
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    np.save(path, out)
    return out


def questions(count: int, seed: int) -> list[str]:
    rnd = random.Random(seed + 1)
    areas = list(AREAS)
    out = []
    for _ in range(count):
        a = AREAS[rnd.choice(areas)]
        out.append(rnd.choice(QUESTION).format(subject=rnd.choice(a["subject"]), team=rnd.choice(TEAMS)))
    return out


def _cache_dir() -> Path:
    d = Path(os.environ.get("LOOM_BENCH_CACHE", Path.home() / ".cache" / "loom-bench"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def embed(texts: list[str], label: str) -> np.ndarray:
    """The local model's embeddings of `texts` (unit rows), cached on disk under `label` and the model's id."""
    from loom_core import embedding

    path = _cache_dir() / f"{label}-{embedding.MODEL_ID.replace('/', '-')}.npy"
    if path.exists():
        cached: np.ndarray = np.load(path)
        if len(cached) == len(texts):
            return cached
    from loom_core.embedding import LocalModel

    model = LocalModel(threads=2)
    model.load()
    out = np.zeros((len(texts), 384), np.float32)
    t = time.perf_counter()
    step = 512
    for start in range(0, len(texts), step):
        out[start : start + step] = model.encode(texts[start : start + step])
        if start and start % (step * 40) == 0:
            done = start + step
            print(f"  embedded {done:,}/{len(texts):,} ({done / (time.perf_counter() - t):.0f}/s)", file=sys.stderr, flush=True)
    np.save(path, out)
    return out


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    """The corpus's options, as `corpus` takes them: -n statements, --queries and the --seed that
    draws both."""
    parser.add_argument("-n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)


def corpus(n: int, queries: int, seed: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(statements, their embeddings, the questions' embeddings)."""
    texts = statements(n, seed)
    docs = embed(texts, f"decisions-{n}-{seed}")
    qs = embed(questions(queries, seed), f"questions-{queries}-{seed}")
    return texts, docs, qs


def fidelity(n: int, seed: int) -> float:
    """Mean cosine between the model's embedding of the first n statements and the composed one."""
    _, real, _ = corpus(n, 200, seed)
    comp = composed(n, seed)
    return float(np.mean(np.sum(real * comp, axis=1)))


if __name__ == "__main__":
    t0 = time.perf_counter()
    texts, docs, qs = corpus(int(sys.argv[1]) if len(sys.argv) > 1 else 2000, 200, 7)
    print(f"{len(texts):,} statements embedded in {time.perf_counter() - t0:.1f} s; e.g. {texts[0]!r}")
