"""The chat model `loom decisions extract` reads documents with: an OpenAI-compatible
`POST {url}/chat/completions` over httpx (LOOM_LLM_URL, LOOM_LLM_MODEL, LOOM_LLM_API_KEY).

`model_problem` says, before any call, why no usable model is configured and how to configure
one; the key is sent as a bearer header and never appears in an error or a log."""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx

from ..domain.decision_extract import EXTRACT_TOKENS, SUPPORT_TOKENS
from ..settings import DecisionsSettings

OPENAI_URL = "https://api.openai.com/v1"
HOW_TO_CONFIGURE = (
    "set LOOM_LLM_URL to an OpenAI-compatible endpoint (e.g. http://127.0.0.1:11434/v1), LOOM_LLM_MODEL to its model "
    "and LOOM_LLM_API_KEY when it needs a key; or LOOM_LLM_PROVIDER=openai with LOOM_LLM_API_KEY for OpenAI's own endpoint"
)


def model_problem(s: DecisionsSettings) -> str:
    """Why the configured model cannot read a document ('' when it can)."""
    provider = s.llm_provider.strip().lower()
    if provider in ("", "openai") and s.llm_url:
        return ""
    if provider == "openai":
        return "" if s.llm_api_key else "LOOM_LLM_PROVIDER=openai has no LOOM_LLM_API_KEY: " + HOW_TO_CONFIGURE
    if provider == "":
        return "no model is configured: " + HOW_TO_CONFIGURE
    return f"LOOM_LLM_PROVIDER={provider} is not served by this build (only OpenAI-compatible endpoints): " + HOW_TO_CONFIGURE


def max_tokens(s: DecisionsSettings) -> dict[str, int]:
    caps = {"decision_extract": EXTRACT_TOKENS, "decision_support": SUPPORT_TOKENS}
    if s.llm_max_tokens_overrides.strip():
        try:
            given = json.loads(s.llm_max_tokens_overrides)
        except json.JSONDecodeError:
            given = {}
        if isinstance(given, dict):
            caps.update({str(k): int(v) for k, v in given.items() if isinstance(v, int) and v > 0})
    return caps


class ModelError(Exception):
    """A model call that failed: a provider error, a timeout, a reply cut at its cap."""

    def __init__(self, message: str, *, cut_at: int = 0) -> None:
        super().__init__(message)
        self.cut_at = cut_at


@dataclass
class ChatModel:
    url: str
    model: str
    api_key: str
    timeout: float
    caps: dict[str, int]
    calls: int = 0

    @classmethod
    def from_settings(cls, s: DecisionsSettings) -> ChatModel:
        return cls((s.llm_url or OPENAI_URL).rstrip("/"), s.llm_model, s.llm_api_key, s.llm_timeout_seconds, max_tokens(s))

    async def chat(self, kind: str, system: str, user: str) -> str:
        """One completion; `kind` (decision_extract, decision_support) picks the output cap."""
        cap = self.caps.get(kind, EXTRACT_TOKENS)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": cap,
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }
        self.calls += 1
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                r = await client.post(f"{self.url}/chat/completions", json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise ModelError(f"the model endpoint could not be reached ({type(exc).__name__})") from None
        if r.status_code != 200:
            raise ModelError(f"the model endpoint answered {r.status_code}")
        try:
            choice = r.json()["choices"][0]
            content = str(choice["message"]["content"] or "")
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelError("the model endpoint's answer is not a chat completion") from None
        if choice.get("finish_reason") == "length":
            raise ModelError(f"the reply was cut at the model's token limit ({kind}, {cap})", cut_at=cap)
        return content
