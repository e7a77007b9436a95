"""The agent definition (librechat/agent.yaml): its fields, digest, and when Loom writes it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The MCP server's name in librechat.yaml (deploy/librechat/assistant.librechat.yaml `mcpServers`).
MCP_SERVER = "loom"
# LibreChat names an MCP server's tool for an agent `<tool><delimiter><server>`: its
# Constants.mcp_delimiter in packages/data-provider/src/config.ts, joined in
# packages/api/src/mcp/registry/MCPServerInspector.ts (getToolFunctions).
MCP_DELIMITER = "_mcp_"


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

    def mcp_tools(self) -> list[str]:
        """The MCP tool names (`loom_task_get`) the definition's LibreChat names carry."""
        return [mcp_tool_of(t) for t in self.tools]

    def agent_body(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "provider": self.provider,
            "model": self.model,
            "instructions": self.instructions,
            "model_parameters": dict(self.model_parameters),
            "tools": list(self.tools),
        }


def librechat_tool(mcp_tool: str) -> str:
    """`loom_task_get` -> `loom_task_get_mcp_loom`: the name LibreChat gives the agent."""
    return f"{mcp_tool}{MCP_DELIMITER}{MCP_SERVER}"


def mcp_tool_of(librechat_name: str) -> str:
    """`loom_task_get_mcp_loom` -> `loom_task_get`; ValueError for a name of no `loom` tool."""
    tool, sep, server = librechat_name.rpartition(MCP_DELIMITER)
    if not sep or server != MCP_SERVER or not tool:
        raise ValueError(f"agent.yaml: tool {librechat_name!r} is not named <tool>{MCP_DELIMITER}{MCP_SERVER}")
    return tool


def parse(raw: Mapping[str, Any]) -> Definition:
    tools = tuple(str(t) for t in raw.get("tools") or ())
    for t in tools:
        mcp_tool_of(t)
    try:
        return Definition(
            version=int(raw["version"]),
            name=str(raw["name"]),
            provider=str(raw["provider"]),
            model=str(raw["model"]),
            model_parameters=dict(raw.get("model_parameters") or {}),
            tools=tools,
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
