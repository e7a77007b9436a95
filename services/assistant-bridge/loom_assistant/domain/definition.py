"""The agent definition (librechat/agent.yaml): its fields, digest, and when Loom writes it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MCP_SERVER = "loom"


@dataclass(frozen=True, slots=True)
class Definition:
    version: int
    name: str
    provider: str
    model: str
    model_parameters: dict[str, Any]
    tools: tuple[str, ...]
    instructions: str

    def with_model(self, model: str) -> Definition:
        if not model:
            return self
        return Definition(self.version, self.name, self.provider, model, self.model_parameters, self.tools, self.instructions)

    def digest(self) -> str:
        """Over name, provider, model parameters, instructions and tools (not the model, which
        an operator replaces, nor the version the digest is pinned to)."""
        body = {
            "name": self.name,
            "provider": self.provider,
            "model_parameters": self.model_parameters,
            "instructions": self.instructions,
            "tools": list(self.tools),
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def librechat_tools(self) -> list[str]:
        """LibreChat names an MCP tool `<tool>_mcp_<server>`."""
        return [f"{t}_mcp_{MCP_SERVER}" for t in self.tools]

    def agent_body(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "provider": self.provider,
            "model": self.model,
            "instructions": self.instructions,
            "model_parameters": dict(self.model_parameters),
            "tools": self.librechat_tools(),
        }


def parse(raw: Mapping[str, Any]) -> Definition:
    try:
        return Definition(
            version=int(raw["version"]),
            name=str(raw["name"]),
            provider=str(raw["provider"]),
            model=str(raw["model"]),
            model_parameters=dict(raw.get("model_parameters") or {}),
            tools=tuple(str(t) for t in raw.get("tools") or ()),
            instructions=str(raw["instructions"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"agent.yaml: {exc}") from exc


def should_write(stored_version: int, stored_model: str, mine: Definition) -> bool:
    """Newer than the stored definition, or the same version with another model; an older
    build never overwrites a newer one."""
    if mine.version > stored_version:
        return True
    return mine.version == stored_version and mine.model != stored_model
