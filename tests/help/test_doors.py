"""help.search, help.get and help.verify through REST, MCP listings and the SDK, on the test
stack, which indexes the docs this build ships."""

from __future__ import annotations

from typing import Any

import httpx
from loom import Agent, LoomError

from tests.conftest import Tenant, call


async def ok(c: httpx.AsyncClient, op: str, **args: Any) -> dict[str, Any]:
    r = await call(c, op, **args)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def refused(c: httpx.AsyncClient, op: str, status: int, code: str, **args: Any) -> dict[str, Any]:
    r = await call(c, op, **args)
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["error"]
    assert err["code"] == code
    return err


async def viewer_token(tenant: Tenant) -> str:
    async with tenant.client() as c:
        minted = await ok(c, "token.mint", roles={tenant.namespace: "viewer"}, ttl_seconds=600)
    token: str = minted["token"]
    return token


async def test_search_finds_an_error_code_and_its_hit_is_citable(tenant: Tenant) -> None:
    async with tenant.client() as c:
        body = await ok(c, "help.search", query="TASK_FENCE_STALE")
        assert body["available"] is True and 0 < len(body["hits"]) <= 8
        hit = body["hits"][0]
        assert set(hit) >= {"page", "title", "breadcrumb", "anchor", "audience", "snippet", "score", "citation"}
        assert (hit["page"], hit["anchor"], hit["audience"]) == ("reference/errors.md", "task_fence_stale", "user")
        assert "fence" in hit["snippet"]
        assert hit["breadcrumb"][0] == hit["title"]
        assert hit["citation"] == f"[help:{hit['page']} § {' > '.join(hit['breadcrumb'])}]"
        checked = await ok(c, "help.verify", citations=[hit["citation"], "[help:nowhere.md]"])
        assert checked["results"][0] == {"ref": hit["citation"], "verified": True, "anchor": hit["anchor"], "reason": ""}
        assert checked["results"][1]["verified"] is False and checked["results"][1]["reason"] == "page_not_indexed"


async def test_search_by_op_name_setting_and_typo(tenant: Tenant) -> None:
    async with tenant.client() as c:
        for query in ("task.claim", "task.clam", "task.cl", "task.cliam"):
            hits = (await ok(c, "help.search", query=query, limit=3))["hits"]
            assert (hits[0]["page"], hits[0]["breadcrumb"][-1]) == ("reference/ops.md", "task.claim"), (query, hits[0])
        for query, page, anchor in [
            ("TASK_FENCE_STAL", "reference/errors.md", "task_fence_stale"),
            ("AUTH_REVOKD", "reference/errors.md", "auth_revoked"),
            ("policy.st", "reference/ops.md", "policyset"),
        ]:
            top = (await ok(c, "help.search", query=query, limit=1))["hits"][0]
            assert (top["page"], top["anchor"]) == (page, anchor), (query, top)
        # A misspelt header: the page that defines it first, its table among the first three
        # (the page's opening section names the header too).
        hits = (await ok(c, "help.search", query="X-Loom-Namespac", limit=3))["hits"]
        assert hits[0]["page"] == "identity.md", hits[0]
        assert ("identity.md", "the-identity-headers") in [(h["page"], h["anchor"]) for h in hits], hits
        hits = (await ok(c, "help.search", query="LOOM_HELP_DOCS_DIR", limit=25))["hits"]
        assert len(hits) <= 25 and hits[0]["page"] in ("configuration.md", "help.md")


async def test_search_filters_by_audience(tenant: Tenant) -> None:
    async with tenant.client() as c:
        hits = (await ok(c, "help.search", query="benchmark figures", audience="operator"))["hits"]
        assert hits and {h["audience"] for h in hits} == {"operator"}


async def test_search_refuses_bad_arguments(tenant: Tenant) -> None:
    async with tenant.client() as c:
        await refused(c, "help.search", 422, "VALIDATION_FAILED", query="")
        err = await refused(c, "help.search", 422, "VALIDATION_FAILED", query="claim", limit=26)
        assert err["detail"]["field"] == "limit"
        err = await refused(c, "help.search", 422, "VALIDATION_FAILED", query="claim", audience="admin")
        assert err["detail"]["field"] == "audience"
        err = await refused(c, "help.search", 422, "VALIDATION_FAILED", query="claim", namespace="x")
        assert err["detail"]["field"] == "namespace"  # deployment-scoped: no namespace argument


