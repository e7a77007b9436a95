"""decision.precedents and the embeddings under it: a real model finds a decision from a
paraphrase that shares no rare word with its scenario; the OpenAI-compatible endpoint is
selected by setting and batched."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from loom_core.bus import NatsServer
from loom_core.errors import Unavailable
from loom_core.store.embedded import EmbeddedStore
from loom_decisions.service.embedding import Embedder, LocalModel, OpenAIModel, shared_local_model
from loom_decisions.settings import DecisionsSettings
from loom_runner.embedded import Instance

from tests.policy.conftest import new_tenant, start_policy_instance

from .conftest import Api, Desk

# scenario, outcome, a question that shares no rare word with the scenario or the outcome
CASES = [
    ("retention for raw transcripts in the support namespace", "keep transcripts 30 days", "how long do we hold on to customer chat logs?"),
    ("message broker between replicas", "NATS JetStream", "which queueing system passes events from one server instance to another?"),
    ("database engine for analytical queries over the agent ledger", "ClickHouse", "where do reporting workloads on bot activity run?"),
    (
        "authentication of service accounts at the gateway",
        "signed JWT bearer tokens",
        "how do automated clients prove who they are to our API front door?",
    ),
    ("vendor for transactional email", "Postmark", "which company delivers password reset mails for us?"),
    ("frontend framework for the dashboard", "React with Vite", "what UI library powers the admin web pages?"),
]
STOP = {
    "the", "for", "in", "of", "to", "do", "we", "how", "which", "what", "who", "where", "our", "us", "on", "from", "one", "are", "they",
    "is", "a", "an", "and", "with", "at", "over", "between", "run", "long", "hold", "another", "pages", "passes",
}  # fmt: skip


def words(text: str) -> set[str]:
    return {w[:4] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP and len(w) > 2}


def test_the_questions_share_no_rare_word_with_their_decisions() -> None:
    for scenario, outcome, question in CASES:
        assert not words(question) & words(scenario + " " + outcome), (question, words(question) & words(scenario + " " + outcome))


def test_the_local_model_finds_each_scenario_from_its_paraphrase() -> None:
    model = LocalModel()
    docs = model.encode([s for s, _, _ in CASES])
    qs = model.encode([q for _, _, q in CASES])
    assert docs.shape == (len(CASES), 384)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-4)
    assert list((qs @ docs.T).argmax(axis=1)) == list(range(len(CASES)))


async def record_cases(a: Api) -> dict[str, str]:
    keys = {}
    for scenario, outcome, question in CASES:
        rec = await a.ok("decision.record", category="platform", scenario=scenario, outcome=outcome, reasoning="chosen in review")
        keys[question] = rec["memory_key"]
    return keys


async def test_precedents_find_a_decision_from_a_paraphrase(desk: Desk) -> None:
    a = desk.as_agent("planner")
    keys = await record_cases(a)
    for question, key in keys.items():
        got = (await a.ok("decision.precedents", query=question, limit=3))["precedents"]
        assert got[0]["memory_key"] == key, (question, [g["memory_key"] for g in got])
        scores = [g["score"] for g in got]
        assert scores == sorted(scores, reverse=True) and all(sc >= FLOOR for sc in scores)
        assert got[0]["stage"] == "decided" and got[0]["category"] == "platform"


FLOOR = DecisionsSettings().decision_precedents_min_similarity


def set_floor(desk: Desk, monkeypatch: pytest.MonkeyPatch, floor: float) -> None:
    """The running plane's settings with another similarity floor, for this test only."""
    deps = next(p for p in desk.inst.planes if p.name == "decisions").rows.d  # type: ignore[attr-defined]
    monkeypatch.setattr(deps, "settings", deps.settings.model_copy(update={"decision_precedents_min_similarity": floor}))


