"""Every runnable example of the shipped docs runs against the test stack.

A fenced block whose info string is `sh run` or `python run` is runnable. A page's shell blocks
run in order as one bash script with `TOKEN` and `LOOM_URL` set; its Python blocks run in order
in one namespace with top-level await (the SDK reads `LOOM_URL`). The org and namespace the
examples name (`acme`, `private`) are swapped for a fresh tenant's, so reruns never collide.
"""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from loom_gateway.identity import bootstrap_org
from loom_runner.embedded import Instance

from tests.conftest import unique

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"^```(sh|python) run\n(.*?)^```", re.S | re.M)


def runnable(page: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {"sh": [], "python": []}
    for lang, body in BLOCK.findall(page.read_text()):
        found[lang].append(body)
    return found


PAGES = sorted(p for p in DOCS.rglob("*.md") if any(runnable(p).values()))


def test_the_manual_has_runnable_examples() -> None:
    assert {"getting-started.md", "identity.md", "doors.md", "help.md"} <= {p.relative_to(DOCS).as_posix() for p in PAGES}


@pytest.fixture
async def env(stack: Instance, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    org, ns = unique("org"), unique("ns")
    token, _ = await bootstrap_org(stack.runtime.identity, stack.runtime.codec, org, ns, 3600)
    values = {"TOKEN": token, "LOOM_URL": stack.base_url, "ORG": org, "NAMESPACE": ns}
    for k in ("TOKEN", "LOOM_URL"):
        monkeypatch.setenv(k, values[k])
    return values


def tenant_names(code: str, env: dict[str, str]) -> str:
    return code.replace('"acme"', f'"{env["ORG"]}"').replace('"private"', f'"{env["NAMESPACE"]}"')


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
async def test_runnable_examples_run(page: Path, env: dict[str, str]) -> None:
    blocks = runnable(page)
    if blocks["sh"]:
        script = "set -euo pipefail\n" + "\n".join(tenant_names(b, env) for b in blocks["sh"])
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", script, env={"PATH": "/usr/bin:/bin", **env}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await proc.communicate()
        assert proc.returncode == 0, f"{page.name} shell examples failed:\n{out.decode()}\n{err.decode()}"
    scope: dict[str, Any] = {"__name__": f"docs_{page.stem}"}
    for body in blocks["python"]:
        code = compile(tenant_names(body, env), f"{page.name}:example", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, scope)
        if asyncio.iscoroutine(result):
            await result
