"""Every ```python example=<name> block of docs/decisions.md runs, as written, through the SDK
against a fresh namespace (with `agent`, `agent_key`, `Agent`, `LoomError`, `ConflictError` in scope)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from loom import Agent, ConflictError, LoomError

from tests.conftest import Tenant

DOC = Path(__file__).resolve().parents[2] / "docs" / "decisions.md"
BLOCK = re.compile(r"```python example=([a-z0-9-]+)\n(.*?)```", re.S)


def examples() -> dict[str, str]:
    return dict(BLOCK.findall(DOC.read_text()))


def test_the_page_has_its_examples() -> None:
    assert set(examples()) == {
        "record-precedents-outcome",
        "keys-and-statement",
        "proposal",
        "pins-and-supersede",
        "retire-and-restore",
        "outcome-credits",
        "memory-surface",
        "chain",
        "calibration",
    }


@pytest.mark.parametrize("name", sorted(examples()))
async def test_doc_example_runs(name: str, tenant: Tenant) -> None:
    body = examples()[name]
    source = "async def _example(agent, agent_key):\n" + textwrap.indent(body, "    ")
    scope: dict[str, Any] = {"Agent": Agent, "LoomError": LoomError, "ConflictError": ConflictError}
    exec(compile(source, f"docs/decisions.md:{name}", "exec"), scope)
    async with Agent(org=tenant.org, namespace=tenant.namespace, agent="docs", api_key=tenant.token, base_url=tenant.base_url) as agent:
        await scope["_example"](agent, tenant.token)
