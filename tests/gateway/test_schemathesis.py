"""schemathesis (`--checks all`) over every op of /openapi.json, against the running stack: no
schema-valid request refused, no response outside its schema, no 5xx. Bounded: a few examples
per op and no shrinking, so it runs in a few minutes. Long polls (task.pull, task.updates) may wait their 30 s by design:
the response-time limit is set above that.

A rule's `condition` (policy.set, policy.check, policy.replay) is a recursive language; it is
published as one self-referring schema (components/schemas/PolicyCondition, an anyOf over node
kinds keyed by `op`), which schemathesis generates from in bounded time, so every check runs on
every op. The plane alone refuses (422 naming the node) a tree deeper than 8 or with more than 32
leaves, which the schema does not count; the examples drawn here stay far from both.
Every door refuses a NUL character in any string (422 VALIDATION_FAILED, docs/doors.md; refused
in tests/gateway/test_bad_input.py), a rule the schema does not repeat on each string field:
schemathesis generates no NUL (`generation.allow-x00 = false`). It had drawn one inside
decision.record_many's records[7].influenced_by.

One further rule stays server-side because JSON Schema cannot state it: a decision's category
and scenario needing a letter or digit (400 MISSING_IDENTITY_FIELD); decision.record's two examples
stay far from it, but decision.record_many's carry many records each, and one record without a
letter or digit refuses the call (as it must, nothing written): for that op 400 is an accepted
answer to a schema-valid request.

On the embedded store (chDB) insights.query answers every valid statement 503 ANALYSIS_UNAVAILABLE
by design (analysis needs a ClickHouse server): there, and only while insights.catalog says
`available: false`, a 503 from that one op is expected; every check still runs on it.

A key an earlier example locked (memory.lock runs before the memory writes that come after it in
the listing) answers the writes to it 423 LOCKED, as it must: for those writes 423 is an
accepted answer to a valid request."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import httpx
import pytest
from loom_runner.embedded import Instance

from tests.conftest import Tenant

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


async def schemathesis(base_url: str, token: str, namespace: str, *extra: str, cwd: Path) -> tuple[int, str]:
    st = str(Path(sys.executable).parent / "schemathesis")
    # Generous time limits: the checks are about answers, not speed. With 40 s, a 100-item
    # decision.record_many (100 embeddings) on a loaded 2-core machine without VNNI errored once in
    # 10,239 cases (schemathesis's "Network Error", most likely the limit).
    proc = await asyncio.create_subprocess_exec(
        st, *(["--config-file", str(cwd / "schemathesis.toml")] if (cwd / "schemathesis.toml").exists() else []), "run", f"{base_url}/openapi.json", "--checks", "all", "--max-examples", "2", "--request-timeout", "120", "--max-response-time", "120", "--seed", "7", "--no-shrink",
        "--workers", "1", "--header", f"Authorization: Bearer {token}", "--header", f"X-Loom-Namespace: {namespace}",
        "--output-truncate", "true", *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"}, cwd=cwd,
    )  # fmt: skip
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace")


def failures(out: str) -> str:
    """schemathesis's report from its failures on, each line clipped: a failing case's reproduction
    (a curl line with a 100-record body) would otherwise push the status and the answer out of view."""
    start = out.find("FAILURES")
    lines = out[start if start >= 0 else 0 :].splitlines()
    return "\n".join(line if len(line) <= 400 else line[:400] + " [...]" for line in lines)[-12000:]


async def test_schemathesis_checks_all_pass_on_every_op(stack: Instance, tenant: Tenant, transport: str, tmp_path: Path) -> None:
    if transport != "inproc":
        pytest.skip("the published schema and the checks do not depend on the transport; once is enough")
    config = (
        "[generation]\nallow-x00 = false\n"
        '[[operations]]\ninclude-path-regex = "^/v1/memory\\\\.(set|move|record\\\\.write|dedup_resolve|auto_supersede)$"\n'
        'checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "423", "429", "5xx"]\n'
        '[[operations]]\ninclude-path = "/v1/decision.record_many"\n'
        'checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "423", "429", "5xx"]\n'
    )
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as c:
        headers = {"Authorization": f"Bearer {tenant.token}", "X-Loom-Namespace": tenant.namespace}
        available = (await c.post("/v1/insights.catalog", json={}, headers=headers)).json()["available"]
        if not available:
            r = await c.post("/v1/insights.query", json={"sql": "SELECT 1"}, headers=headers)
            assert r.status_code == 503 and r.json()["error"]["code"] == "ANALYSIS_UNAVAILABLE", r.text
            config += (
                '[[operations]]\ninclude-path = "/v1/insights.query"\n'
                'checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "503"]\n'
            )
    (tmp_path / "schemathesis.toml").write_text(config)
    # Run in a temp dir: schemathesis keeps a cache of past failures in its working directory.
    code, out = await schemathesis(stack.base_url, tenant.token, tenant.namespace, cwd=tmp_path)
    assert code == 0, failures(out)