async def test_precedents_under_the_similarity_floor_are_not_returned(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    a = desk.as_agent("planner")
    await record_cases(a)
    out = await a.ok("decision.precedents", query="banana bread recipe with walnuts", limit=10)
    assert out["precedents"] == [] and out["none_close"] is True and out["min_similarity"] == pytest.approx(FLOOR)
    close = await a.ok("decision.precedents", query="how long do we hold on to customer chat logs?", limit=25)
    assert close["precedents"] and not close.get("none_close") and len(close["precedents"]) < len(CASES)
    assert all(p["score"] >= FLOOR for p in close["precedents"])
    # With the floor lowered every decision is a precedent again (the floor is a setting).
    set_floor(desk, monkeypatch, -1.0)
    assert len((await a.ok("decision.precedents", query="banana bread recipe with walnuts", limit=25))["precedents"]) == len(CASES)


async def test_precedents_filter_by_category_and_cap_at_25(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    a = desk.as_agent("planner")
    await record_cases(a)
    await a.ok("decision.record", category="storage", scenario="retention of support transcripts", outcome="30 days")
    got = (await a.ok("decision.precedents", query="how long do we hold on to customer chat logs?", category="storage"))["precedents"]
    assert [p["category"] for p in got] == ["storage"]
    set_floor(desk, monkeypatch, -1.0)
    assert len((await a.ok("decision.precedents", query="anything", limit=25))["precedents"]) == 7
    await a.refused(422, "VALIDATION_FAILED", "decision.precedents", query="anything", limit=26)
    await a.refused(422, "VALIDATION_FAILED", "decision.precedents", query=" ")


async def test_with_outcome_only_serves_decisions_whose_outcome_is_recorded(desk: Desk) -> None:
    a = desk.as_agent("planner")
    keys = await record_cases(a)
    acted = keys[CASES[4][2]]
    await a.ok("decision.outcome", memory_key=acted, realized_outcome="deliverability 99.9%", success=True)
    got = (await a.ok("decision.precedents", query="which company delivers password reset mails for us?", with_outcome_only=True))[
        "precedents"
    ]
    assert [(p["memory_key"], p["realized_outcome"], p["success"]) for p in got] == [(acted, "deliverability 99.9%", True)]


async def test_concurrent_embeddings_are_batched_into_one_model_call() -> None:
    calls: list[int] = []
    local = shared_local_model()

    class Counting:
        dimensions = 384

        async def embed(self, texts: Any, *, workers: int = 1) -> np.ndarray:
            calls.append(len(texts))
            return await local.embed(texts)

        async def close(self) -> None:
            return None

    emb = Embedder(Counting(), batch_max=64)
    out = await asyncio.gather(*(emb.embed([f"text number {i}"]) for i in range(10)))
    assert all(o.shape == (1, 384) for o in out)
    assert sum(calls) == 10 and len(calls) <= 2  # the first call alone, the other nine together


async def test_a_question_never_waits_in_a_batch_of_writes_statements() -> None:
    batches: list[list[str]] = []
    local = shared_local_model()

    class Recording:
        dimensions = 384

        async def embed(self, texts: Any, *, workers: int = 1) -> np.ndarray:
            batches.append(list(texts))
            return await local.embed(texts)

        async def close(self) -> None:
            return None

    emb = Embedder(Recording(), batch_max=64)
    writes = [asyncio.ensure_future(emb.embed(["statement number 0"]))]
    await asyncio.sleep(0)  # the first statement's batch is running
    writes += [asyncio.ensure_future(emb.embed([f"statement number {i}"])) for i in range(1, 8)]
    await asyncio.sleep(0)  # seven statements queued behind it
    question = await emb.embed_query("which statement was first?")
    await asyncio.gather(*writes)
    assert len(question) == 384
    # The question ran in a batch of its own, not after or inside the statements' batches.
    assert ["which statement was first?"] in batches
    assert all(len(b) == 1 or "which statement was first?" not in b for b in batches)
    # It ran beside the first statement's batch, before the seven queued behind that one.
    assert batches == [["statement number 0"], ["which statement was first?"], [f"statement number {i}" for i in range(1, 8)]]


# --- the OpenAI-compatible endpoint ---------------------------------------------------------------


class _Endpoint(BaseHTTPRequestHandler):
    """A tiny OpenAI-compatible /v1/embeddings that embeds with the local model."""

    requests: list[dict[str, Any]] = []
    fail = False

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        if type(self).fail:
            self.send_response(500)
            self.end_headers()
            return
        vecs = shared_local_model().encode(body["input"])
        payload = {
            "object": "list",
            "model": body["model"],
            "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)],
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: Any) -> None:
        return None


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


async def test_the_openai_endpoint_is_called_with_the_model_key_and_a_batch(endpoint: str) -> None:
    _Endpoint.requests.clear()
    model = OpenAIModel(endpoint, "text-embedding-test", "sk-test", 384, 10)
    try:
        vecs = await model.embed(["first text", "second text"])
    finally:
        await model.close()
    assert vecs.shape == (2, 384)
    assert _Endpoint.requests == [
        {"path": "/v1/embeddings", "auth": "Bearer sk-test", "model": "text-embedding-test", "input": ["first text", "second text"]}
    ]


async def test_an_endpoint_failure_is_503(endpoint: str) -> None:
    model = OpenAIModel(endpoint, "m", "", 384, 10)
    _Endpoint.fail = True
    try:
        with pytest.raises(Unavailable):
            await model.embed(["x"])
    finally:
        _Endpoint.fail = False
        await model.close()


@pytest.fixture(scope="module")
async def remote_stack(
    stack: Instance, endpoint: str, data_dir: Path, store: EmbeddedStore, nats_server: NatsServer
) -> AsyncIterator[Instance]:
    inst = await start_policy_instance(
        data_dir, store, nats_server, "decisions-remote-embeddings", embedding_provider="openai", embedding_url=endpoint
    )
    yield inst
    await inst.stop()


async def test_precedents_through_the_endpoint_when_the_setting_selects_it(remote_stack: Instance) -> None:
    _Endpoint.requests.clear()
    t = await new_tenant(remote_stack)
    async with t.client(**{"X-Loom-Agent": "planner"}) as c:
        a = Api(c, "planner")
        keys = await record_cases(a)
        question = CASES[2][2]
        got = (await a.ok("decision.precedents", query=question, limit=1))["precedents"]
    assert got[0]["memory_key"] == keys[question]
    assert any(r["input"] == [question] for r in _Endpoint.requests)