async def test_a_page_read_carries_the_outline_and_a_section_read_does_not(tenant: Tenant) -> None:
    async with tenant.client() as c:
        page = await ok(c, "help.get", page="getting-started.md")
        assert page["title"] and page["outline"] and "next_offset" not in page
        entry = page["outline"][2]
        section = await ok(c, "help.get", page="getting-started.md", anchor=entry["anchor"])
        assert section["outline"] == [] and section["text"] in page["text"]
        assert section["text"].lstrip("# ").startswith(entry["breadcrumb"][-1].split()[0])


async def test_a_long_page_is_read_in_cut_reads(tenant: Tenant) -> None:
    async with tenant.client() as c:
        first = await ok(c, "help.get", page="reference/ops.md")
        assert len(first["text"]) <= 16_000 and first["next_offset"] == len(first["text"]) and first["outline"]
        parts, offset = [first["text"]], first["next_offset"]
        while offset is not None:
            more = await ok(c, "help.get", page="reference/ops.md", offset=offset)
            assert len(more["text"]) <= 16_000
            parts.append(more["text"])
            offset = more.get("next_offset")
        from loom_help.store.pages import shipped_docs_dir

        assert "".join(parts) == (shipped_docs_dir() / "reference" / "ops.md").read_text()


async def test_get_refuses_an_unknown_page_or_anchor(tenant: Tenant) -> None:
    async with tenant.client() as c:
        await refused(c, "help.get", 404, "RESOURCE_NOT_FOUND", page="nowhere.md")
        err = await refused(c, "help.get", 404, "RESOURCE_NOT_FOUND", page="policies.md", anchor="no-such-anchor")
        assert err["detail"]["anchor"] == "no-such-anchor"
        await refused(c, "help.get", 422, "VALIDATION_FAILED", page="")


async def test_any_valid_token_may_call_help_and_none_may_not(tenant: Tenant) -> None:
    async with tenant.client(await viewer_token(tenant)) as c:
        assert (await ok(c, "help.search", query="claim a task"))["hits"]
        assert (await ok(c, "help.get", page="tasks.md"))["text"]
        assert (await ok(c, "help.verify", citations=["[help:tasks.md]"]))["results"][0]["verified"]
    async with httpx.AsyncClient(base_url=tenant.base_url) as anon:
        r = await call(anon, "help.search", query="claim")
        assert r.status_code == 401 and r.json()["error"]["code"] == "AUTH_REQUIRED"


async def test_help_is_listed_only_in_the_assistant_toolset_and_verify_nowhere(tenant: Tenant) -> None:
    async with tenant.client() as c:
        every = {op["name"]: op for op in (await c.get("/v1/ops")).json()["ops"]}
        listed = {op["name"] for op in (await c.get("/v1/ops", params={"toolset": "all"})).json()["ops"]}
        assistant = {op["name"]: op for op in (await c.get("/v1/ops", params={"toolset": "assistant"})).json()["ops"]}
    # /v1/ops shows every op served, marked; the default MCP listing (`all`) leaves them out.
    assert not {"help.search", "help.get", "help.verify"} & listed
    assert every["help.search"]["experimental"] and every["help.get"]["experimental"] and every["help.verify"]["unlisted"]
    assert {"help.search", "help.get"} <= set(assistant) and "help.verify" not in assistant
    assert assistant["help.search"]["experimental"] and assistant["help.search"]["toolsets"] == ["assistant"]
    assert "namespace" not in assistant["help.search"]["input_schema"]["properties"]


async def test_the_sdk_searches_and_reads_help(tenant: Tenant) -> None:
    async with Agent(org=tenant.org, namespace=tenant.namespace, agent="help-reader", api_key=tenant.token, base_url=tenant.base_url) as a:
        found = await a.ops.help.search(query="how do I give another agent's poster auto trust", limit=5)
        assert found["available"] and found["hits"]
        top = found["hits"][0]
        section = await a.ops.help.get(page=top["page"], anchor=top["anchor"])
        assert section["page"] == top["page"]
        checked = await a.ops.help.verify(citations=[top["citation"]])
        assert checked["results"][0]["verified"]
        try:
            await a.ops.help.get(page="nowhere.md")
        except LoomError as exc:
            assert exc.code == "RESOURCE_NOT_FOUND"
        else:
            raise AssertionError("help.get of a missing page answered")
